"""Waiting costs no thread, and slow clients cost a bounded time (#38):
hundreds of long-polls held open on a live server while a fresh read, a
save and the health check still answer; a long-poll wakes on an append; a
key past its waiters is answered 429; a client dripping a request head is
cut off at the deadline, one that sends its head in time is served."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from memwarden.engine import OPERATOR, TooManyWaiters, Warden
from memwarden.engine.faces.http._waiting import HeadWatch

from ._http_server import Server, save_body, start_server
from ._sizes import larger

LONG_POLLS = larger(200, 500)  # past the thread pool (40) many times over either way


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # a generous head deadline: 500 connections opened at once on a busy machine must all get their heads in
    running = start_server(tmp_path_factory.mktemp("waiting") / "w.db", "--no-scheduler", "--head-timeout", "30")
    yield running
    running.proc.terminate()
    running.proc.wait(timeout=30)


def test_hundreds_of_long_polls_hold_no_thread(server: Server) -> None:
    async def run() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=LONG_POLLS + 20, max_keepalive_connections=LONG_POLLS + 20)
        headers = {"x-api-key": server.keys["auditor"]}
        async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=60, headers=headers) as c:
            head = (await c.get("/v1/audit/head")).json()["seq"]
            polls = [
                asyncio.create_task(c.get("/v1/events", params={"after": head, "wait": 30})) for _ in range(LONG_POLLS)
            ]
            # paces only: the polls get in (one that came after the save would answer it at once, the same)
            await asyncio.sleep(2.0)
            assert not any(p.done() for p in polls)
            fresh = await c.get("/v1/events", params={"after": 0, "wait": 0})
            assert fresh.status_code == 200
            # answered while every poll still waits: with a thread per waiter the pool was theirs, and
            # this read came only after they ran out their 30 s, empty
            assert not any(p.done() for p in polls)
            saved = await c.post(
                "/v1/memories", json=save_body("woken", ttl="1h"), headers={"x-api-key": server.keys["agent"]}
            )
            assert saved.status_code == 201, saved.text
            # the append wakes every long-poll, which answer with it (not with their wait run out, empty)
            return await asyncio.wait_for(asyncio.gather(*polls), timeout=60)

    answers = asyncio.run(run())
    assert all(a.status_code == 200 for a in answers)
    assert {tuple(e["payload"]["memory_id"] for e in a.json()["events"]) for a in answers} == {("woken",)}
    assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200


def test_a_key_past_its_waiters_is_answered_429(tmp_path: Path) -> None:
    warden = Warden(tmp_path / "w.db")
    watch = HeadWatch(warden, per_key=2, slice_s=0.05)

    async def waiting(n: int) -> None:
        # the waiters in, by the watch's own count (the loop's sleep only yields to them)
        async with asyncio.timeout(30):
            while watch.waiters < n:
                await asyncio.sleep(0.01)

    async def run() -> None:
        first = [asyncio.create_task(watch.wait_past(0, 30, key="k")) for _ in range(2)]
        await waiting(2)
        with pytest.raises(TooManyWaiters) as refused:
            await watch.wait_past(0, 5, key="k")
        assert refused.value.status == 429 and refused.value.field == "wait"
        other = asyncio.create_task(watch.wait_past(0, 30, key="another"))  # another key is not held back
        await waiting(3)
        warden.save(
            memory_id="m",
            kind="external_fact",
            summary="s",
            content="c",
            source_url="https://e.example/m",
            scope={"tenant": "acme"},
            caller=OPERATOR,
        )
        assert await asyncio.wait_for(asyncio.gather(*first, other), timeout=30) == [1, 1, 1]
        assert watch.waiters == 0

    try:
        asyncio.run(run())
    finally:
        warden.close()


def _connect(server: Server) -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


@pytest.fixture
def strict(tmp_path: Path) -> Iterator[Server]:
    running = start_server(tmp_path / "s.db", "--no-scheduler", "--head-timeout", "3")
    yield running
    running.proc.terminate()
    running.proc.wait(timeout=30)


def test_a_client_dripping_its_request_head_is_cut_off(strict: Server) -> None:
    server = strict
    sock = _connect(server)
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        closed = False
        # one header line every 0.25 s (the sleep paces the drip), never the blank line; the server's
        # deadline is 3 s, and a server without one would keep the connection for good: 60 s only
        # bounds the wait of a failing test
        for _ in range(240):
            try:
                sock.sendall(b"X-Drip: 1\r\n")
            except OSError:
                closed = True
                break
            time.sleep(0.25)
            sock.settimeout(0.01)
            try:
                if sock.recv(1024) == b"":
                    closed = True
                    break
            except TimeoutError:
                pass
            except OSError:
                closed = True
                break
        assert closed, "a dripping client kept its connection for 60 s"
    finally:
        sock.close()
    # a client that sends its head in time is served, on a kept-alive connection too
    with httpx.Client(base_url=server.url, timeout=10) as c:
        assert c.get("/healthz").status_code == 200
        time.sleep(0.5)  # paces only: the kept-alive connection idle a moment, then asked again
        assert c.get("/healthz").status_code == 200


def test_serve_documents_its_bounds() -> None:
    from click.testing import CliRunner
    from memwarden.engine.faces.cli import cli

    shown = CliRunner().invoke(cli, ["serve", "--help"]).output
    assert "--head-timeout" in shown and "--max-connections" in shown
