"""Many memwarden processes on one PostgreSQL database: three HTTP servers,
two schedulers, one log, the same guarantees."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from memwarden.engine import OPERATOR, Warden, readback_records
from memwarden.events import FrozenClock

from .._http_server import Server, save_body, start_server
from .._wait import wait_for
from ..conftest import saved
from ..test_mcp import structured

PER_TENANT = 60


def _stop(server: Server) -> None:
    server.proc.terminate()
    server.proc.wait(timeout=30)


@pytest.fixture
def nodes(pg_url: str) -> Iterator[list[Server]]:
    # the three start side by side: each spends its start importing, not waiting on the others
    with ThreadPoolExecutor(3) as pool:
        started = list(pool.map(lambda _: start_server(pg_url, "--no-scheduler"), range(3)))
    yield started
    for server in started:
        _stop(server)


def _mcp_ids(server: Server, tenant: str) -> set[str]:
    async def main() -> set[str]:
        async with (
            httpx2.AsyncClient(headers={"x-api-key": server.keys["multi"]}, timeout=30) as http,
            Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client,
        ):
            found = await client.call_tool("memory_query", {"tenant": tenant, "limit": 500})
            return {m["memory_id"] for m in structured(found)["memories"]}

    return asyncio.run(main())


def test_a_revocation_through_one_node_holds_on_every_other_at_once(nodes: list[Server]) -> None:
    a, b, c = nodes
    with a.client("multi") as agent:
        for i in range(PER_TENANT):
            for tenant in ("acme", "globex"):
                saved = agent.post("/v1/memories", json=save_body(f"{tenant}-{i}", tenant=tenant))
                assert saved.status_code == 201
    token = saved.json()["seq"]  # node a's consistency token: every node shares the store's secret
    with b.client("multi") as on_b:
        assert len(on_b.get("/v1/memories", params={"tenant": "acme", "limit": 500}).json()["memories"]) == PER_TENANT
    with a.client("security") as security:
        done = security.post("/v1/revocations", json={"selector": {"tenant": "acme"}, "reason": "leak"})
    assert done.status_code == 201, done.text
    # from the moment it returned: every read path of every other node
    for node in (b, c):
        with node.client("multi") as agent:
            for params in ({}, {"min_seq": token}):
                listed = agent.get("/v1/memories", params={"tenant": "acme", "limit": 500, **params}).json()
                assert listed["memories"] == [], node.url
                one = agent.get("/v1/memories/acme-0", params={"tenant": "acme", **params}).json()
                assert one["usable"] is False and one["reason"] == "revoked"
                searched = agent.get("/v1/memories", params={"tenant": "acme", "text": "acme-1", **params}).json()
                assert searched["memories"] == []
                kept = agent.get("/v1/memories", params={"tenant": "globex", "limit": 500, **params}).json()
                assert len(kept["memories"]) == PER_TENANT
        assert _mcp_ids(node, "acme") == set()
        assert len(_mcp_ids(node, "globex")) == PER_TENANT


def test_a_save_racing_a_revocation_on_another_node_never_ends_usable(nodes: list[Server]) -> None:
    a, b, _ = nodes
    fetched = "2026-01-01T00:00:00Z"  # before any revocation issued now: covered by it
    stop = threading.Event()
    saved: list[str] = []
    tried: list[int] = []

    def save_on_b() -> None:
        with b.client("multi") as agent:
            n = 0
            while not stop.is_set():
                body = save_body(f"race-{n}", tenant="globex", fetched_at=fetched, scope={"project": "hot"})
                if agent.post("/v1/memories", json=body).status_code == 201:
                    saved.append(f"race-{n}")
                n += 1
                tried.append(n)

    racer = threading.Thread(target=save_on_b)
    racer.start()
    try:
        wait_for(lambda: saved, what="node b saving")
        with a.client("security") as security:
            done = security.post(
                "/v1/revocations", json={"selector": {"tenant": "globex", "project": "hot"}, "reason": "race"}
            )
        before = len(tried)  # saves go on after it (refused, or made and then covered)
        wait_for(lambda: len(tried) >= before + 3, what="node b saving after the revocation")
    finally:
        stop.set()
    racer.join()
    assert done.status_code == 201 and saved
    with b.client("multi") as agent:
        listed = agent.get("/v1/memories", params={"tenant": "globex", "project": "hot", "limit": 500}).json()
        assert listed["memories"] == []
        for memory_id in saved:
            assert agent.get(f"/v1/memories/{memory_id}", params={"tenant": "globex"}).json()["usable"] is False


# -- two schedulers -----------------------------------------------------------------


def _expiring(pg_url: str, count: int) -> None:
    """``count`` memories that expired an hour ago, written straight to the log."""
    w = Warden(pg_url, clock=FrozenClock("2026-01-05T09:00:00Z"))
    expired = {"fetched_at": "2026-01-05T08:00:00Z", "expires_at": "2026-01-05T08:30:00Z"}
    with w.transaction() as tx:
        for i in range(count):
            tx.texts.put("acme", f"e{i}", 1, f"summary {i} 요약", f"content {i} 한국어 내용")
        tx.append([saved(i, memory_id=f"e{i}", **expired) for i in range(count)])
    w.close()


def _scheduler(pg_url: str, out: Path) -> subprocess.Popen[str]:
    exe = str(Path(sys.executable).with_name("memwarden"))
    log = open(out, "w", encoding="utf-8")
    proc = subprocess.Popen(
        [exe, "--db", pg_url, "scheduler", "--interval", "0.3"],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    log.close()
    return proc


def _until_running(*logs: Path) -> None:
    """Each scheduler has said it runs: what follows meets both, not one
    that happened to start first."""
    deadline = time.monotonic() + 60
    while not all(log.exists() and "scheduler running" in log.read_text(encoding="utf-8") for log in logs):
        assert time.monotonic() < deadline, [log.read_text(encoding="utf-8") for log in logs if log.exists()]
        time.sleep(0.05)


def _count(pg_url: str, sql: str) -> Any:
    with psycopg.connect(pg_url) as conn:
        return conn.execute(sql).fetchone()[0]  # type: ignore[index]


def test_two_schedulers_write_each_expiry_once_and_one_takes_over_from_a_killed_one(
    pg_url: str, tmp_path: Path
) -> None:
    _expiring(pg_url, 6000)
    first = _scheduler(pg_url, tmp_path / "first.log")
    deadline = time.monotonic() + 60
    while _count(pg_url, "SELECT count(*) FROM events WHERE type = 'memory.expired'") == 0:
        assert time.monotonic() < deadline, (tmp_path / "first.log").read_text()
        time.sleep(0.02)
    second = _scheduler(pg_url, tmp_path / "second.log")
    os.kill(first.pid, signal.SIGKILL)  # in the middle of its sweep, holding the claim
    first.wait()
    try:
        deadline = time.monotonic() + 60
        while _count(pg_url, "SELECT count(*) FROM memories WHERE status = 'usable'") > 0:
            assert time.monotonic() < deadline, (tmp_path / "second.log").read_text()
            time.sleep(0.1)
    finally:
        second.terminate()
        second.wait(timeout=30)
    assert _count(pg_url, "SELECT count(*) FROM events WHERE type = 'memory.expired'") == 6000
    assert _count(pg_url, "SELECT count(DISTINCT stream) FROM events WHERE type = 'memory.expired'") == 6000
    assert Warden(pg_url).audit_verify(caller=OPERATOR)["ok"]


def test_two_schedulers_read_a_revocation_back_once(pg_url: str, tmp_path: Path) -> None:
    w = Warden(pg_url)
    for i in range(30):
        w.save(
            memory_id=f"r{i}",
            kind="external_fact",
            summary=f"요약 {i}",
            content=f"내용 {i}",
            source_url=f"https://src.example/{i}",
            scope={"tenant": "acme"},
            caller=OPERATOR,
        )
    schedulers = [_scheduler(pg_url, tmp_path / f"s{n}.log") for n in range(2)]
    try:
        _until_running(*(tmp_path / f"s{n}.log" for n in range(2)))
        revoked = w.revoke({"tenant": "acme"}, reason="leak", by="sec", caller=OPERATOR)
        wait_for(
            lambda: _count(pg_url, "SELECT count(*) FROM events WHERE type = 'readback.confirmed'"),
            what="the read-back confirmed",
        )
        # several more ticks of both, each a chance to read it back again: this wait can let a
        # double read-back go unseen, never fail a correct run
        time.sleep(1.5)
    finally:
        for proc in schedulers:
            proc.terminate()
            proc.wait(timeout=30)
    assert _count(pg_url, "SELECT count(*) FROM events WHERE type LIKE 'readback.%'") == 1
    assert readback_records(w, revoked.revocation_id, caller=OPERATOR)["confirmed"]
    w.close()


def test_the_events_long_poll_wakes_when_another_node_appends(nodes: list[Server]) -> None:
    a, b, _ = nodes
    head = a.head()
    answer: dict[str, Any] = {}

    def poll() -> None:
        with b.client("auditor") as auditor:
            answer["body"] = auditor.get("/v1/events", params={"after": head, "wait": 60}).json()

    waiting = threading.Thread(target=poll)
    waiting.start()
    time.sleep(0.5)  # paces only: a poll that came after the save would answer it at once, the same
    with a.client("multi") as agent:
        assert agent.post("/v1/memories", json=save_body("woke", tenant="acme")).status_code == 201
    waiting.join(timeout=90)
    # woken by the other node's append: a poll that ran out its wait answers no event
    assert [e["payload"]["memory_id"] for e in answer["body"]["events"]] == ["woke"]


def test_a_client_of_any_node_sees_the_one_log(nodes: list[Server]) -> None:
    heads = set()
    for node in nodes:
        with httpx.Client(base_url=node.url, headers={"x-api-key": node.keys["auditor"]}) as auditor:
            heads.add(auditor.get("/v1/audit/head").json()["hash"])
    assert len(heads) == 1
