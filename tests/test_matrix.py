"""Every path that names or lists memories, against a live server on
loopback: key (agent bound to a name, agent, agent of two tenants,
security, auditor) x tenant (own, other) x agent (own, other), over two
tenants holding the same ids, agent names and texts, ids with ``:``,
``/``, ``%`` and Hangul. A memory a key may not see answers exactly as one
that does not exist, and nothing a key is refused writes anything. Search
by meaning (HTTP, MCP, the console) is held to the same rights: beside the
expired targets, each tenant holds usable ones with the same texts and
vectors, which only the keys that may see them ever find."""

from __future__ import annotations

import asyncio
import html
import json
import re
from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from memwarden.engine import OPERATOR, HashEmbedder, Warden

from ._http_server import Server, start_server
from .backends import Backend
from .conftest import Cli

TENANTS = ("acme", "globex")
IDS = ("shared", "a:b", "a/b", "50%", "메모-1")
AGENTS = ("bot", "other")
# what each key of start_server may see: (tenants or None for all, bound agent)
RIGHTS: dict[str, tuple[tuple[str, ...] | None, str | None]] = {
    "agent": (("acme",), "bot"),
    "agent2": (("globex",), None),
    "multi": (("acme", "globex"), None),
    "security": (None, None),
    "auditor": (None, None),
}
TARGETS = [(t, m, AGENTS[i % 2]) for t in TENANTS for i, m in enumerate(IDS)]
# usable now, for search to find: the same ids and texts in both tenants,
# each text with a word of its own ("kw0" ...) to find it alone
FRESH = [(t, f"f-{m}", AGENTS[i % 2], f"kw{i}") for t in TENANTS for i, m in enumerate(IDS)]
EMBEDDER = '[embedder]\nkind = "hash"\ndims = 64\n'


def visible(who: str, tenant: str, agent: str) -> bool:
    tenants, bound = RIGHTS[who]
    return (tenants is None or tenant in tenants) and (bound is None or agent == bound)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, backend: Backend) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("matrix")
    db = backend.db(folder, "matrix.db")
    w = Warden(db, embedder=HashEmbedder(64))  # the server's own embedder (EMBEDDER)
    past = w.clock.now() - timedelta(hours=2)  # all expired: every memory is due
    for tenant, memory_id, agent in TARGETS:
        w.save(
            memory_id=memory_id,
            kind="external_fact",
            summary=f"같은 요약 same words {memory_id}",
            content=f"같은 내용 same text {memory_id}",
            source_url="callable:unregistered",  # a re-check fails at once, without a network
            scope={"tenant": tenant, "agent": agent},
            fetched_at=past,
            ttl="1h",
            caller=OPERATOR,
        )
        w.memory_save(tenant=tenant, agent=agent, key="MEMORY.md", content=f"# rules of {agent}", caller=OPERATOR)
    for tenant, memory_id, agent, word in FRESH:
        w.save(
            memory_id=memory_id,
            kind="fresh_fact",  # not the listings' kind, nor their words: those tests list TARGETS
            summary=f"새 요약 fresh words {word}",
            content=f"새 내용 fresh text {word}",
            source_url="callable:unregistered",
            scope={"tenant": tenant, "agent": agent},
            ttl="6h",
            caller=OPERATOR,
        )
    w.close()
    policy = folder / "policy.toml"
    policy.write_text(EMBEDDER, encoding="utf-8")
    server = start_server(db, "--no-scheduler", policy_file=policy)
    yield server
    server.proc.terminate()
    server.proc.wait(timeout=30)


def head(server: Server) -> int:
    return server.head()


def path_of(memory_id: str, tail: str = "") -> str:
    return f"/v1/memories/{quote(memory_id, safe='')}{tail}"


def same_as_missing(response: httpx.Response, ghost: httpx.Response, memory_id: str, ghost_id: str) -> bool:
    return response.status_code == ghost.status_code == 404 and response.text == ghost.text.replace(ghost_id, memory_id)


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


def call(server: Server, who: str, calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[bool, str]]:
    async def main() -> list[tuple[bool, str]]:
        async with (
            httpx2.AsyncClient(headers={"x-api-key": server.keys[who]}, timeout=30) as http,
            Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client,
        ):
            out = []
            for name, args in calls:
                result = await client.call_tool(name, args)
                out.append((result.is_error, result.content[0].text))
            return out

    return asyncio.run(main())


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


# -- search by meaning: the same rights as the list --------------------------------------------

MODES = ("text", "vector", "hybrid")


def fresh_seen(who: str, tenant: str) -> set[str]:
    return {m for t, m, a, _ in FRESH if t == tenant and visible(who, t, a)}


def found_expected(who: str, tenant: str, mode: str, found: Iterable[str]) -> bool:
    """Whether ``found`` is what a search for "fresh words" may answer
    ``who``: every fresh memory it may see and, where the vector half looks,
    any of its agents' Memory API entries (usable, and answered where their
    vector is near enough: above the similarity floor); nothing else."""
    entries = {f"mem:{a}:MEMORY.md" for a in AGENTS if visible(who, tenant, a)} if mode != "text" else set()
    return fresh_seen(who, tenant) <= set(found) <= fresh_seen(who, tenant) | entries


def refused_tenant(who: str, tenant: str) -> bool:
    tenants, _ = RIGHTS[who]
    return tenants is not None and tenant not in tenants


def result_ids(answer: httpx.Response | dict[str, Any]) -> list[str]:
    data = answer.json() if isinstance(answer, httpx.Response) else answer
    return [r["memory_id"] for r in data["results"]]


@pytest.mark.parametrize("who", sorted(RIGHTS))
def test_http_search_holds_the_lists_rights(live: Server, who: str) -> None:
    staff = RIGHTS[who][0] is None
    before = head(live)
    with live.client(who) as c:

        def search(tenant: str, query: str, mode: str, **extra: Any) -> httpx.Response:
            body = {"tenant": tenant, "query": query, "mode": mode, "limit": 100, **extra}
            return c.post("/v1/memories/search", json=body)

        for tenant in TENANTS:
            listed = c.get("/v1/memories", params={"tenant": tenant})
            for mode in MODES:
                found = search(tenant, "fresh words", mode)
                if refused_tenant(who, tenant):  # the list's refusal, word for word
                    assert found.status_code == listed.status_code == 403 and found.json() == listed.json()
                    continue
                assert found.status_code == 200, (who, tenant, mode, found.text)
                assert {r["scope"]["tenant"] for r in found.json()["results"]} == {tenant}
                assert found_expected(who, tenant, mode, result_ids(found)), (who, tenant, mode, result_ids(found))
                hidden = search(tenant, "fresh words", mode, include_hidden=True)
                if not staff:
                    assert hidden.status_code == 403, (who, hidden.text)
                    continue
                rows = hidden.json()["results"]
                assert {r["scope"]["tenant"] for r in rows} == {tenant}
                assert fresh_seen(who, tenant) <= set(result_ids(hidden))
                assert all(r["usable"] or r["reason"] for r in rows)
            if refused_tenant(who, tenant):
                continue
            # a memory the key may not see is searched as one that does not exist
            for mode in ("text", "hybrid"):
                # every vector the key may see answered, however far: the sets compare whole
                floor = {"min_similarity": -1} if mode == "hybrid" else {}
                ghost = search(tenant, "fresh words kw99", mode, **floor)
                for t, m, a, word in FRESH:
                    if t != tenant:
                        continue
                    alone = search(tenant, f"fresh words {word}", mode, **floor)
                    if visible(who, t, a):
                        assert result_ids(alone)[0] == m, (who, t, m, mode)
                    elif mode == "text":
                        assert unplaced(alone.json()) == unplaced(ghost.json()), (who, t, m)
                    else:  # the vector half answers the visible ones, in an order of its own
                        assert set(result_ids(alone)) == set(result_ids(ghost)) and m not in result_ids(alone)
    assert head(live) == before  # a search writes nothing


def unplaced(answer: dict[str, Any]) -> dict[str, Any]:
    """A search's answer without its position: an agent key's is a token, new each time (#58)."""
    return {k: v for k, v in answer.items() if k != "seq"}


def refusal(text: str) -> dict[str, Any]:
    """A tool's refusal without the tool's name it is prefixed with."""
    return json.loads(text.split(": ", 1)[1])


@pytest.mark.parametrize("who", sorted(RIGHTS))
def test_mcp_search_holds_the_lists_rights(live: Server, who: str) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    for tenant in TENANTS:
        calls.append(("memory_query", {"tenant": tenant, "limit": 100}))
        for mode in MODES:
            calls.append(("memory_search", {"tenant": tenant, "query": "fresh words", "mode": mode, "limit": 100}))
        calls.append(("memory_search", {"tenant": tenant, "query": "fresh words kw99", "mode": "text"}))
        for t, _, _, word in FRESH:
            if t == tenant:
                calls.append(("memory_search", {"tenant": tenant, "query": f"fresh words {word}", "mode": "text"}))
    results = iter(call(live, who, calls))
    for tenant in TENANTS:
        listed_error, listed = next(results)
        for mode in MODES:
            error, text = next(results)
            if refused_tenant(who, tenant):
                assert error and listed_error and refusal(text) == refusal(listed), (who, tenant, mode, text)
                continue
            assert not error, text
            got = result_ids(json.loads(text))
            assert found_expected(who, tenant, mode, got), (who, tenant, mode, got)
        ghost_error, ghost = next(results)
        for t, m, a, _ in FRESH:
            if t != tenant:
                continue
            error, text = next(results)
            if refused_tenant(who, tenant):
                assert error and ghost_error and refusal(text) == refusal(ghost) == refusal(listed)
            elif visible(who, t, a):
                assert result_ids(json.loads(text)) == [m]
            else:
                same = unplaced(json.loads(text)) == unplaced(json.loads(ghost))
                assert not error and not ghost_error and same, (who, t, m)


def main_of(page: httpx.Response) -> str:
    """A console page's own part (the header holds the session's token)."""
    return page.text.split('<main id="main">', 1)[1]


@pytest.mark.parametrize("who", sorted(RIGHTS))
def test_console_search_holds_the_lists_rights(live: Server, who: str) -> None:
    from .console.test_console_http import found_rows, signed_in

    def alert(page: httpx.Response) -> str:
        found = re.search(r'<p class="alert" role="alert">(.*?)</p>', page.text)
        assert found, page.text[:300]
        return found[1]

    with signed_in(live, who) as c:
        for tenant in TENANTS:
            listed = c.get("/console/memories", params={"tenant": tenant})
            for mode in MODES:
                page = c.get("/console/memories", params={"tenant": tenant, "similar": "fresh words", "mode": mode})
                if refused_tenant(who, tenant):
                    assert page.status_code == listed.status_code == 403 and alert(page) == alert(listed)
                    continue
                assert page.status_code == 200, (who, tenant, mode, page.text[:300])
                got = [html.unescape(m) for m in found_rows(page.text)]
                assert found_expected(who, tenant, mode, got), (who, tenant, mode, got)
            if refused_tenant(who, tenant):
                continue
            ghost = c.get("/console/memories", params={"tenant": tenant, "similar": "fresh words kw99", "mode": "text"})
            for t, m, a, word in FRESH:
                if t != tenant:
                    continue
                asked = {"tenant": tenant, "similar": f"fresh words {word}", "mode": "text"}
                alone = c.get("/console/memories", params=asked)
                if visible(who, t, a):
                    assert list(found_rows(alone.text)) == [html.escape(m)], (who, t, m)
                else:  # the page of a search that found nothing, but for the words asked
                    assert main_of(alone).replace(word, "kw99") == main_of(ghost), (who, t, m)
