"""Hostile input, each case the issue found giving a 500, a 503 or a
traceback: now a refusal in the documented shape that names the field,
the same limits on every face, and the log unchanged."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from fastapi.testclient import TestClient
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from memwarden.engine import MAX_BATCH, OPERATOR, InvalidInput, KeyStore, Limits, PolicyFile, TooLarge, Warden
from memwarden.events import FrozenClock, content_checksum

from ._http_server import Server, save_body, server  # noqa: F401  (the live server fixture)
from .backends import Backend
from .conftest import Cli

HUGE = "9" * 23


def refused(response: httpx.Response, status: int, field: str) -> dict[str, Any]:
    """A refusal in the documented shape, naming ``field``."""
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert set(body) >= {"error", "field", "problem"} and "detail" not in body, body
    assert body["field"] is not None and field in body["field"], body
    return body


def test_http_hostile_input(server: Server) -> None:  # noqa: F811
    head = server.head()
    with server.client("agent") as c:
        refused(c.post("/v1/memories", json=save_body("t1", ttl="99999999999d")), 422, "ttl")
        refused(c.post("/v1/memories", json=save_body("t2", fetched_at="0001-01-01T00:00:00Z")), 422, "fetched_at")
        refused(c.post("/v1/memories", json=save_body("t3", source_url="not a url")), 422, "source_url")
        refused(c.post("/v1/memories", json=save_body("t4", source_url="https:///nohost")), 422, "source_url")
        refused(c.get("/v1/memories", params={"tenant": "acme", "text": "a\x00b"}), 422, "text")
        refused(c.get("/v1/memories/x", params={"min_seq": HUGE}), 422, "min_seq")
        # a lone surrogate is not text: JSON can carry one, nothing can store it
        raw = json.dumps(save_body("t5"), ensure_ascii=False).replace("t5의 내용", "\\ud800")
        refused(c.post("/v1/memories", content=raw, headers={"content-type": "application/json"}), 422, "content")
        # an upper-case checksum is the same checksum
        content = "대문자 체크섬"
        upper = "sha256:" + content_checksum(content).removeprefix("sha256:").upper()
        ok = c.post("/v1/memories", json=save_body("t6", content=content, checksum=upper))
        assert ok.status_code == 201, ok.text
        # bodies that are not JSON, or JSON nested beyond reason
        bad_utf8 = c.post(
            "/v1/memories", content=b'{"memory_id": "\xff"}', headers={"content-type": "application/json"}
        )
        assert "JSON" in refused(bad_utf8, 400, "body")["problem"]
        nested = '{"a":' * 50_000 + "1" + "}" * 50_000
        deep = c.post("/v1/memories", content=nested, headers={"content-type": "application/json"})
        assert deep.status_code in (400, 413, 422) and "problem" in deep.json() and "detail" not in deep.json()
        # the Memory API: deep JSON content, and a checksum that vouches for no text
        deep_content = "[" * 50_000 + "]" * 50_000
        refused(c.post("/memory/save", json={"agent": "bot", "key": "deep", "content": deep_content}), 413, "content")
        no_text = json.dumps({"text": 5, "checksum": "sha256:" + "0" * 64})
        refused(c.post("/memory/save", json={"agent": "bot", "key": "n", "content": no_text}), 422, "content.text")
        upper_envelope = json.dumps({"text": content, "checksum": upper})
        assert c.post("/memory/save", json={"agent": "bot", "key": "u", "content": upper_envelope}).status_code == 200
    with server.client("auditor") as c:
        refused(c.get("/v1/events", params={"after": HUGE}), 422, "after")
        refused(c.get("/v1/replay", params={"seq": HUGE}), 422, "seq")
        refused(c.get("/v1/memories/t6/explain", params={"as_of": "0001-01-01T00:00:00+14:00"}), 422, "as_of")
        refused(c.get("/v1/replay", params={"as_of": "0001-01-01T00:00:00+14:00"}), 422, "as_of")
        refused(c.get("/v1/audit/verify", params={"against": f"{HUGE}:{'a' * 64}"}), 422, "against")
        forged = c.get("/v1/audit/verify", params={"against": f"0:{'ab' * 32}"}).json()
        assert forged["ok"] is False and forged["extends_anchor"] is False
        genesis = c.get("/v1/audit/verify", params={"against": f"0:{'0' * 64}"}).json()
        assert genesis["ok"] is True
    with server.client("security") as c:
        refused(c.post("/v1/policies/pz", json={"version": int(HUGE)}), 422, "version")
    # a key with bytes that are not ASCII is no key: 401, as on /mcp
    response = httpx.get(f"{server.url}/v1/due", headers={"x-api-key": "mw_\xe9\xe8_secret".encode("latin-1")})
    refused(response, 401, "x-api-key")
    assert server.head() == head + 2  # only the two good saves


def test_cli_hostile_input(run_cli: Cli, tmp_path: Path) -> None:
    base = ["save", "--id", "m", "--kind", "external_fact", "--summary", "s", "--content", "c", "--tenant", "t"]
    for extra, field in (
        (["--source-url", "https://e", "--ttl", "99999999999d"], "ttl"),
        (["--source-url", "not a url"], "source_url"),
        (["--source-url", "https://e", "--fetched-at", "0001-01-01T00:00:00Z"], "fetched_at"),
    ):
        result = run_cli(*base, *extra)
        assert result.exit_code == 2 and field in result.stderr and "Traceback" not in result.stderr, result.stderr
    for args, field in (
        (["policy", "set", "pz", HUGE], "version"),
        (["audit", "verify", "--against", f"{HUGE}:{'a' * 64}"], "against"),
        (["explain", "m", "--as-of", "0001-01-01T00:00:00+14:00"], "as_of"),
        (["replay", "--as-of", "0001-01-01T00:00:00+14:00"], "as_of"),
        (["replay", "--seq", HUGE], "seq"),
        (["query", "--tenant", "t", "--text", "a\x00b"], "text"),
    ):
        result = run_cli(*args)
        assert result.exit_code == 2 and "Traceback" not in result.stderr, (args, result.stderr)
        assert field in result.stderr, (args, result.stderr)
    forged = run_cli("audit", "verify", "--against", f"0:{'ab' * 32}", "--json")
    assert forged.exit_code == 1 and json.loads(forged.stdout)["ok"] is False
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * (1024 * 1024 + 1))
    from_file = [a for a in base if a not in ("--content", "c")]
    result = run_cli(*from_file, "--source-url", "https://e", "--content-file", str(big))
    assert result.exit_code == 2 and "content" in result.stderr and "max_content_bytes" in result.stderr, result.stderr
    assert run_cli.json("audit", "head")["seq"] == 0


def test_the_content_limit_is_one_limit_on_every_face(server: Server, warden: Warden) -> None:  # noqa: F811
    three_mib = "x" * (3 * 1024 * 1024)
    with pytest.raises(TooLarge, match="max_content_bytes"):
        warden.save(
            memory_id="big",
            kind="external_fact",
            summary="s",
            content=three_mib,
            source_url="https://e",
            scope={"tenant": "t"},
            caller=OPERATOR,
        )
    with pytest.raises(TooLarge):
        warden.memory_save(tenant="t", agent="a", key="k", content=three_mib, caller=OPERATOR)
    with pytest.raises(TooLarge):
        warden.cache_put(
            tool="t",
            tool_version="1",
            input_hash="h",
            scope={"tenant": "t"},
            content=three_mib,
            source_url="https://e",
            caller=OPERATOR,
        )
    # the live server was started with --max-content 200000: MCP holds to it too

    async def main() -> Any:
        async with (
            httpx2.AsyncClient(headers={"x-api-key": server.keys["agent"]}, timeout=60) as http,
            Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client,
        ):
            return await client.call_tool(
                "memory_save",
                {
                    "memory_id": "mcp-big",
                    "kind": "external_fact",
                    "summary": "s",
                    "content": "가" * 70_000,
                    "source_url": "https://e.example",
                    "scope": {"tenant": "acme"},
                },
            )

    result = asyncio.run(main())
    assert result.is_error and "content" in result.content[0].text and "max_content_bytes" in result.content[0].text


def test_limits_come_from_the_policy_file(tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text("[limits]\nmax_content_bytes = 10\nmax_derivation_depth = 3\n", encoding="utf-8")
    settings = PolicyFile.read(policy)
    assert settings.limits == Limits(max_content_bytes=10, max_derivation_depth=3)
    policy.write_text("[limits]\nmax_content = 10\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match="limits.max_content"):
        PolicyFile.read(policy)
    policy.write_text("[limits]\nmax_content_bytes = -1\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match="limits.max_content_bytes"):
        PolicyFile.read(policy)


def test_a_derivation_chain_far_past_the_recursion_limit(tmp_path: Path, backend: Backend) -> None:
    """No walk of the derivations recurses once a link: a chain longer than
    the interpreter's recursion limit saves, reads, verifies, explains and
    cascades. The limit is lowered for the test (re-verifying a chain costs
    the square of its length): a recursing walk would fail past its limit
    whatever the limit, so a chain half again as long as a lowered one
    proves what one past the default 1,000 would."""
    # low, with room for the stacks of pytest, the engine and the driver
    before, depth = sys.getrecursionlimit(), 300
    sys.setrecursionlimit(200)
    clock = FrozenClock("2026-01-05T09:00:00Z")
    w = Warden(
        backend.db(tmp_path, "deep.db"), clock=clock, limits=Limits(max_derivation_depth=1500), synchronous="OFF"
    )
    try:
        w.fetchers.register("same", lambda row: f"c{row['memory_id']}")
        for n in range(depth):  # past the recursion limit
            w.save(
                memory_id=f"d{n}",
                kind="permission",
                summary="s",
                content=f"cd{n}",
                source_url="callable:same",
                scope={"tenant": "t"},
                derived_from=[f"d{n - 1}"] if n else (),
                caller=OPERATOR,
            )
        last = f"d{depth - 1}"
        assert w.get(last, caller=OPERATOR).usable
        assert w.verify(last, caller=OPERATOR).outcome in ("verified", "updated")
        assert w.explain(last, caller=OPERATOR)["usable"] is True
        # the chain is cut at the top: the whole chain below goes with it
        w.revoke(selector={"tenant": "t", "ids": ["d0"]}, reason="leak", caller=OPERATOR)
        assert w.get(last, caller=OPERATOR).reason == "derived_from_unusable"
    finally:
        w.close()
        sys.setrecursionlimit(before)


def test_the_derivation_depth_limit(tmp_path: Path, backend: Backend) -> None:
    w = Warden(backend.db(tmp_path, "limit.db"), limits=Limits(max_derivation_depth=3, max_parents=2))
    try:
        for n in range(3):
            w.save(
                memory_id=f"d{n}",
                kind="permission",
                summary="s",
                content="c",
                source_url="https://e",
                scope={"tenant": "t"},
                derived_from=[f"d{n - 1}"] if n else (),
                caller=OPERATOR,
            )
        head = w.log.head().seq
        with pytest.raises(InvalidInput, match="max_derivation_depth"):
            w.save(
                memory_id="d3",
                kind="permission",
                summary="s",
                content="c",
                source_url="https://e",
                scope={"tenant": "t"},
                derived_from=["d2"],
                caller=OPERATOR,
            )
        with pytest.raises(TooLarge, match="max_parents"):
            w.save(
                memory_id="wide",
                kind="permission",
                summary="s",
                content="c",
                source_url="https://e",
                scope={"tenant": "t"},
                derived_from=["d0", "d1", "d2"],
                caller=OPERATOR,
            )
        assert w.log.head().seq == head
    finally:
        w.close()


@pytest.mark.parametrize("max_parents", [2, 1500])
def test_http_takes_as_many_parents_as_the_limit_says(tmp_path: Path, max_parents: int) -> None:
    """The parent limit is the store's (limits.max_parents), the same on
    HTTP as in the engine: no smaller cap of the face's own, no larger one."""
    from fastapi.testclient import TestClient
    from memwarden.engine import KeyStore
    from memwarden.engine.faces.http import create_app

    w = Warden(tmp_path / "parents.db", limits=Limits(max_parents=max_parents))
    key = KeyStore(w).create("agent", tenants=["acme"], caller=OPERATOR)[0]
    parents = [f"p{n}" for n in range(min(max_parents, 1200) + 1)]
    for start in range(0, len(parents), MAX_BATCH):  # a batch holds at most MAX_BATCH
        w.save_many(
            [
                {"memory_id": p, "kind": "permission", "summary": "s", "content": "c", "source_url": "https://e"}
                | {"scope": {"tenant": "acme"}}
                for p in parents[start : start + MAX_BATCH]
            ],
            caller=OPERATOR,
        )
    try:
        with TestClient(create_app(w, scheduler=False, mcp=False)) as client:
            auth = {"x-api-key": key}
            head = w.log.head().seq
            too_many = client.post("/v1/memories", json=save_body("wide", derived_from=parents), headers=auth)
            if max_parents < len(parents):
                assert too_many.status_code == 413, too_many.text
                assert "max_parents" in too_many.text and "derived_from" in too_many.text
                assert w.log.head().seq == head
            within = client.post("/v1/memories", json=save_body("ok", derived_from=parents[:-1]), headers=auth)
            assert within.status_code == 201, within.text
            assert len(w.get("ok", tenant="acme", caller=OPERATOR).derived_from) == len(parents) - 1
    finally:
        w.close()


def test_a_chunked_body_past_the_limit_is_413_naming_the_limit(warden: Warden) -> None:
    """With no Content-Length to refuse it by, the body is counted as it
    arrives: past the limit the answer is the same 413 as a declared one,
    not a complaint about JSON the app could not read."""
    from memwarden.engine.faces.http import create_app

    key = KeyStore(warden).create("agent", tenants=["acme"], caller=OPERATOR)[0]
    limit = warden.limits.longest_body

    def chunks() -> Iterator[bytes]:
        for _ in range(limit // 65_536 + 2):
            yield b" " * 65_536

    with TestClient(create_app(warden, scheduler=False, mcp=False)) as client:
        streamed = client.post("/v1/memories", content=chunks(), headers={"x-api-key": key})
        declared = client.post("/v1/memories", content=b" " * (limit + 1), headers={"x-api-key": key})
    for answer in (streamed, declared):
        assert answer.status_code == 413, answer.text
        assert answer.json()["error"] == "too_large" and answer.json()["field"] == "body"
    assert warden.log.head().seq == 0
