"""Every answer of a read has a size bound (issue 40): a query or a search
stops adding memories once their contents would pass
``limits.max_answer_bytes``, says ``truncated``, and a query's next page
(from ``next_offset``) goes on with nothing lost or repeated, on the Python
API, over HTTP, MCP and the CLI; the engine's own readers page on."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from memwarden.engine import OPERATOR, InvalidInput, Limits, Warden
from memwarden.engine._readback import python_path
from memwarden.events import FrozenClock

from ._http_server import Server, save_body, start_server
from .backends import Backend

CONTENT = 2000  # the largest content in the Python API's tests
BUDGET = 5000  # their answer's bound: three memories of about 1,500 bytes fit, four do not
COUNT = 12


def text_of(i: int, size: int) -> str:
    # a word every test searches for, then a non-ASCII tail: the bound counts UTF-8 bytes, not characters
    # (short words: PostgreSQL's text index refuses a word past 2,047 bytes)
    head = f"needle m{i:02} "
    return head + "가나다 " * ((size - len(head)) // 10)


def size_of(view: Any) -> int:
    return 0 if view.content is None else len(view.content.encode("utf-8"))


@pytest.fixture
def bounded(db_path: Path, clock: FrozenClock) -> Iterator[Warden]:
    w = Warden(db_path, clock=clock, limits=Limits(max_content_bytes=CONTENT, max_answer_bytes=BUDGET))
    w.save_many(
        [
            {
                "memory_id": f"m{i:02}",
                "kind": "external_fact",
                "summary": f"summary {i}",
                "content": text_of(i, 1500),
                "source_url": f"https://src.example/{i}",
                "scope": {"tenant": "acme"},
                "ttl": "3650d",  # usable at the frozen clock and at the CLI's real one
                "embedding": [1.0, float(i)],
            }
            for i in range(COUNT)
        ],
        caller=OPERATOR,
    )
    yield w
    w.close()


def test_a_query_stops_at_the_bound_and_pages_on_without_loss_or_repeat(bounded: Warden) -> None:
    everything = [v.memory_id for v in bounded.query(tenant="acme", limit=100, with_content=False, caller=OPERATOR)]
    assert len(everything) == COUNT
    seen: list[str] = []
    offset = 0
    while True:
        page = bounded.query(tenant="acme", limit=100, offset=offset, caller=OPERATOR)
        assert sum(size_of(v) for v in page) <= BUDGET and page
        assert all(v.content is not None for v in page)
        seen += [v.memory_id for v in page]
        if not page.truncated:
            assert page.next_offset is None
            break
        assert page.next_offset == offset + len(page)
        offset = page.next_offset
    assert seen == everything  # the same order, nothing lost, nothing twice
    # a page that ends at its limit is not truncated: the bound is only the bytes
    assert not bounded.query(tenant="acme", limit=2, caller=OPERATOR).truncated
    # without contents nothing counts against the bound
    assert not bounded.query(tenant="acme", limit=100, with_content=False, caller=OPERATOR).truncated


def test_a_search_stops_at_the_bound_best_first(bounded: Warden) -> None:
    ranked = bounded.search(
        tenant="acme", vector=[1.0, 11.0], mode="vector", limit=COUNT, with_content=False, caller=OPERATOR
    )
    assert len(ranked) == COUNT and not ranked.truncated
    found = bounded.search(tenant="acme", vector=[1.0, 11.0], mode="vector", limit=COUNT, caller=OPERATOR)
    assert found.truncated and sum(size_of(f.view) for f in found) <= BUDGET
    assert [f.view.memory_id for f in found] == [f.view.memory_id for f in ranked][: len(found)]
    assert all(f.view.content == text_of(int(f.view.memory_id[1:]), 1500) for f in found)
    texts = bounded.search(tenant="acme", query_text="needle", mode="text", limit=COUNT, caller=OPERATOR)
    assert texts.truncated and sum(size_of(f.view) for f in texts) <= BUDGET


def test_the_read_back_pages_on_past_the_bound(bounded: Warden) -> None:
    ids = [f"m{i:02}" for i in range(COUNT)]
    assert sorted(m for m, _ in python_path(bounded)("acme", ids)) == ids


def test_the_bound_is_refused_below_the_largest_content() -> None:
    with pytest.raises(InvalidInput) as refused:
        Limits.from_settings({"max_content_bytes": 2000, "max_answer_bytes": 1000})
    assert refused.value.field == "limits.max_answer_bytes"
    assert Limits.from_settings({"max_answer_bytes": 2**24}).max_answer_bytes == 2**24


# -- the faces -------------------------------------------------------------------

LARGE = 60_000  # each content over HTTP: four fit in the server's bound, five do not
SERVER_BUDGET = 250_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, backend: Backend) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("bound")
    policy = folder / "policy.toml"
    # the server's --max-content (200,000) is the content limit; the bound is above it
    policy.write_text(f"[limits]\nmax_content_bytes = 200000\nmax_answer_bytes = {SERVER_BUDGET}\n", encoding="utf-8")
    running = start_server(backend.db(folder, "bound.db"), "--no-scheduler", policy_file=policy)
    with running.client("agent") as client:
        for i in range(COUNT):
            body = save_body(f"big{i:02}", content=text_of(i, LARGE), ttl="6h")
            answer = client.post("/v1/memories", json=body)
            assert answer.status_code == 201, answer.text
    yield running
    running.proc.terminate()
    running.proc.wait(timeout=30)


def test_http_query_pages_past_the_bound(server: Server) -> None:
    with server.client("agent") as client:
        listed = client.get("/v1/memories", params={"tenant": "acme", "limit": 100, "content": "false"}).json()
        everything = [m["memory_id"] for m in listed["memories"] if m["memory_id"].startswith("big")]
        assert len(everything) == COUNT and listed["truncated"] is False and listed["next_offset"] is None
        seen: list[str] = []
        offset = 0
        while True:
            response = client.get("/v1/memories", params={"tenant": "acme", "limit": 100, "offset": offset})
            data = response.json()
            contents = sum(len((m["content"] or "").encode()) for m in data["memories"])
            assert contents <= SERVER_BUDGET and len(response.content) < 6 * SERVER_BUDGET
            seen += [m["memory_id"] for m in data["memories"] if m["memory_id"].startswith("big")]
            if not data["truncated"]:
                break
            offset = data["next_offset"]
        assert seen == everything


def test_http_search_says_truncated(server: Server) -> None:
    with server.client("agent") as client:
        body = {"tenant": "acme", "query": "needle", "mode": "text", "limit": COUNT}
        data = client.post("/v1/memories/search", json=body).json()
        assert data["truncated"] is True and 1 <= len(data["results"]) <= SERVER_BUDGET // LARGE
        assert sum(len(r["content"].encode()) for r in data["results"]) <= SERVER_BUDGET
        alone = client.post("/v1/memories/search", json={**body, "limit": 1}).json()
        assert alone["truncated"] is False and len(alone["results"]) == 1


def test_mcp_and_cli_say_truncated(bounded: Warden, db_path: Any, tmp_path: Path) -> None:
    from click.testing import CliRunner
    from memwarden.engine.faces.mcp import build_server

    async def call(name: str, arguments: dict[str, Any]) -> Any:
        from mcp import Client as McpClient

        async with McpClient(build_server(bounded)) as client:
            result = await client.call_tool(name, arguments)
            assert not result.is_error, result.content
            return result.structured_content or json.loads(result.content[0].text)

    first = asyncio.run(call("memory_query", {"tenant": "acme", "limit": 100}))
    assert first["truncated"] is True and sum(len(m["content"].encode()) for m in first["memories"]) <= BUDGET
    rest = asyncio.run(call("memory_query", {"tenant": "acme", "limit": 100, "offset": first["next_offset"]}))
    assert not {m["memory_id"] for m in first["memories"]} & {m["memory_id"] for m in rest["memories"]}
    found = asyncio.run(call("memory_search", {"tenant": "acme", "query": "needle", "mode": "text", "limit": 12}))
    assert found["truncated"] is True

    from memwarden.engine.faces.cli import cli

    policy = tmp_path / "bound-policy.toml"
    policy.write_text(f"[limits]\nmax_content_bytes = {CONTENT}\nmax_answer_bytes = {BUDGET}\n", encoding="utf-8")
    args = ["--db", str(db_path), "--policy-file", str(policy), "query", "--tenant", "acme", "--json"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["truncated"] is True and data["next_offset"] == len(data["memories"])
    out = CliRunner().invoke(cli, [*args, "--offset", str(data["next_offset"])])
    assert out.exit_code == 0, out.output
    assert not {m["memory_id"] for m in data["memories"]} & {m["memory_id"] for m in json.loads(out.output)["memories"]}
