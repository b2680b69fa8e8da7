"""Where LangGraph's own store tests found ``MemwardenStore`` answering
otherwise than ``InMemoryStore`` and ``SqliteStore``, each point run against
LangGraph's store beside memwarden's (on both backends) where both can
take it: the whole value embedded under the default index config, the
index config exposed, filter keys, namespace labels, ``list_namespaces``
with a fixed tenant, operations handed to ``batch`` directly, and blocking
calls over an ``AsyncClient``. Then that a filter is decided in memwarden's
query, not after it. (``scripts/conformance/langgraph`` runs their suites
whole: ``tests/test_langgraph_conformance.py``.)"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, PutOp
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from memwarden.client import AsyncClient
from memwarden.engine import OPERATOR, Warden
from memwarden.integrations.langgraph import MemwardenStore

from ._http_server import Server, start_server
from .conftest import agent_key

AGENT = agent_key("acme", key_id="lg-parity")
BOTH = agent_key("acme", "globex", key_id="lg-both")


def chars(texts: list[str]) -> list[list[float]]:
    """A small embedding of a text's letters (as LangGraph's tests embed):
    texts of the same letters point the same way."""
    out = []
    for text in texts:
        v = [float(text.count(c)) for c in "abcdefghijklmnopqrstuvwxyz"]
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        out.append([x / norm for x in v])
    return out


@pytest.fixture
def sqlite_store() -> Iterator[SqliteStore]:
    with SqliteStore.from_conn_string(":memory:") as store:
        store.setup()
        yield store


@pytest.fixture(params=["sqlite_store", "memwarden"])
def store(request: pytest.FixtureRequest, warden: Warden) -> BaseStore:
    """LangGraph's ``SqliteStore`` (whose filters read dotted keys as paths,
    as memwarden's do), and memwarden's store on each backend."""
    if request.param == "memwarden":
        return MemwardenStore(warden.acting_as(AGENT), tenant="acme")
    return request.getfixturevalue(request.param)


def test_the_whole_value_is_embedded_under_the_default_index_config(warden: Warden) -> None:
    """``index={"embed", "dims"}`` without fields embeds ``"$"``, the whole
    value as sorted JSON, as LangGraph's stores do: a search ranks by it."""
    embedded: list[str] = []

    def embed(texts: list[str]) -> list[list[float]]:
        embedded.extend(texts)
        return chars(texts)

    ours = MemwardenStore(warden.acting_as(AGENT), tenant="acme", index={"embed": embed, "dims": 26})
    theirs = InMemoryStore(index={"embed": chars, "dims": 26})
    values = {"zebra": {"text": "zany zebra"}, "dogs": {"text": "about dogs"}, "birds": {"text": "bird bird"}}
    for key, value in values.items():
        ours.put(("test",), key, value)
        theirs.put(("test",), key, value)
    assert embedded == [json.dumps(v, sort_keys=True) for v in values.values()]
    found = ours.search(("test",), query="zany zebra")
    assert [i.key for i in found] == [i.key for i in theirs.search(("test",), query="zany zebra")]
    assert found[0].key == "zebra" and found[0].score > found[1].score >= found[2].score
    assert [round(i.score, 5) for i in found] == [
        round(i.score, 5) for i in theirs.search(("test",), query="zany zebra")
    ]


def test_each_indexed_field_is_a_vector_and_an_item_scores_by_its_closest(warden: Warden) -> None:
    """As LangGraph embeds each path's text apart and scores an item by its
    best field (max pooling): an item is found by any one of its fields."""
    config = {"embed": chars, "dims": 26, "fields": ["title", "tags[*]"]}
    ours = MemwardenStore(warden.acting_as(AGENT), tenant="acme", index=config)  # type: ignore[arg-type]
    theirs = InMemoryStore(index=config)  # type: ignore[arg-type]
    values = {
        "a": {"title": "xxxx", "tags": ["zzzz", "yyyy"], "body": "qqqq"},
        "b": {"title": "yyyy", "tags": ["wwww"], "body": "xxxx"},
        "c": {"body": "zzzz"},  # no indexed field: no vector
    }
    for store in (ours, theirs):
        for key, value in values.items():
            store.put(("docs",), key, value)
    for query in ("zzzz", "yyyy", "wwww", "qqqq"):
        found, expected = ours.search(("docs",), query=query), theirs.search(("docs",), query=query)
        assert [(i.key, i.score and round(i.score, 5)) for i in found] == [
            (i.key, i.score and round(i.score, 5)) for i in expected
        ], query
    found = ours.search(("docs",), query="zzzz")
    assert found[0].key == "a" and found[0].score == pytest.approx(1.0)  # by its second field
    assert found[-1].key == "c" and found[-1].score is None


def test_the_index_config_is_exposed_as_langgraphs_stores_expose_it(warden: Warden) -> None:
    class Letters(Embeddings):  # kept as given, as LangGraph keeps it
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return chars(texts)

        def embed_query(self, text: str) -> list[float]:
            return chars([text])[0]

    letters = Letters()
    config = {"embed": letters, "dims": 26, "text_fields": ["title"]}  # SqliteStore's spelling of fields
    store = MemwardenStore(warden.acting_as(AGENT), tenant="acme", index=config)  # type: ignore[arg-type]
    assert store.index_config == config and store.index_config is not config
    assert store.embeddings is letters
    store.put(("docs",), "a", {"title": "zzz", "body": "aaa"})
    store.put(("docs",), "b", {"title": "aaa", "body": "zzz"})
    assert [i.key for i in store.search(("docs",), query="zzz")] == ["a", "b"]  # the title was embedded
    plain = MemwardenStore(warden.acting_as(AGENT), tenant="acme")
    assert plain.index_config is None and plain.embeddings is None


def test_filter_keys_with_hyphens_and_digits_match(store: BaseStore) -> None:
    store.put(("docs",), "hyphen", {"access-level": "public", "user": {"access-level": "nested"}})
    store.put(("docs",), "digit", {"123abc": "ok", "user": {"123abc": "ok2"}})
    for condition, expected in [
        ({"access-level": "public"}, ["hyphen"]),
        ({"user.access-level": "nested"}, ["hyphen"]),
        ({"123abc": "ok"}, ["digit"]),
        ({"user.123abc": "ok2"}, ["digit"]),
    ]:
        assert [i.key for i in store.search(("docs",), filter=condition)] == expected, condition


def test_a_malformed_filter_key_is_refused_as_langgraph_refuses_it(store: BaseStore) -> None:
    store.put(("docs",), "private", {"access": "private", "password": "123"})
    for bad in ["access') = 'public' OR '1'='1' OR json_extract(value, '$.", "a b", "a'b", "$where"]:
        with pytest.raises(ValueError, match="Invalid filter key"):
            store.search(("docs",), filter={bad: "dummy"})


def test_a_filter_key_in_any_script_filters(warden: Warden) -> None:
    """LangGraph's rule, letters and digits of every script allowed (its
    stores take ASCII only): memwarden's content is Korean as often as English."""
    store = MemwardenStore(warden.acting_as(AGENT), tenant="acme")
    store.put(("docs",), "a", {"담당자": "김", "메타": {"언어": "ko"}})
    store.put(("docs",), "b", {"담당자": "이"})
    assert [i.key for i in store.search(("docs",), filter={"담당자": "김"})] == ["a"]
    assert [i.key for i in store.search(("docs",), filter={"메타.언어": "ko"})] == ["a"]


@pytest.mark.parametrize("label", ["alice\n", "alice ", " kim lee", "a%0Ab", "tab\there"])
def test_namespace_labels_with_trailing_newline_or_spaces_are_kept(store: BaseStore, label: str) -> None:
    store.put(("users", "alice"), "k", {"v": 1})
    store.put(("users", label), "k", {"v": 2})
    assert store.get(("users", label), "k").value == {"v": 2}  # type: ignore[union-attr]
    assert store.get(("users", "alice"), "k").value == {"v": 1}  # type: ignore[union-attr]
    assert set(store.list_namespaces(suffix=["alice"], limit=100)) == {("users", "alice")}
    assert set(store.list_namespaces(prefix=["users", label], limit=100)) == {("users", label)}
    assert [i.value for i in store.search(("users", label))] == [{"v": 2}]


def test_a_label_a_scope_cannot_hold_is_its_quoted_form_there(warden: Warden) -> None:
    store = MemwardenStore(warden.acting_as(AGENT), tenant="acme")
    store.put(("notes", "kim lee\n"), "k", {"v": 1})
    store.put(("notes", "kim%20lee%0A"), "k", {"v": 2})  # what the first is quoted to, quoted again
    scopes = {v.memory_id: v.scope["user"] for v in warden.query(tenant="acme", caller=OPERATOR)}
    assert scopes == {"lg:notes/kim%20lee%0A:k": "kim%20lee%0A", "lg:notes/kim%2520lee%250A:k": "kim%2520lee%250A"}


def test_list_namespaces_with_a_fixed_tenant_lists_only_that_tenants(warden: Warden) -> None:
    """One key of two tenants, a store fixed to each: each lists its own
    namespaces, as a LangGraph store lists its own."""
    acme = MemwardenStore(warden.acting_as(BOTH), tenant="acme")
    globex = MemwardenStore(warden.acting_as(BOTH), tenant="globex")
    acme.put(("notes", "kim"), "k", {"v": 1})
    acme.put(("plans",), "k", {"v": 1})
    globex.put(("notes", "lee"), "k", {"v": 2})
    assert acme.list_namespaces() == [("notes", "kim"), ("plans",)]
    assert globex.list_namespaces() == [("notes", "lee")]
    assert acme.list_namespaces(prefix=("notes",)) == [("notes", "kim")]
    assert [i.key for i in globex.search(())] == ["k"] and globex.search(("plans",)) == []


def test_operations_handed_to_batch_are_checked_before_any_runs(store: BaseStore) -> None:
    store.put(("foo", "bar"), "key", {"original": True})
    for bad in [("foo.bar",), ("foo", ""), ("foo", 1)]:
        with pytest.raises(InvalidNamespaceError):
            store.batch([PutOp(("valid",), "key", {}), GetOp(bad, "key")])  # type: ignore[arg-type]
    assert store.get(("valid",), "key") is None
    assert store.get(("foo", "bar"), "key").value == {"original": True}  # type: ignore[union-attr]


class Counting:
    """A caller's ``Memories`` that counts what the store asks of it."""

    def __init__(self, memories: Any) -> None:
        self.memories = memories
        self.asked: list[str] = []

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.memories, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.asked.append(name)
            return found(*args, **kwargs)

        return call


def test_a_filter_is_decided_in_the_query_not_after_it(warden: Warden) -> None:
    """A search whose filter passes 3 of 300 items asks one query, which
    answers only those 3, paged exactly: nothing is read to be dropped."""
    counting = Counting(warden.acting_as(AGENT))
    store = MemwardenStore(counting, tenant="acme")  # type: ignore[arg-type]
    store.batch([PutOp(("docs", "kim", "deep"), f"k{i}", {"n": i, "keep": i < 3}) for i in range(300)])
    counting.asked.clear()
    found = store.search(("docs", "kim", "deep"), filter={"keep": True, "n": {"$gte": 1}}, limit=10)
    assert sorted(i.key for i in found) == ["k1", "k2"] and counting.asked == ["query"]
    page = store.search(("docs",), filter={"keep": True}, limit=1, offset=2)
    assert [i.key for i in page] == ["k0"]  # newest first: k2, k1, k0


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(tmp_path_factory.mktemp("lgparity") / "lg.db", "--no-scheduler")
    yield running
    running.proc.terminate()
    running.proc.wait(timeout=30)


def test_blocking_calls_over_an_async_client_run_on_its_loop(live: Server) -> None:
    """As LangGraph's async stores: a blocking call from another thread runs
    on the loop the store was made in; in that loop's own thread, which it
    would stall, it is refused with ``InvalidStateError``."""

    async def main() -> tuple[Any, Any]:
        async with AsyncClient(live.url, live.keys["agent"]) as mw:
            store = MemwardenStore(mw, tenant="acme")
            await store.aput(("loop",), "k", {"v": "값"})
            with pytest.raises(asyncio.InvalidStateError):
                store.get(("loop",), "k")
            with pytest.raises(asyncio.InvalidStateError):
                store.put(("loop",), "k2", {"v": 1})
            got = await asyncio.to_thread(store.get, ("loop",), "k")
            await asyncio.to_thread(store.put, ("loop",), "k2", {"v": 2})
            return got, await store.aget(("loop",), "k2")

    got, put = asyncio.run(main())
    assert got.value == {"v": "값"} and put.value == {"v": 2}
    # made outside any loop: nothing to run a blocking call on, and it says so
    outside = MemwardenStore(AsyncClient(live.url, live.keys["agent"]), tenant="acme")
    with pytest.raises(TypeError, match="async methods"):
        outside.get(("loop",), "k")
    assert threading.active_count() >= 1
