"""Safe source fetching through every face: an agent names a source, memwarden
fetches it from inside the operator's network. Real HTTP servers on loopback play
the internal services; every path that fetches (HTTP verify, the Memory API, MCP,
the scheduler) must refuse to reach them, and none of them may ever receive a
request."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from memwarden.engine import OPERATOR, Scheduler, TtlPolicy, Warden
from memwarden.events import FrozenClock

from . import _fetch_servers
from ._fetch_servers import SECRET, allowed, spellings
from ._http_server import Server, save_body, start_server
from .backends import Backend

# the loopback servers (fixtures)
allowed_port = _fetch_servers.allowed_port
secret_port = _fetch_servers.secret_port


# -- every path that fetches -------------------------------------------------------------

POLICY = """
[fetch]
allow = ["127.0.0.2/32"]   # stands for the public internet in these tests
timeout = 1.5
max_bytes = 100000
backoff = 1   # each case's host is retried within the test's patience

[kinds.watched]
ttl = "1s"
reverify = true
"""


def cases(secret_port: int, allowed_port: int) -> list[tuple[str, str, str]]:
    """(name, source, the category an agent must see) for every case the issue lists."""
    named = [
        (url.split("//", 1)[1].split(f":{secret_port}")[0], url, "refused_address") for url in spellings(secret_port)
    ]
    return [
        *named,
        (
            "redirect-chain",
            f"http://127.0.0.2:{allowed_port}/chain/3?to=http://127.0.0.1:{secret_port}/secret.txt",
            "refused_address",
        ),
        ("slow-drip", f"http://127.0.0.2:{allowed_port}/drip", "timeout"),
        ("oversized", f"http://127.0.0.2:{allowed_port}/big", "too_large"),
    ]


@pytest.fixture(scope="module")
def guarded(
    tmp_path_factory: pytest.TempPathFactory, secret_port: int, allowed_port: int, backend: Backend
) -> Iterator[Server]:
    """A live server whose operator allowed 127.0.0.2 and nothing else local."""
    folder = tmp_path_factory.mktemp("guarded")
    policy = folder / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    running = start_server(backend.db(folder, "g.db"), "--scheduler-interval", "0.3", policy_file=policy)
    yield running
    running.proc.terminate()
    running.proc.wait(timeout=30)


def assert_no_detail(text: str, port: int) -> None:
    """An agent sees a category, never the address, port or socket error."""
    for leak in (f":{port}", "Errno", "ConnectError", "resolves to", "loopback", SECRET):
        assert leak not in text, (leak, text)


def failure_notes(c: httpx.Client, memory_id: str) -> list[str]:
    history = c.get(f"/v1/memories/{memory_id}/explain").json()["history"]
    return [h["note"] for h in history if h["event"] == "memory.verification_failed"]


def test_http_verify_refuses_every_case(guarded: Server, secret_port: int, allowed_port: int) -> None:
    with guarded.client("agent") as c:
        for n, (name, url, category) in enumerate(cases(secret_port, allowed_port)):
            saved = c.post("/v1/memories", json=save_body(f"v{n}", source_url=url))
            assert saved.status_code == 201, (name, saved.text)
            verified = c.post(f"/v1/memories/v{n}/verify", params={"accept": "true"})
            assert verified.status_code == 200, (name, verified.text)
            result = verified.json()["results"][0]
            assert (result["outcome"], result["detail"]) == ("failed", f"fetch failed: {category}"), name
            assert_no_detail(verified.text, secret_port)
            got = c.get(f"/v1/memories/v{n}")
            assert SECRET not in got.text and got.json()["reason"] == "unknown", name
            assert failure_notes(c, f"v{n}") == [f"fetch failed: {category}"], name
        # an open port and a closed one answer alike: no port scanning
        c.post("/v1/memories", json=save_body("closed", source_url="http://127.0.0.1:9/"))
        answer = c.post("/v1/memories/closed/verify").json()["results"][0]
        assert answer["detail"] == "fetch failed: refused_address"


def test_the_memory_api_source_is_checked_in_every_case(guarded: Server, secret_port: int, allowed_port: int) -> None:
    with guarded.client("agent") as c:
        for n, (name, url, category) in enumerate(cases(secret_port, allowed_port)):
            content = json.dumps({"text": "회의록", "source": url})
            saved = c.post("/memory/save", json={"agent": "bot", "key": f"k{n}", "content": content})
            assert saved.status_code == 200, (name, saved.text)
            verified = c.post(f"/v1/memories/mem:bot:k{n}/verify", params={"accept": "true"})
            result = verified.json()["results"][0]
            assert (result["outcome"], result["detail"]) == ("failed", f"fetch failed: {category}"), name
            assert_no_detail(verified.text, secret_port)
            loaded = c.get("/memory/load", params={"agent": "bot"})
            assert SECRET not in loaded.text


def test_mcp_verify_is_refused_in_every_case(guarded: Server, secret_port: int, allowed_port: int) -> None:
    async def main() -> list[tuple[str, str, dict[str, Any]]]:
        answers = []
        async with (
            httpx2.AsyncClient(headers={"x-api-key": guarded.keys["agent"]}, timeout=30) as http,
            Client(streamable_http_client(f"{guarded.url}/mcp", http_client=http)) as client,
        ):
            for n, (name, url, category) in enumerate(cases(secret_port, allowed_port)):
                arguments = {
                    "memory_id": f"mcp{n}",
                    "kind": "external_fact",
                    "summary": "s",
                    "content": "c",
                    "source_url": url,
                    "scope": {"tenant": "acme"},
                }
                saved = await client.call_tool("memory_save", arguments)
                assert not saved.is_error, (name, saved.content)
                result = await client.call_tool("memory_verify", {"memory_id": f"mcp{n}", "accept": True})
                assert not result.is_error, (name, result.content)
                answers.append((name, category, json.loads(result.content[0].text)))
        return answers

    for name, category, answer in asyncio.run(main()):
        assert (answer["outcome"], answer["detail"]) == ("failed", f"fetch failed: {category}"), name
        assert_no_detail(json.dumps(answer), secret_port)


def test_the_embedded_scheduler_refuses_every_case(guarded: Server, secret_port: int, allowed_port: int) -> None:
    expected = {}
    with guarded.client("agent") as c:
        for n, (name, url, category) in enumerate(cases(secret_port, allowed_port)):
            body = save_body(f"s{n}", source_url=url, kind="watched")
            body.pop("ttl", None)
            assert c.post("/v1/memories", json=body).status_code == 201, name
            expected[f"s{n}"] = (name, f"fetch failed: {category}")
        deadline = time.monotonic() + 60
        pending = dict(expected)
        while pending and time.monotonic() < deadline:
            for memory_id, (name, note) in list(pending.items()):
                notes = failure_notes(c, memory_id)
                if notes:
                    assert set(notes) == {note}, (name, notes)
                    del pending[memory_id]
            time.sleep(0.3)
        assert not pending, f"the scheduler never re-verified {sorted(pending)}"


def test_an_in_process_scheduler_refuses_every_case(
    tmp_path: Path, secret_port: int, allowed_port: int, backend: Backend
) -> None:
    clock = FrozenClock("2026-01-05T09:00:00Z")
    policy = TtlPolicy({"watched": {"ttl": "1h", "reverify": True}})
    w = Warden(
        backend.db(tmp_path, "s.db"), clock=clock, policy=policy, fetchers=allowed(timeout=1.5, max_bytes=100_000)
    )
    try:
        all_cases = cases(secret_port, allowed_port)
        for n, (_, url, _) in enumerate(all_cases):
            w.save(
                memory_id=f"w{n}",
                kind="watched",
                summary="s",
                content="c",
                source_url=url,
                scope={"tenant": "acme"},
                caller=OPERATOR,
            )
        clock.advance("2h")
        Scheduler(w).run_once()
        failed = {e.payload["memory_id"]: e.payload["error"] for e in w.log.read(types=("memory.verification_failed",))}
        assert failed == {f"w{n}": f"fetch failed: {category}" for n, (_, _, category) in enumerate(all_cases)}
        assert all(not w.get(f"w{n}", caller=OPERATOR).usable for n in range(len(all_cases)))
    finally:
        w.close()


def test_serve_allow_local_sources_lets_development_fetch_loopback(
    tmp_path: Path, allowed_port: int, backend: Backend
) -> None:
    from memwarden.engine.faces.http import create_app

    w = Warden(backend.db(tmp_path, "dev.db"))
    try:
        create_app(w, allow_local_sources=True, scheduler=False, mcp=False)
        assert w.fetchers.fetch({"source_url": f"http://127.0.0.2:{allowed_port}/"}).endswith("127.0.0.2")
    finally:
        w.close()


def test_an_allowed_source_is_fetched_through_the_live_server(guarded: Server, allowed_port: int) -> None:
    with guarded.client("agent") as c:
        url = f"http://127.0.0.2:{allowed_port}/page"
        body = save_body("fine", source_url=url, content=f"{SECRET} from 127.0.0.2")
        assert c.post("/v1/memories", json=body).status_code == 201
        answer = c.post("/v1/memories/fine/verify").json()["results"][0]
        assert answer["outcome"] == "verified", answer
        # an unresolvable name is 'unreachable', and that is all the agent learns
        c.post("/v1/memories", json=save_body("pub", source_url="https://memwarden-test.invalid/x"))
        answer = c.post("/v1/memories/pub/verify").json()["results"][0]
        assert answer["outcome"] == "failed" and answer["detail"] == "fetch failed: unreachable"
