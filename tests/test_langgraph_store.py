"""``MemwardenStore`` as LangGraph's ``BaseStore`` documents a store: one
suite run against LangGraph's own ``InMemoryStore`` and against memwarden's
store (on both backends), then what differs on purpose (expiry, revocation,
erasure), then semantic recall with an index config, blocking and awaited."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, ListNamespacesOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore
from memwarden.engine import OPERATOR, Warden
from memwarden.events import FrozenClock
from memwarden.integrations.langgraph import MemwardenStore

from .conftest import agent_key, save_memory

AGENT = agent_key("acme", key_id="lg-bot")


@pytest.fixture(params=["in_memory", "memwarden"])
def store(request: pytest.FixtureRequest, warden: Warden) -> BaseStore:
    if request.param == "in_memory":
        return InMemoryStore()
    return MemwardenStore(warden.acting_as(AGENT), tenant="acme")


def keys(items: list[Any]) -> list[tuple[tuple[str, ...], str]]:
    return sorted((tuple(i.namespace), i.key) for i in items)


# -- what BaseStore documents, on both stores -------------------------------------------------


def test_put_get_update_and_delete(store: BaseStore) -> None:
    ns = ("users", "kim")
    assert store.get(ns, "profile") is None
    store.put(ns, "profile", {"name": "김", "age": 60, "tags": ["a", "b"]})
    item = store.get(ns, "profile")
    assert item is not None and item.value == {"name": "김", "age": 60, "tags": ["a", "b"]}
    assert (tuple(item.namespace), item.key) == (ns, "profile")
    store.put(ns, "profile", {"name": "김", "age": 61})
    assert store.get(ns, "profile").value == {"name": "김", "age": 61}  # type: ignore[union-attr]
    store.delete(ns, "profile")
    assert store.get(ns, "profile") is None
    store.delete(ns, "never-there")  # deleting what is not there is no error


def test_search_finds_what_is_under_a_prefix_and_pages(store: BaseStore) -> None:
    for user in ("kim", "lee"):
        for i in range(3):
            store.put(("users", user, "notes"), f"n{i}", {"text": f"{user} note {i}", "i": i})
    store.put(("teams", "red"), "t", {"text": "a team"})
    assert len(store.search(("users", "kim"))) == 3
    assert len(store.search(("users",), limit=10)) == 6
    assert len(store.search((), limit=100)) == 7
    first, second = store.search(("users",), limit=4), store.search(("users",), limit=4, offset=4)
    assert len(first) == 4 and len(second) == 2 and not set(keys(first)) & set(keys(second))
    assert store.search(("nobody",)) == []


def test_search_filters_as_documented(store: BaseStore) -> None:
    ns = ("docs",)
    store.put(ns, "a", {"status": "active", "score": 5, "meta": {"lang": "ko"}, "tags": ["x", "y"]})
    store.put(ns, "b", {"status": "draft", "score": 2.5, "meta": {"lang": "en"}, "tags": ["x"]})
    store.put(ns, "c", {"status": "active", "score": 1, "meta": {"lang": "ko", "v": 2}})
    cases = {
        "exact": ({"status": "active"}, ["a", "c"]),
        "nested": ({"meta": {"lang": "ko"}}, ["a", "c"]),
        "list": ({"tags": ["x", "y"]}, ["a"]),
        "gt": ({"score": {"$gt": 2}}, ["a", "b"]),
        "gte": ({"score": {"$gte": 2.5}}, ["a", "b"]),
        "lt": ({"score": {"$lt": 2.5}}, ["c"]),
        "lte": ({"score": {"$lte": 2.5}}, ["b", "c"]),
        "ne": ({"status": {"$ne": "active"}}, ["b"]),
        "eq": ({"status": {"$eq": "draft"}}, ["b"]),
        "both": ({"status": "active", "score": {"$gte": 3}}, ["a"]),
    }
    for name, (condition, expected) in cases.items():
        assert sorted(i.key for i in store.search(ns, filter=condition)) == expected, name


def test_list_namespaces_with_prefix_suffix_wildcards_depth_and_paging(store: BaseStore) -> None:
    for ns in [("a", "b", "c"), ("a", "b", "d"), ("a", "e", "c"), ("f", "g")]:
        store.put(ns, "k", {"x": 1})
    assert store.list_namespaces() == [("a", "b", "c"), ("a", "b", "d"), ("a", "e", "c"), ("f", "g")]
    assert store.list_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d")]
    assert store.list_namespaces(suffix=("c",)) == [("a", "b", "c"), ("a", "e", "c")]
    assert store.list_namespaces(prefix=("a", "*", "c")) == [("a", "b", "c"), ("a", "e", "c")]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "e"), ("f", "g")]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "e", "c")]


def test_a_batch_of_the_four_operations(store: BaseStore) -> None:
    store.put(("b",), "old", {"v": 0})
    results = store.batch(
        [
            PutOp(("b",), "new", {"v": 1}),
            GetOp(("b",), "old"),
            SearchOp(("b",)),
            ListNamespacesOp(),
            PutOp(("b",), "old", None),
        ]
    )
    assert results[0] is None and results[1].value == {"v": 0} and results[4] is None  # type: ignore[union-attr]
    assert keys(results[2]) == [(("b",), "old")]  # reads see the store as before the batch's puts
    assert results[3] == [("b",)]
    assert store.get(("b",), "old") is None and store.get(("b",), "new").value == {"v": 1}  # type: ignore[union-attr]


def test_the_async_methods(store: BaseStore) -> None:
    async def main() -> tuple[Any, ...]:
        await store.aput(("x", "y"), "k", {"v": "값"})
        got = await store.aget(("x", "y"), "k")
        found = await store.asearch(("x",))
        listed = await store.alist_namespaces()
        await store.adelete(("x", "y"), "k")
        return got, found, listed, await store.aget(("x", "y"), "k")

    got, found, listed, gone = asyncio.run(main())
    assert got.value == {"v": "값"} and keys(found) == [(("x", "y"), "k")] and listed == [("x", "y")]
    assert gone is None


def test_a_value_holding_control_characters_round_trips(store: BaseStore) -> None:
    # LangMem's tools put {"content": ...}: a NUL in it is the value's, kept
    # exactly (the summary memwarden derives from it is never refused for it)
    value = {"content": "before\x00after \x1b[2J 끝", "tags": ["a"]}
    store.put(("memories",), "nul", value)
    item = store.get(("memories",), "nul")
    assert item is not None and item.value == value


def test_bad_namespaces_are_refused(store: BaseStore) -> None:
    for bad in [(), ("a.b",), ("",)]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "k", {"v": 1})


# -- what differs on purpose -------------------------------------------------------------------


def test_an_expired_item_is_not_returned(warden: Warden, clock: FrozenClock) -> None:
    store = MemwardenStore(warden.acting_as(AGENT), tenant="acme", ttl={"default_ttl": 60})
    store.put(("n",), "short", {"v": 1}, ttl=1)
    store.put(("n",), "default", {"v": 2})
    clock.advance("2m")
    assert store.get(("n",), "short") is None and store.get(("n",), "short", refresh_ttl=True) is None
    assert [i.key for i in store.search(("n",))] == ["default"]
    clock.advance("2h")
    assert store.search(("n",)) == [] and store.list_namespaces() == []


def test_a_revoked_item_is_never_returned_whatever_refresh_ttl_asks(warden: Warden) -> None:
    store = MemwardenStore(warden.acting_as(AGENT), tenant="acme")
    store.put(("memories", "kim"), "secret", {"content": "the contractor's project plan"})
    store.put(("memories", "kim"), "keep", {"content": "lunch at noon"})
    warden.revoke({"tenant": "acme", "user": "kim", "ids": ["lg:memories/kim:secret"]}, reason="leak", caller=OPERATOR)
    assert store.get(("memories", "kim"), "secret", refresh_ttl=True) is None
    assert [i.key for i in store.search(("memories",), refresh_ttl=True)] == ["keep"]
    assert store.search(("memories",), query="contractor") == []
    # saved again from the same fetch: refused, as memwarden refuses every resurrection
    with pytest.raises(PermissionError, match="revocation"):
        MemwardenStore(warden.acting_as(AGENT), tenant="acme").batch(
            [PutOp(("memories", "kim"), "secret", {"content": "the contractor's project plan"})]
        )


def test_delete_is_an_erasure_and_the_history_stays(warden: Warden, backend: Any) -> None:
    store = MemwardenStore(warden.acting_as(AGENT), tenant="acme")
    store.put(("memories", "kim"), "pii", {"content": "주민등록번호 900101-1234567"})
    store.delete(("memories", "kim"), "pii")
    assert store.get(("memories", "kim"), "pii") is None
    history = warden.explain("lg:memories/kim:pii", caller=OPERATOR)["history"]
    assert [h["event"] for h in history] == ["memory.saved", "memory.erased"]
    assert b"900101" not in backend.bytes_at_rest(warden.path)


def test_the_scope_a_namespace_maps_to(warden: Warden) -> None:
    MemwardenStore(warden.acting_as(AGENT), tenant="acme").put(("notes", "kim", "work", "2026"), "k", {"v": 1})
    view = warden.get("lg:notes/kim/work/2026:k", caller=OPERATOR)
    assert view.scope | {"agent": None} == {
        "tenant": "acme",
        "project": "notes",
        "permission": None,
        "user": "kim",
        "agent": None,
        "tool": None,
    }
    # tenant first, when the store is not given one; another tenant is the wall
    free = MemwardenStore(warden.acting_as(AGENT))
    free.put(("acme", "p"), "k", {"v": 2})
    assert warden.get("lg:acme/p:k", caller=OPERATOR).scope["project"] == "p"
    with pytest.raises(PermissionError, match="tenant"):
        free.put(("globex", "p"), "k", {"v": 3})
    # a delete there is refused as the put is, rather than answered as a delete of nothing;
    # in a tenant of its own, deleting what is not there changes nothing, as in every store
    save_memory(warden, "lg:p:k", tenant="globex", project="p", content="theirs")
    for namespace in (("globex", "p"), ("globex", "nothing-here")):
        with pytest.raises(PermissionError, match="tenant"):
            free.delete(namespace, "k")
    assert warden.get("lg:p:k", tenant="globex", caller=OPERATOR).content == "theirs"
    free.delete(("acme", "never-saved"), "k")
    # a Warden without a caller would be every right at once: refused at once, with the way out
    with pytest.raises(TypeError, match="acting_as"):
        MemwardenStore(warden)  # type: ignore[arg-type]


# -- semantic recall with an index config, blocking and awaited ---------------------------------

WORDS = ("배포", "점심", "apollo")


def _vectors(texts: list[str]) -> list[list[float]]:
    return [[1.0 if w in t else 0.1 for w in WORDS] for t in texts]


def embed(texts: list[str]) -> list[list[float]]:
    return _vectors(texts)


class AsyncOnly:
    """An async-only embedding function: LangGraph refuses its sync use, so
    a store that answers with it took the async path; ``texts`` is what it embedded."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def __call__(self, texts: list[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return _vectors(texts)


def index(embedding: Any) -> dict[str, Any]:
    return {"embed": embedding, "dims": len(WORDS), "fields": ["text"]}


def scored(items: list[Any]) -> list[tuple[Any, ...]]:
    return [(tuple(i.namespace), i.key, i.value, round(i.score, 6) if i.score is not None else None) for i in items]


NOTES = {
    "deploy": {"text": "배포 승인은 목요일", "tag": "ops"},
    "lunch": {"text": "점심 메뉴", "tag": "life"},
    "apollo": {"text": "apollo 배포 키", "tag": "ops"},
}


def test_async_search_with_an_index_is_the_sync_recall(warden: Warden) -> None:
    embedder = AsyncOnly()
    awaited = MemwardenStore(warden.acting_as(AGENT), tenant="acme", index=index(embedder))
    blocking = MemwardenStore(warden.acting_as(AGENT), tenant="acme", index=index(embed))
    queries = [
        {"query": "배포"},
        {"query": "배포", "filter": {"tag": "ops"}},
        {"query": "점심", "limit": 1, "offset": 1},
    ]

    async def main() -> list[list[Any]]:
        await awaited.abatch([PutOp(("notes", "kim"), k, v) for k, v in NOTES.items()])
        await awaited.aput(("other",), "deploy", {"text": "배포 다른 곳"})
        return [await awaited.asearch(("notes",), **q) for q in queries]

    answers = asyncio.run(main())
    # the puts' fields, then each query, all embedded by the async variant
    assert sorted(embedder.texts[:4]) == sorted([v["text"] for v in NOTES.values()] + ["배포 다른 곳"])
    assert embedder.texts[4:] == [q["query"] for q in queries]
    with pytest.raises(ValueError, match="async"):  # LangGraph refuses its sync use: the answers were awaited
        awaited.search(("notes",), query="배포")
    first = answers[0]
    assert [i.key for i in first] == ["deploy", "apollo", "lunch"]  # best first, by similarity
    assert first[0].score == pytest.approx(1.0) and first[0].score > first[1].score > first[2].score
    assert [i.key for i in answers[1]] == [i.key for i in first if i.value["tag"] == "ops"]
    assert len(answers[2]) == 1
    for q, answer in zip(queries, answers, strict=True):
        assert scored(answer) == scored(blocking.search(("notes",), **q)), q
    # revoked: gone from both paths at once
    warden.revoke({"tenant": "acme", "ids": ["lg:notes/kim:apollo"]}, reason="contract ended", caller=OPERATOR)
    after = asyncio.run(awaited.asearch(("notes",), query="배포"))
    assert [i.key for i in after] == ["deploy", "lunch"]
    assert scored(after) == scored(blocking.search(("notes",), query="배포"))
    # a put's own index: False carries no vector (answered after every scored
    # item, unscored, as InMemoryStore answers it), a list other fields
    blocking.put(("notes", "kim"), "plain", {"text": "배포 without a vector"}, index=False)
    blocking.put(("notes", "kim"), "titled", {"title": "배포", "text": "점심"}, index=["title"])
    now = asyncio.run(awaited.asearch(("notes",), query="배포"))
    assert {i.key for i in now[:2]} == {"deploy", "titled"}
    assert now[-1].key == "plain" and now[-1].score is None and all(i.score is not None for i in now[:-1])
    assert "plain" not in [i.key for i in asyncio.run(awaited.asearch(("notes",), query="배포", limit=3))]
    assert "plain" in [i.key for i in blocking.search(("notes",))], "still an item, found without a query"


def test_a_selective_filter_still_finds_every_match_by_meaning(warden: Warden) -> None:
    """The filter applies after the gate: a search whose first candidates
    all fail it asks for more, until ``limit`` pass or none are left."""
    store = MemwardenStore(warden.acting_as(AGENT), tenant="acme", index=index(embed))
    # 200 near matches the filter refuses, then 3 weaker ones it keeps
    store.batch([PutOp(("notes",), f"n{i}", {"text": "배포 apollo", "tag": "noise"}) for i in range(200)])
    store.batch([PutOp(("notes",), f"k{i}", {"text": "배포", "tag": "keep"}) for i in range(3)])
    found = store.search(("notes",), query="배포 apollo", filter={"tag": "keep"}, limit=3)
    assert sorted(i.key for i in found) == ["k0", "k1", "k2"]
    assert asyncio.run(store.asearch(("notes",), query="배포 apollo", filter={"tag": "keep"}, limit=3)) == found
    # more wanted than exist: every match, and the search ends
    assert len(store.search(("notes",), query="배포", filter={"tag": "keep"}, limit=10)) == 3


def test_the_index_configs_dims_are_held(warden: Warden) -> None:
    """A vector the embedding function makes of another length is refused,
    on put and on search, as the config's ``dims`` says."""
    store = MemwardenStore(
        warden.acting_as(AGENT), tenant="acme", index={"embed": embed, "dims": 4, "fields": ["text"]}
    )
    head = warden.head_seq()
    with pytest.raises(ValueError, match="dims is 4"):
        store.put(("notes",), "k", {"text": "배포"})
    with pytest.raises(ValueError, match="dims is 4"):
        store.search(("notes",), query="배포")
    assert warden.head_seq() == head
