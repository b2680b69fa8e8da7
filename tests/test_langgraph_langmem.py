"""LangMem's memory tools in a ``create_react_agent`` graph driven by a
scripted model (no network), in process and against a live server through
``memwarden.client.Client``; the async client's semantic search on the live
server; and the demo script run as the README says."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langgraph.prebuilt import create_react_agent
from langgraph.store.base import BaseStore, PutOp
from langmem import create_manage_memory_tool, create_search_memory_tool
from memwarden.client import AsyncClient, Client
from memwarden.engine import OPERATOR, Warden
from memwarden.integrations.langgraph import MemwardenStore

from ._http_server import Server, start_server
from .test_langgraph_store import AGENT, NOTES, AsyncOnly, embed, index, scored

# -- LangMem's tools in a LangGraph agent, with a scripted model -----------------------------------


class ScriptedModel(FakeMessagesListChatModel):
    """A chat model that answers from a script (tool calls included) and
    binds tools by ignoring them: the graph runs without a network."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def _call(name: str, args: dict[str, Any]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": uuid.uuid4().hex}])


NAMESPACE = ("memories", "{langgraph_user_id}")


def remember(store: BaseStore, user: str) -> None:
    """An agent that is told two facts and keeps both with LangMem's tool."""
    model = ScriptedModel(
        responses=[
            _call("manage_memory", {"content": "kim prefers green tea", "action": "create"}),
            _call("manage_memory", {"content": "project apollo deploy key is in the vault", "action": "create"}),
            AIMessage(content="noted"),
        ]
    )
    agent = create_react_agent(model, [create_manage_memory_tool(namespace=NAMESPACE)], store=store)
    agent.invoke({"messages": [("user", "remember these")]}, {"configurable": {"langgraph_user_id": user}})


def recall(store: BaseStore, user: str, word: str) -> list[Any]:
    """What an agent searching its memory for ``word`` is handed by LangMem's tool."""
    model = ScriptedModel(responses=[_call("search_memory", {"query": word}), AIMessage(content="done")])
    agent = create_react_agent(model, [create_search_memory_tool(namespace=NAMESPACE)], store=store)
    out = agent.invoke({"messages": [("user", "recall")]}, {"configurable": {"langgraph_user_id": user}})
    return json.loads(out["messages"][-2].content)


def contents(found: list[Any]) -> list[str]:
    return [m["value"]["content"] for m in found]


def test_langmem_tools_store_and_recall_and_forget_what_was_revoked(warden: Warden) -> None:
    store = MemwardenStore(warden.acting_as(AGENT), tenant="acme")
    remember(store, "kim")
    assert contents(recall(store, "kim", "tea")) == ["kim prefers green tea"]
    assert contents(recall(store, "kim", "apollo")) == ["project apollo deploy key is in the vault"]
    # security revokes what the agent learned about project apollo, through memwarden's own API
    leaked = [i.key for i in store.search(("memories", "kim"), query="apollo")]
    warden.revoke(
        {"tenant": "acme", "ids": [f"lg:memories/kim:{k}" for k in leaked]}, reason="contract ended", caller=OPERATOR
    )
    assert contents(recall(store, "kim", "tea")) == ["kim prefers green tea"]
    assert recall(store, "kim", "apollo") == []


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, backend: Any) -> Iterator[Server]:
    running = start_server(backend.db(tmp_path_factory.mktemp("lgstore"), "lg.db"), "--no-scheduler")
    yield running
    running.proc.terminate()
    running.proc.wait(timeout=30)


def test_the_same_agent_against_a_live_server_through_the_client(live: Server) -> None:
    user = f"u{uuid.uuid4().hex[:6]}"
    with Client(live.url, live.keys["multi"]) as mw:
        store = MemwardenStore(mw, tenant="acme")
        remember(store, user)
        assert contents(recall(store, user, "tea")) == ["kim prefers green tea"]
        assert len(recall(store, user, "apollo")) == 1
        with Client(live.url, live.keys["security"]) as security:
            security.revoke({"tenant": "acme", "user": user, "kind": "store_item"}, reason="user left")
        assert recall(store, user, "tea") == [] and recall(store, user, "apollo") == []
        assert store.list_namespaces(prefix=("memories", user)) == []


def test_async_semantic_search_against_a_live_server_through_the_async_client(live: Server) -> None:
    user = f"u{uuid.uuid4().hex[:6]}"
    ns = ("notes", user)
    embedder = AsyncOnly()

    async def main() -> tuple[list[Any], list[Any], list[Any]]:
        async with AsyncClient(live.url, live.keys["multi"]) as mw:
            store = MemwardenStore(mw, tenant="acme", index=index(embedder))
            await store.abatch([PutOp(ns, k, v) for k, v in NOTES.items()])
            found = await store.asearch(ns, query="배포")
            ops = await store.asearch(ns, query="배포", filter={"tag": "ops"}, limit=1)
            async with AsyncClient(live.url, live.keys["security"]) as security:
                await security.revoke({"tenant": "acme", "ids": [f"lg:notes/{user}:apollo"]}, reason="contract ended")
            return found, ops, await store.asearch(ns, query="apollo")

    found, ops, after = asyncio.run(main())
    assert [i.key for i in found] == ["deploy", "apollo", "lunch"] and [i.key for i in ops] == ["deploy"]
    assert len(embedder.texts) == len(NOTES) + 3, "the puts and the queries went through aembed"
    assert "apollo" not in [i.key for i in after] and after, "the revoked memory is never returned"
    with Client(live.url, live.keys["multi"]) as mw:
        blocking = MemwardenStore(mw, tenant="acme", index=index(embed))
        assert scored(blocking.search(ns, query="apollo")) == scored(after)
        assert [i.key for i in blocking.search(ns, query="배포")] == ["deploy", "lunch"]


def test_the_demo_script_runs_as_the_readme_says(tmp_path: Any) -> None:
    """``scripts/langgraph-demo`` against the quick-start server (SQLite,
    the demo key kept beside the database, the scheduler on, as ``scripts/run`` does)."""
    db = tmp_path / "memwarden.db"
    running = start_server(db, "--demo-key", f"{db}.demo-key")
    try:
        port = running.url.rsplit(":", 1)[1]
        demo = Path(__file__).resolve().parents[1] / "scripts" / "langgraph-demo"
        done = subprocess.run(
            [sys.executable, str(demo)],
            env={**os.environ, "MEMWARDEN_DB": str(db), "PORT": port},
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        running.proc.terminate()
        running.proc.wait(timeout=30)
    assert done.returncode == 0, done.stderr
    before, after = [line for line in done.stdout.splitlines() if line.startswith("the agent recalls:")]
    assert "apollo" in before and "green tea" in before
    assert "apollo" not in after and "green tea" in after
    assert "security revoked 1 memory" in done.stdout and "/console/revocations/rev_" in done.stdout
    assert "read-back confirmed in" in done.stdout and "0 still visible, leaked []" in done.stdout
    assert "Deprecat" not in done.stderr, "the demo's console is its story, not LangGraph's warnings"
