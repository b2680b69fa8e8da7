"""The faces of semantic recall (issue 40 point 5): ``POST /v1/memories/search``,
the ``memory_search`` MCP tool and ``Client.search``, each a thin caller of
``Warden.search``: what the gate allows, never a revoked, expired or erased
memory, the tenant wall, refusals naming the field with the log unchanged."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from memwarden.client import Client
from memwarden.engine import OPERATOR, HashEmbedder, Warden, register_embedder
from memwarden.engine._keys import KeyStore
from memwarden.engine.faces.http import create_app
from memwarden.engine.faces.mcp import build_server
from memwarden.events import FrozenClock

from ._http_server import Server, start_server

TEXT = "배포 승인은 검토자 두 명이 필요하다"


def body(memory_id: str, tenant: str = "acme", text: str = TEXT, **extra: Any) -> dict[str, Any]:
    return {
        "memory_id": memory_id,
        "kind": "external_fact",
        "summary": text,
        "content": text,
        "source_url": f"https://src.example/{memory_id}",
        "scope": {"tenant": tenant},
        **extra,
    }


@pytest.fixture
def app(tmp_path: Path, clock: FrozenClock) -> Iterator[tuple[Warden, TestClient, dict[str, str]]]:
    w = Warden(tmp_path / "m.db", clock=clock, embedder=HashEmbedder())
    store = KeyStore(w)
    keys = {
        "agent": store.create("agent", tenants=["acme"], caller=OPERATOR)[0],
        "security": store.create("security", caller=OPERATOR)[0],
    }
    with TestClient(create_app(w, scheduler=False, mcp=False)) as client:
        yield w, client, keys
    w.close()


def search(client: TestClient, key: str, **fields: Any) -> Any:
    return client.post("/v1/memories/search", json=fields, headers={"x-api-key": key})


def test_http_search_answers_only_what_the_gate_allows(
    app: tuple[Warden, TestClient, dict[str, str]], clock: FrozenClock
) -> None:
    w, client, keys = app
    for memory_id in ("ok", "revoked", "expired", "erased"):
        saved = client.post(
            "/v1/memories",
            json=body(memory_id, ttl="1m" if memory_id == "expired" else "6h"),
            headers={"x-api-key": keys["agent"]},
        )
        assert saved.status_code == 201, saved.text
    client.post("/v1/memories", json=body("theirs", tenant="globex"), headers={"x-api-key": keys["security"]})
    w.revoke({"ids": ["revoked"]}, reason="leaked", caller=OPERATOR)
    w.erase(memory_id="erased", reason="asked", caller=OPERATOR)
    clock.advance("2m")
    for mode in ("hybrid", "vector", "text"):
        answer = search(client, keys["agent"], tenant="acme", query="배포 승인", mode=mode)
        assert answer.status_code == 200, answer.text
        data = answer.json()
        assert [r["memory_id"] for r in data["results"]] == ["ok"], mode
        assert w.positions(OPERATOR).taken(data["seq"]) == w.head_seq() and data["results"][0]["score"] > 0
        assert data["results"][0]["content"] == TEXT  # Korean round-trips
    both = search(client, keys["agent"], tenant="acme", query="배포 승인").json()["results"][0]
    assert both["found_by"] == ["text", "vector"] and both["text_rank"] == 1
    # the tenant wall: the agent's key may not ask for globex, and acme's answer never holds it
    assert search(client, keys["agent"], tenant="globex", query="배포").status_code == 403
    hidden = search(client, keys["security"], tenant="acme", query="배포 승인", include_hidden=True).json()
    reasons = {r["memory_id"]: r["reason"] for r in hidden["results"]}
    assert reasons["revoked"] == "revoked" and reasons["expired"] == "expired" and "theirs" not in reasons
    refused = search(client, keys["agent"], tenant="acme", query="배포", include_hidden=True)
    assert refused.status_code == 403 and refused.json()["field"] == "include_hidden", refused.text


def test_http_search_tells_what_was_hidden_and_limits_words_as_a_listing_does(
    app: tuple[Warden, TestClient, dict[str, str]], clock: FrozenClock
) -> None:
    """Issue 58: a search whose only matches were hidden said nothing of
    them; 40 words answered 200 and empty by POST where GET answered 422."""
    _, client, keys = app
    saved = client.post("/v1/memories", json=body("old", ttl="1m"), headers={"x-api-key": keys["agent"]})
    assert saved.status_code == 201, saved.text
    clock.advance("2m")
    for mode in ("hybrid", "vector", "text"):
        data = search(client, keys["agent"], tenant="acme", query="배포 승인", mode=mode).json()
        assert (data["results"], data["hidden"]) == ([], {"expired": 1}), mode
    staff = search(client, keys["security"], tenant="acme", query="배포 승인", include_hidden=True).json()
    assert [r["memory_id"] for r in staff["results"]] == ["old"] and staff["hidden"] == {}
    forty = " ".join(f"word{i}" for i in range(40))
    listing = client.get("/v1/memories", params={"tenant": "acme", "text": forty}, headers={"x-api-key": keys["agent"]})
    assert listing.status_code == 422, listing.text
    for mode in ("hybrid", "text"):
        answer = search(client, keys["agent"], tenant="acme", query=forty, mode=mode)
        assert answer.status_code == 422 and answer.json()["field"] == "query", answer.text
        assert answer.json()["problem"].startswith(listing.json()["problem"].split(",")[0])
    assert search(client, keys["agent"], tenant="acme", query=forty, mode="vector").status_code == 200
    away = [-x for x in HashEmbedder().embed(["배포 승인"])[0]]
    bad = search(client, keys["agent"], tenant="acme", vector=away, min_similarity=1.5)
    assert bad.status_code == 422 and bad.json()["field"] == "min_similarity"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 10_001}, "limit"),
        ({"limit": "5"}, "limit"),  # a body is strict: no text read as a number
        ({"limit": True}, "limit"),  # nor true as 1
        ({"min_similarity": "0.5"}, "min_similarity"),
        ({"weights": [True, 1.0]}, "weights.0"),
        ({"mode": "fuzzy"}, "mode"),
        ({"weights": [1.0]}, "weights"),
        ({"weights": [1.0, 101]}, "weights.1"),
        ({"query": ""}, "query"),
        ({"query": "a\x00b"}, "query"),
        ({"query": None, "vector": [1.0, 2.0]}, "vector"),
        ({"query": None, "vector": ["a"] * 384}, "vector.0"),
        ({"query": None, "vector": [True] * 384}, "vector.0"),  # no bool read as 1.0
        ({"include_hidden": "yes"}, "include_hidden"),  # nor "yes" as true
        ({"with_content": 1}, "with_content"),
        ({"query": None, "vector": [1e300] * 384}, "vector"),  # past a 32-bit float's largest
        ({"query": None}, "query"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_http_search_refusals_name_the_field(
    app: tuple[Warden, TestClient, dict[str, str]], fields: dict[str, Any], field: str
) -> None:
    w, client, keys = app
    head = w.head_seq()
    answer = search(client, keys["agent"], **{"tenant": "acme", "query": "배포", **fields})
    assert answer.status_code == 422, answer.text
    data = answer.json()
    assert {"error", "field", "problem"} <= set(data) and data["field"] == field
    assert w.head_seq() == head


def test_http_search_names_a_lone_surrogate(app: tuple[Warden, TestClient, dict[str, str]]) -> None:
    """JSON may spell a lone surrogate (``\\ud800``); no store can keep or search it."""
    _, client, keys = app
    for body, field in (
        (b'{"tenant": "acme", "query": "tea \\ud800"}', "query"),
        (b'{"tenant": "acme", "query": "tea", "project": "p\\ud800"}', "project"),
    ):
        answer = client.post(
            "/v1/memories/search",
            content=body,
            headers={"x-api-key": keys["agent"], "content-type": "application/json"},
        )
        assert answer.status_code == 422 and answer.json()["field"] == field, answer.text


@pytest.mark.parametrize(
    ("embedding", "problem"),
    [([1.0] * 3, "dimensions"), ([0.0] * 384, "zeros"), ([1.0] * 4097, "4096"), ([1e300] * 384, "at most")],
)
def test_http_saves_check_their_embedding(
    app: tuple[Warden, TestClient, dict[str, str]], embedding: list[float], problem: str
) -> None:
    w, client, keys = app
    head = w.head_seq()
    answer = client.post("/v1/memories", json=body("v", embedding=embedding), headers={"x-api-key": keys["agent"]})
    assert answer.status_code == 422 and answer.json()["field"] == "embedding" and problem in answer.text
    nan = json.dumps(body("v", embedding=[float("nan")] + [1.0] * 383)).encode()
    answer = client.post(
        "/v1/memories", content=nan, headers={"x-api-key": keys["agent"], "content-type": "application/json"}
    )
    assert answer.status_code == 422 and answer.json()["field"] == "embedding", answer.text
    batch = client.post(
        "/v1/memories/batch", json={"memories": [body("v", embedding=embedding)]}, headers={"x-api-key": keys["agent"]}
    )
    assert batch.status_code == 422, batch.text
    assert w.head_seq() == head
    given = [1.0] + [0.0] * 383
    assert client.post("/v1/memories", json=body("v", embedding=given), headers={"x-api-key": keys["agent"]}).is_success
    found = search(client, keys["agent"], tenant="acme", vector=given, mode="vector", limit=1).json()["results"]
    assert found[0]["memory_id"] == "v" and found[0]["similarity"] == pytest.approx(1.0)


def test_a_failing_embedder_is_503(tmp_path: Path) -> None:
    from memwarden.engine import CallableEmbedder

    def broken(texts: Any) -> Any:
        raise ConnectionError("the model server is down")

    register_embedder("broken-for-tests", broken, 8)
    w = Warden(tmp_path / "b.db", embedder=CallableEmbedder("broken-for-tests", broken, 8))
    key = KeyStore(w).create("agent", tenants=["acme"], caller=OPERATOR)[0]
    with TestClient(create_app(w, scheduler=False, mcp=False)) as client:
        head = w.head_seq()
        answer = search(client, key, tenant="acme", query="배포")
        assert answer.status_code == 503 and answer.json()["error"] == "embedder_failed", answer.text
        assert w.head_seq() == head
    w.close()


def test_the_mcp_tool_searches(tmp_path: Path) -> None:
    w = Warden(tmp_path / "mcp.db", embedder=HashEmbedder())
    w.save(**{**body("mine"), "ttl": "6h"}, caller=OPERATOR)
    w.save(**{**body("gone"), "ttl": "6h"}, caller=OPERATOR)
    w.revoke({"ids": ["gone"]}, reason="leaked", caller=OPERATOR)
    server = build_server(w)

    async def call(arguments: dict[str, Any]) -> Any:
        from mcp import Client as McpClient

        async with McpClient(server) as client:  # in memory, as the local operator
            return await client.call_tool("memory_search", arguments)

    result = asyncio.run(call({"tenant": "acme", "query": "배포 승인"}))
    assert not result.is_error, result.content
    data = result.structured_content or json.loads(result.content[0].text)
    assert [r["memory_id"] for r in data["results"]] == ["mine"] and data["results"][0]["score"] > 0
    refused = asyncio.run(call({"tenant": "acme", "query": "배포", "mode": "fuzzy"}))
    assert refused.is_error and '"field":"mode"' in refused.content[0].text
    w.close()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("search-live")
    policy = folder / "policy.toml"
    policy.write_text('[embedder]\nkind = "hash"\ndims = 64\n', encoding="utf-8")
    running = start_server(folder / "live.db", "--no-scheduler", policy_file=policy)
    yield running
    running.proc.terminate()
    running.proc.wait(timeout=30)


def test_the_client_searches_over_a_live_server(live: Server) -> None:
    with Client(live.url, live.keys["agent"]) as mw:
        mw.save(**body("c1", ttl="6h"))
        mw.save(**body("c2", text="금요일 점심 메뉴", ttl="6h"))
        found = mw.search(tenant="acme", query="배포 승인", limit=1)
        assert [f.view.memory_id for f in found] == ["c1"] and found[0].view.content == TEXT
        assert found.hidden == {} and found.truncated is False  # the answer's page, as the engine's
        assert found[0].score > 0 and "vector" in found[0].found_by
        with pytest.raises(PermissionError):
            mw.search(tenant="globex", query="배포")
        from memwarden.engine import InvalidInput

        with pytest.raises(InvalidInput) as refused:
            mw.search(tenant="acme", query="배포", mode="fuzzy")
        assert refused.value.field == "mode"


def test_the_cli_query_similar(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from memwarden.engine.faces.cli import cli

    policy = tmp_path / "policy.toml"
    policy.write_text('[embedder]\nkind = "hash"\ndims = 64\n', encoding="utf-8")
    base = ["--db", str(tmp_path / "cli.db"), "--policy-file", str(policy)]
    runner = CliRunner()
    for memory_id, text in (("ko", TEXT), ("lunch", "금요일 점심 메뉴")):
        saved = runner.invoke(
            cli,
            [
                *base,
                "save",
                "--id",
                memory_id,
                "--kind",
                "external_fact",
                "--summary",
                text,
                "--content",
                text,
                "--source-url",
                f"https://e/{memory_id}",
                "--tenant",
                "acme",
            ],
        )
        assert saved.exit_code == 0, saved.output
    revoked = runner.invoke(cli, [*base, "revoke", "--id", "lunch", "--reason", "leaked"])
    assert revoked.exit_code == 0, revoked.output
    result = runner.invoke(cli, [*base, "query", "--tenant", "acme", "--similar", "배포 승인", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [r["memory_id"] for r in data["results"]] == ["ko"] and data["results"][0]["found_by"]
    text = runner.invoke(cli, [*base, "query", "--tenant", "acme", "--similar", "배포 승인", "--mode", "vector"])
    assert text.exit_code == 0 and "ko" in text.stdout and "lunch" not in text.stdout
    hidden = runner.invoke(cli, [*base, "query", "--tenant", "acme", "--similar", "점심", "--all", "--json"])
    assert "lunch" in hidden.stdout
    told = runner.invoke(cli, [*base, "query", "--tenant", "acme", "--similar", "점심"])
    assert told.exit_code == 0 and "lunch" not in told.stdout and "hidden: 1 revoked" in told.stderr
    told = runner.invoke(cli, [*base, "query", "--tenant", "acme", "--similar", "점심", "--json"])
    assert json.loads(told.stdout)["hidden"] == {"revoked": 1}
    bad = runner.invoke(cli, [*base, "query", "--tenant", "acme", "--similar", "a\x01b"])
    assert bad.exit_code == 2 and "query" in bad.stderr
    both = runner.invoke(cli, [*base, "query", "--tenant", "acme", "--similar", "배포", "--text", "점심"])
    assert both.exit_code == 2 and "text" in both.stderr  # one search at a time, never one flag ignored


def test_the_langgraph_store_searches_by_meaning_with_an_index(tmp_path: Path) -> None:
    from memwarden.integrations.langgraph import MemwardenStore

    def embed(texts: list[str]) -> list[list[float]]:
        return [[1.0 if "배포" in t else 0.1, 1.0 if "점심" in t else 0.1, 0.5] for t in texts]

    w = Warden(tmp_path / "lg.db")
    store = MemwardenStore(w.acting_as(OPERATOR), tenant="acme", index={"embed": embed, "dims": 3, "fields": ["text"]})
    store.put(("notes",), "deploy", {"text": "배포 승인"})
    store.put(("notes",), "lunch", {"text": "점심 메뉴"})
    store.put(("notes",), "gone", {"text": "배포 비밀"})
    store.delete(("notes",), "gone")  # erased: never found again
    found = store.search(("notes",), query="배포")
    assert [i.key for i in found] == ["deploy", "lunch"] and found[0].score == pytest.approx(1.0)
    assert all(i.score is None for i in store.search(("notes",)))  # no query: the listing, unscored
    w.close()


def test_hybrid_without_an_embedder_is_a_text_search(tmp_path: Path) -> None:
    """The default mode on a store with no [embedder]: the text half alone,
    where a vector search is refused naming what is missing."""
    from memwarden.engine import OPERATOR, InvalidInput, Warden

    with Warden(tmp_path / "m.db") as w:
        w.save(
            memory_id="m1",
            kind="external_fact",
            summary="서울 날씨",
            content="맑음",
            source_url="https://e.example/1",
            scope={"tenant": "acme"},
            caller=OPERATOR,
        )
        found = w.search(tenant="acme", query_text="서울 날씨", caller=OPERATOR)
        assert [f.view.memory_id for f in found] == ["m1"]
        with pytest.raises(InvalidInput) as refused:
            w.search(tenant="acme", query_text="서울", mode="vector", caller=OPERATOR)
        assert refused.value.field == "embedder"
