"""Search by meaning (HTTP, MCP, the console) is held to the rights of the
lists (tests/test_matrix.py): beside the expired targets, each tenant holds
usable ones with the same texts and vectors, which only the keys that may see
them ever find."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable
from typing import Any

import httpx
import pytest

from . import _matrix
from ._http_server import Server
from ._matrix import AGENTS, FRESH, RIGHTS, TENANTS, call, fresh_seen, head, visible

# the matrix's live server (a fixture)
live = _matrix.live


# -- search by meaning: the same rights as the list --------------------------------------------

MODES = ("text", "vector", "hybrid")


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
