"""The matrix's live server on loopback, its keys' rights and the memories it
holds: two tenants holding the same ids, agent names and texts, ids with ``:``,
``/``, ``%`` and Hangul; expired targets to name and list, and usable ones with
the same texts and vectors for search to find."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
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


def fresh_seen(who: str, tenant: str) -> set[str]:
    return {m for t, m, a, _ in FRESH if t == tenant and visible(who, t, a)}


def head(server: Server) -> int:
    return server.head()


def path_of(memory_id: str, tail: str = "") -> str:
    return f"/v1/memories/{quote(memory_id, safe='')}{tail}"


def same_as_missing(response: httpx.Response, ghost: httpx.Response, memory_id: str, ghost_id: str) -> bool:
    return response.status_code == ghost.status_code == 404 and response.text == ghost.text.replace(ghost_id, memory_id)


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
