"""Every path that names or lists memories, against a live server on
loopback: key (agent bound to a name, agent, agent of two tenants,
security, auditor) x tenant (own, other) x agent (own, other), over two
tenants holding the same ids, agent names and texts, ids with ``:``,
``/``, ``%`` and Hangul. A memory a key may not see answers exactly as one
that does not exist, and nothing a key is refused writes anything."""

from __future__ import annotations

import html
import json
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from . import _matrix
from ._http_server import Server
from ._matrix import RIGHTS, TARGETS, TENANTS, call, fresh_seen, head, path_of, same_as_missing, visible
from .conftest import Cli

# the matrix's live server (a fixture)
live = _matrix.live


@pytest.mark.parametrize("who", sorted(RIGHTS))
def test_http_paths_naming_a_memory(live: Server, who: str) -> None:
    writes = who in ("agent", "agent2", "multi", "security")
    with live.client(who) as c:
        for tenant, memory_id, agent in TARGETS:
            ghost_id = f"{memory_id}-never"
            params = {"tenant": tenant}
            for tail in ("", "/explain"):
                got = c.get(path_of(memory_id, tail), params=params)
                if visible(who, tenant, agent):
                    assert got.status_code == 200, (who, tenant, memory_id, got.text)
                    assert got.json()["memory_id"] == memory_id
                    body = got.json()
                    assert (body["scope"]["tenant"] if tail == "" else body["tenant"]) == tenant
                else:
                    ghost = c.get(path_of(ghost_id, tail), params=params)
                    assert same_as_missing(got, ghost, memory_id, ghost_id), (who, tenant, memory_id, got.text)
            before = head(live)
            verified = c.post(path_of(memory_id, "/verify"), params=params)
            if not writes:
                assert verified.status_code == 403
            elif visible(who, tenant, agent):
                assert verified.status_code == 200 and verified.json()["results"][0]["tenant"] == tenant
            else:
                ghost = c.post(path_of(ghost_id, "/verify"), params=params)
                assert same_as_missing(verified, ghost, memory_id, ghost_id), (who, tenant, memory_id)
                assert head(live) == before  # refused: nothing written


@pytest.mark.parametrize("who", sorted(RIGHTS))
def test_http_paths_listing_memories(live: Server, who: str) -> None:
    tenants, bound = RIGHTS[who]
    with live.client(who) as c:
        for tenant in TENANTS:
            expected = {m for t, m, a in TARGETS if t == tenant and visible(who, t, a)}
            listed = c.get("/v1/memories", params={"tenant": tenant, "all": "true", "kind": "external_fact"})
            searched = c.get("/v1/memories", params={"tenant": tenant, "all": "true", "text": "same"})
            loaded = c.get("/memory/load", params={"tenant": tenant, "agent": "other", "history": "1"})
            if tenants is not None and tenant not in tenants:
                assert listed.status_code == searched.status_code == loaded.status_code == 403
                continue
            assert {m["memory_id"] for m in listed.json()["memories"]} == expected
            assert {m["scope"]["tenant"] for m in listed.json()["memories"]} <= {tenant}
            assert {m["memory_id"] for m in searched.json()["memories"] if not m["memory_id"].startswith("mem:")} == (
                expected
            )
            if bound is not None and bound != "other":
                assert loaded.status_code == 403
            else:
                assert [(m["key_name"], m["history"][0]["content"]) for m in loaded.json()["memories"]] == [
                    ("MEMORY.md", "# rules of other")
                ]
        due = c.get("/v1/due").json()["due"]
        expected_due = {(t, m) for t, m, a in TARGETS if visible(who, t, a)}
        assert {(d["tenant"], d["memory_id"]) for d in due if not d["memory_id"].startswith("mem:")} == expected_due


@pytest.mark.parametrize("who", sorted(RIGHTS))
def test_erasures_never_reach_another_tenant_or_agent(live: Server, who: str) -> None:
    """An erasure naming a memory the key may not see answers as one naming
    a missing id: 404 in a tenant of its own (another agent's), 403 in a
    tenant it may not use (what it is told is of its key, the same for both),
    and nothing is written. (A visible one would be erased: the matrix keeps its memories.)"""
    tenants, _ = RIGHTS[who]
    with live.client(who) as c:
        for tenant, memory_id, agent in TARGETS:
            if visible(who, tenant, agent):
                continue
            before = head(live)
            ghost_id = f"{memory_id}-never"
            body = {"tenant": tenant, "reason": "matrix"}  # named: the same id may be the key's own elsewhere
            got = c.post("/v1/erasures", json={**body, "memory_id": memory_id})
            ghost = c.post("/v1/erasures", json={**body, "memory_id": ghost_id})
            if who == "auditor":
                assert got.status_code == ghost.status_code == 403
            elif tenants is not None and tenant not in tenants:
                assert got.status_code == 403 and got.text == ghost.text, (who, tenant, memory_id, got.text)
            else:
                assert same_as_missing(got, ghost, memory_id, ghost_id), (who, tenant, memory_id, got.text)
            assert head(live) == before, (who, tenant, memory_id)


@pytest.mark.parametrize("who", ["agent", "agent2", "multi"])
def test_saves_never_reach_another_tenant_or_agent(live: Server, who: str) -> None:
    tenants, bound = RIGHTS[who]
    with live.client(who) as c:
        for tenant, memory_id, agent in TARGETS:
            if tenants is not None and tenant in tenants and (bound is None or bound == agent):
                continue  # its own: saving would be a new version
            before = head(live)
            body = {
                "memory_id": memory_id,
                "kind": "external_fact",
                "summary": "attacker",
                "content": "attacker",
                "source_url": "https://evil.example",
                "scope": {"tenant": tenant},
            }
            saved = c.post("/v1/memories", json=body)
            api = c.post(
                "/memory/save",
                params={"tenant": tenant},
                json={"agent": agent, "key": "MEMORY.md", "content": "attacker"},
            )
            # the batch checks each item as the single save does: in one
            # with the caller's own new memory, nothing of it is written
            batch = c.post("/v1/memories/batch", json={"memories": [{**body, "memory_id": "fresh-one"}, body]})
            refused = [(e["index"], e["field"], e["error"]) for e in batch.json().get("errors", [])]
            if tenants is not None and tenant not in tenants:
                assert saved.status_code == 403 and api.status_code == 403
                assert batch.status_code == 422 and refused == [
                    (0, "scope.tenant", "ScopeNotAllowed"),
                    (1, "scope.tenant", "ScopeNotAllowed"),
                ]
            else:  # its tenant, another agent's memory: the id is taken, the agent not its own
                assert saved.status_code == 409 and saved.json()["error"] == "id_taken"
                assert api.status_code == 403
                assert batch.status_code == 422 and refused == [(1, "memory_id", "MemoryIdTaken")]
            assert head(live) == before, (who, tenant, memory_id)
    with live.client("security") as c:
        for tenant, memory_id, _ in TARGETS:
            assert "attacker" not in c.get(path_of(memory_id), params={"tenant": tenant}).text


@pytest.mark.parametrize("who", sorted(RIGHTS))
def test_mcp_tools_naming_or_listing_memories(live: Server, who: str) -> None:
    tenants, _ = RIGHTS[who]
    calls: list[tuple[str, dict[str, Any]]] = []
    for tenant, memory_id, _ in TARGETS:
        for name in ("memory_get", "memory_explain", "memory_verify"):
            calls.append((name, {"memory_id": memory_id, "tenant": tenant}))
            calls.append((name, {"memory_id": f"{memory_id}-never", "tenant": tenant}))
    for tenant in TENANTS:
        calls.append(("memory_query", {"tenant": tenant, "include_hidden": True, "limit": 100}))
    before = head(live)
    results = iter(call(live, who, calls))
    for tenant, memory_id, agent in TARGETS:
        for name in ("memory_get", "memory_explain", "memory_verify"):
            (error, text), (ghost_error, ghost_text) = next(results), next(results)
            if name == "memory_verify" and who == "auditor":
                assert error and json.loads(text.split(": ", 1)[1])["error"] == "forbidden"
            elif visible(who, tenant, agent):
                assert not error and json.loads(text)["memory_id"] == memory_id, (who, name, text)
            else:
                assert error and ghost_error and text == ghost_text.replace(f"{memory_id}-never", memory_id)
    for tenant in TENANTS:
        error, text = next(results)
        if tenants is not None and tenant not in tenants:
            assert error and "not bound to tenant" in text
            continue
        data = json.loads(text)
        seen = {m["memory_id"] for m in data["memories"] + data["hidden"] if not m["memory_id"].startswith("mem:")}
        assert seen == {m for t, m, a in TARGETS if t == tenant and visible(who, t, a)} | fresh_seen(who, tenant)
    if who in ("auditor",):
        assert head(live) == before


def test_cli_names_the_tenant_where_an_id_is_in_two(live: Server) -> None:
    cli = Cli(live.db)
    for tenant in TENANTS:
        assert cli.json("get", "a/b", "--tenant", tenant, code=1)["scope"]["tenant"] == tenant
        assert cli.json("explain", "메모-1", "--tenant", tenant)["tenant"] == tenant
    ambiguous = cli("get", "a:b")
    assert ambiguous.exit_code == 2 and "tenant" in ambiguous.stderr
    missing = cli("get", "a:b", "--tenant", "nobody")
    assert missing.exit_code == 1 and "not found" in missing.stderr
    assert cli.json("audit", "head")["seq"] == live.head()  # the server's own store


@pytest.mark.parametrize("who", sorted(RIGHTS))
def test_console_pages_naming_or_listing_memories(live: Server, who: str) -> None:
    """The console asks the same engine with the signed-in key: a memory the
    key may not see is the page of one that does not exist, and a tenant it
    may not see is refused, as on HTTP."""
    from .console.test_console_http import signed_in

    def page_of(tenant: str, memory_id: str) -> httpx.Response:
        return c.get(f"/console/memories/{quote(tenant, safe='')}/{quote(memory_id, safe='')}")

    def without(text: str, memory_id: str) -> str:
        return text.replace(html.escape(memory_id), "").replace(quote(memory_id, safe=""), "")

    with signed_in(live, who) as c:
        for tenant, memory_id, agent in TARGETS:
            got = page_of(tenant, memory_id)
            if visible(who, tenant, agent):
                assert got.status_code == 200 and html.escape(memory_id) in got.text, (who, tenant, memory_id)
            else:
                ghost_id = f"{memory_id}-never"
                ghost = page_of(tenant, ghost_id)
                assert got.status_code == ghost.status_code == 404, (who, tenant, memory_id, got.status_code)
                assert without(got.text, memory_id) == without(ghost.text, ghost_id), (who, tenant, memory_id)
        for tenant in TENANTS:
            listed = c.get("/console/memories", params={"tenant": tenant})
            tenants, _ = RIGHTS[who]
            if tenants is not None and tenant not in tenants:
                assert listed.status_code == 403, (who, tenant)
                continue
            assert listed.status_code == 200, (who, tenant, listed.text[:300])
            shown = {m for t, m, a in TARGETS if t == tenant and f">{html.escape(m)}</a>" in listed.text}
            expected = {m for t, m, a in TARGETS if t == tenant and visible(who, t, a)}
            assert shown == expected, (who, tenant, shown, expected)
