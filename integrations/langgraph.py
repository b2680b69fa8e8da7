"""memwarden as LangGraph's long-term memory store: ``MemwardenStore``, a
``langgraph.store.base.BaseStore`` over a ``memwarden.engine.Memories`` (a
Warden acting for a caller, or ``memwarden.client.Client`` against a server).

    from memwarden.engine import Warden, Principal
    from memwarden.integrations.langgraph import MemwardenStore

    agent = Principal("support-bot", "agent", tenants=("acme",), agent="support-bot")
    store = MemwardenStore(Warden("memwarden.db").acting_as(agent), tenant="acme")
    graph = create_react_agent(model, tools, store=store)

It answers as LangGraph's ``InMemoryStore`` and ``SqliteStore`` do, judged by
their own test suites (``scripts/conformance/langgraph``). With an ``index``
config (``{"embed": ..., "dims": ...}``, and ``"fields"``, or ``"text_fields"``
as ``SqliteStore`` spells it; the whole value, ``"$"``, when neither names
any) a put carries a vector for each text at those paths and
``search(query=...)`` is memwarden's semantic recall, an item scored by the
cosine similarity of its closest, the items without a vector after the
scored ones; ``store.index_config`` and
``store.embeddings`` are the config as given and its embeddings. A
search's filter (dotted keys as paths, ``$eq`` ``$ne`` ``$gt`` ``$gte``
``$lt`` ``$lte``) and namespace prefix are decided in memwarden's query
itself. Every operation is one plan (``_steps``), run blocking by
``batch`` and awaited by ``abatch`` (over an ``AsyncClient``, or a Warden in
a worker thread, with the embeddings' async variant), so the sync and async
paths answer alike; over an ``AsyncClient`` a blocking call from another
thread runs on the loop the store was made in, as LangGraph's async stores
run theirs.

What differs from LangGraph's stores, on purpose (README, "LangGraph"):

* an item is returned by ``get`` and ``search`` only while memwarden's gate
  says it may be used now: an expired item is left out (as with
  ``TTLConfig.omit_expired``), a revoked, quarantined or erased one always,
  whatever ``refresh_ttl`` asks;
* a TTL runs from the put, not from the last read: a memory's freshness is
  a property of when it was fetched, so reads never extend it;
* ``delete`` is an erasure: the value is destroyed, the history that it
  existed stays in the log (``memwarden explain``);
* a batch's puts commit together, all or none: a put a revocation covers
  refuses the batch (``RevokedScope``), where another store would keep it;
* without an index config a search's ``query`` is memwarden's full-text
  search (LangGraph's stores ignore it there);
* a filter key may hold the letters and digits of any script (LangGraph's
  stores take ASCII ones).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterable, Mapping
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path
from memwarden.engine import MAX_BATCH, Memories, MemoryNotFound, MemoryView, Warden
from memwarden.events import parse_ts

from ._items import (
    KIND,
    Namespace,
    NamespaceScope,
    ScopeOf,
    check_labels,
    checked_filter,
    content_of,
    id_prefixes,
    item_of,
    memory_id_of,
    namespace_matches,
    summary_of,
    ttl_of,
    value_of,
)
from ._searching import listing, recall
from ._steps import Ask, Embed, Plan, arun, run

PAGE = 500  # memories a listing of namespaces reads a query for
MAX_VECTORS = 64  # a memory version's vectors (memwarden's bound): an item's first texts
DELETED = "deleted through the LangGraph store"


class MemwardenStore(BaseStore):
    """A LangGraph store whose items are memwarden memories (see the module)."""

    supports_ttl = True

    def __init__(
        self,
        memories: Memories,
        *,
        tenant: str | None = None,
        namespace_scope: ScopeOf | None = None,
        kind: str = KIND,
        ttl: TTLConfig | None = None,
        index: IndexConfig | None = None,
    ) -> None:
        if isinstance(memories, Warden):
            # every operation names its caller: a store holds no rights of its own
            raise TypeError("a Warden acts for a caller: pass warden.acting_as(principal), or a Client")
        self.memories = memories
        self.scope_of = namespace_scope or NamespaceScope(tenant)
        self._filters = NamespaceScope(tenant) if namespace_scope is None else None
        self.kind = kind
        self.ttl_config = ttl
        # the index config as given (LangGraph's stores keep theirs so), and
        # the embeddings made of its "embed"; puts carry the store's own
        # vectors, and a search with a query is semantic recall over them
        self.index_config: IndexConfig | None = dict(index) if index else None  # type: ignore[assignment]
        self.embeddings = ensure_embeddings(index.get("embed")) if index else None
        # the paths embedded: "fields", or "text_fields" as SqliteStore spells
        # it; the whole value ("$") unless either names some
        spec: Mapping[str, Any] = index or {}  # the developer's own keys too ("text_fields")
        given = spec.get("fields") or spec.get("text_fields")
        self._paths = [_path(f) for f in ([given] if isinstance(given, str) else given or ["$"])]
        self._dims = index.get("dims") if index else None
        self._async = inspect.iscoroutinefunction(getattr(memories, "get", None))
        # over an AsyncClient, blocking calls from other threads run on the
        # loop the store was made in, as LangGraph's async stores do theirs
        self._loop = _running_loop() if self._async else None

    # -- BaseStore: one plan per batch, performed blocking or awaited (``_steps``) -----------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        if self._async:
            return self._on_loop(list(ops))
        return run(self._batch(list(ops)), self.memories, self.embeddings)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await arun(self._batch(list(ops)), self.memories, self.embeddings, awaitable=self._async)

    def _on_loop(self, ops: list[Op]) -> list[Result]:
        """A blocking call over an AsyncClient: run on the store's loop from
        another thread; refused in the loop's own thread, which it would stall."""
        if self._loop is None or self._loop.is_closed():
            raise TypeError("this store holds an AsyncClient: use its async methods (aget, asearch, aput, abatch)")
        if _running_loop() is self._loop:
            raise asyncio.InvalidStateError(
                "Synchronous calls to MemwardenStore over an AsyncClient detected in its event loop's thread: "
                "use the async methods (aget, asearch, aput, abatch), or call from another thread"
            )
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), self._loop).result()

    def _batch(self, ops: list[Op]) -> Plan[list[Result]]:
        for op in ops:  # before anything runs, as LangGraph's stores check what batch is handed
            if isinstance(op, (GetOp, PutOp)):
                check_labels(op.namespace)
            elif isinstance(op, SearchOp):
                check_labels(op.namespace_prefix)
            elif isinstance(op, ListNamespacesOp):
                for condition in op.match_conditions or ():
                    check_labels(condition.path)
            else:
                raise ValueError(f"unknown operation: {type(op).__name__}")
        if len(ops) == 1 and isinstance(ops[0], (GetOp, SearchOp)):
            # ``get`` and ``search`` each come as a batch of one: the same plan,
            # without sorting out puts and lists there are none of
            op = ops[0]
            if isinstance(op, GetOp):
                return [*(yield from self._get_many([op]))]  # as a list of results
            return [(yield from self._search(op))]
        results: list[Result] = [None] * len(ops)
        gets = [(i, op) for i, op in enumerate(ops) if isinstance(op, GetOp)]
        found = yield from self._get_many([op for _, op in gets])
        for (i, _), item in zip(gets, found, strict=True):
            results[i] = item
        for i, op in enumerate(ops):
            if isinstance(op, SearchOp):
                results[i] = yield from self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = yield from self._list_namespaces(op)
        # reads see the store as it was before the batch, as in LangGraph's own stores
        yield from self._put([op for op in ops if isinstance(op, PutOp)])
        return results

    # -- reading -----------------------------------------------------------------------------

    def _tenant(self, namespace: Namespace) -> str:
        return self.scope_of(namespace)["tenant"]

    def _get_many(self, ops: list[GetOp]) -> Plan[list[Item | None]]:
        """Each item, if it may be used now: one read for one item, one query
        per tenant for many."""
        if not ops:
            return []
        if len(ops) == 1:
            namespace = tuple(ops[0].namespace)
            memory_id = memory_id_of(namespace, ops[0].key)
            try:
                view = yield Ask("get", {"memory_id": memory_id, "tenant": self._tenant(namespace)})
            except MemoryNotFound:
                return [None]
            # the id was made here from these two: no need to read them back out of it
            return [_item(view, (namespace, ops[0].key))]
        wanted: dict[str, list[str]] = {}
        ids = []
        for op in ops:
            memory_id = memory_id_of(tuple(op.namespace), op.key)
            ids.append((self._tenant(tuple(op.namespace)), memory_id))
            wanted.setdefault(ids[-1][0], []).append(memory_id)
        found: dict[tuple[str, str], Item] = {}
        for tenant, memory_ids in wanted.items():
            unique = list(dict.fromkeys(memory_ids))
            for view in (yield Ask("query", {"tenant": tenant, "ids": unique, "limit": len(unique)})):
                item = _item(view, item_of(view.memory_id))
                if item is not None:
                    found[(tenant, view.memory_id)] = item
        return [found.get(key) for key in ids]

    def _scopes(self, namespace_prefix: Namespace) -> Plan[tuple[list[str], dict[str, str]]]:
        """(tenants, scope filters) a read under ``namespace_prefix`` asks
        the query for: with no tenant in the prefix, every tenant the key may read."""
        if self._filters is None:  # a mapping of the developer's own: narrow by tenant only
            if namespace_prefix:
                return [self._tenant(namespace_prefix)], {}
            tenant: str | None = None
            scope: dict[str, str] = {}
        else:
            tenant, scope = self._filters.filters(namespace_prefix)
        if tenant is not None:
            return [tenant], scope
        return (yield Ask("tenants")), scope

    def _search(self, op: SearchOp) -> Plan[list[SearchItem]]:
        """Semantic recall for a query when the store has an index, full text
        otherwise; either way only what the gate allows, under the prefix and
        through the filter, paged by ``offset`` and ``limit`` (``_searching``)."""
        where = checked_filter(op.filter)
        if self.embeddings is not None and op.query:
            (vector,) = self._sized((yield Embed([op.query], query=True)))
            return (yield from recall(op, vector, where, self._scopes))
        return (yield from listing(op, where, self._scopes, op.query))

    def _list_namespaces(self, op: ListNamespacesOp) -> Plan[list[Namespace]]:
        """The namespaces holding an item that may be used now, read from the
        ids of the tenant's items (those under the conditions' leading
        labels alone, where a prefix names some)."""
        leading: Namespace = ()
        for condition in op.match_conditions or ():
            if condition.match_type == "prefix":
                path = tuple(condition.path)
                leading = path[: path.index("*")] if "*" in path else path
                break
        tenants, scope = yield from self._scopes(leading)
        namespaces: set[Namespace] = set()
        for tenant in tenants:
            offset = 0
            while True:
                ask = {"tenant": tenant, **scope, "id_prefix": id_prefixes(leading), "with_content": False}
                page = yield Ask("query", {**ask, "limit": PAGE, "offset": offset})
                for view in page:
                    item = item_of(view.memory_id)
                    if item is not None and view.usable:
                        namespaces.add(item[0])
                if len(page) < PAGE and not getattr(page, "truncated", False):
                    break
                offset += len(page)
        return _listed(namespaces, op)

    # -- writing -----------------------------------------------------------------------------

    def _sized(self, vectors: list[Any]) -> list[Any]:
        """The embedding function's vectors, each as long as the index config's ``dims`` says."""
        for vector in vectors:
            if isinstance(self._dims, int) and len(vector) != self._dims:
                raise ValueError(f"index dims is {self._dims}; the embedding function answered {len(vector)} numbers")
        return vectors

    def _texts(self, op: PutOp) -> list[str]:
        """The texts a put's vectors are made from, one each: those at its
        ``index`` paths (the store's, unless the put names its own); none:
        not indexed."""
        if self.embeddings is None or op.index is False or op.value is None:
            return []
        paths = self._paths if op.index is None else [_path(f) for f in op.index]
        return [text for path in paths for text in get_text_at_path(op.value, path)]

    def _fields(self, op: PutOp, vectors: list[list[float]]) -> dict[str, Any]:
        """``save``'s fields for a put: one vector per text of its indexed
        fields, as LangGraph embeds each apart (a search scores the item by
        its closest)."""
        namespace = tuple(op.namespace)
        value = dict(op.value or {})
        kind = value.get("kind") if isinstance(value.get("kind"), str) else self.kind
        source = value.get("source_url")
        memory_id = memory_id_of(namespace, op.key)
        fields = {
            "memory_id": memory_id,
            "kind": kind,
            "summary": summary_of(value, op.key),
            "content": content_of(value),
            "source_url": source if isinstance(source, str) else "langgraph:" + memory_id[3:],
            "scope": self.scope_of(namespace),
            "ttl": ttl_of(op.ttl),
        }
        if len(vectors) == 1:
            fields["embedding"] = vectors[0]
        elif vectors:
            fields["embeddings"] = vectors
        return fields

    def _put(self, ops: list[PutOp]) -> Plan[None]:
        # as every LangGraph store: the last put of a key in a batch wins
        ops = list({(tuple(op.namespace), op.key): op for op in ops}.values())
        kept = [op for op in ops if op.value is not None]
        texts = [self._texts(op)[:MAX_VECTORS] for op in kept]
        to_embed = [t for item in texts for t in item]
        # one request to the embeddings for the whole batch
        made = iter(self._sized((yield Embed(to_embed))) if to_embed else [])
        saves = [self._fields(op, [next(made) for _ in item]) for op, item in zip(kept, texts, strict=True)]
        if len(saves) == 1:
            yield Ask("save", saves[0])
        else:
            # LangGraph's batch is not atomic, and memwarden's is capped: a
            # large one is saved in chunks, each its own transaction
            for start in range(0, len(saves), MAX_BATCH):
                yield Ask("save_many", {"memories": saves[start : start + MAX_BATCH]})
        for op in ops:
            if op.value is None:
                namespace = tuple(op.namespace)
                erase = {"memory_id": memory_id_of(namespace, op.key), "tenant": self._tenant(namespace)}
                try:
                    yield Ask("erase", {**erase, "reason": DELETED})
                except MemoryNotFound:
                    continue  # deleting what is not there changes nothing, as in every store


def _path(field: str) -> Any:
    """An index path as ``get_text_at_path`` takes it: the whole value's
    ``"$"`` as it is (tokenized, it would name nothing), any other tokenized."""
    return field if field == "$" else tokenize_path(field)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _item(view: MemoryView, found: tuple[Namespace, str] | None) -> Item | None:
    """The item a memory is, if it is one of this store's (``found``: its
    namespace and key, ``item_of`` its id) and may be used now."""
    if found is None or not view.usable:
        return None
    value = value_of(view.content)
    if value is None:
        return None
    when = parse_ts(view.fetched_at)
    return Item(namespace=found[0], key=found[1], value=value, created_at=when, updated_at=when)


def _listed(namespaces: set[Namespace], op: ListNamespacesOp) -> list[Namespace]:
    chosen = [ns for ns in namespaces if namespace_matches(ns, op.match_conditions or ())]
    if op.max_depth is not None:
        chosen = list({ns[: op.max_depth] for ns in chosen})
    return sorted(chosen)[op.offset : op.offset + op.limit]


__all__ = ["MemwardenStore", "NamespaceScope"]
