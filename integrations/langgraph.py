"""memwarden as LangGraph's long-term memory store: ``MemwardenStore``, a
``langgraph.store.base.BaseStore`` over a ``memwarden.engine.Memories`` (a
Warden acting for a caller, or ``memwarden.client.Client`` against a server).

    from memwarden.engine import Warden, Principal
    from memwarden.integrations.langgraph import MemwardenStore

    agent = Principal("support-bot", "agent", tenants=("acme",), agent="support-bot")
    store = MemwardenStore(Warden("memwarden.db").acting_as(agent), tenant="acme")
    graph = create_react_agent(model, tools, store=store)

With an ``index`` config (``{"embed": ..., "dims": ..., "fields": [...]}``, as
LangGraph's stores take it) puts carry vectors of their ``fields`` and
``search(query=...)`` is memwarden's semantic recall, scored by similarity;
without one it is full text. Every operation is one plan (``_steps``), run
blocking by ``batch`` and awaited by ``abatch`` (over an ``AsyncClient``, or
a Warden in a worker thread, with the embeddings' async variant), so the
sync and async paths answer alike.

What differs from ``InMemoryStore`` and ``SqliteStore``, on purpose:

* an item is returned by ``get`` and ``search`` only while memwarden's gate
  says it may be used now: an expired item is left out (as with
  ``TTLConfig.omit_expired``), a revoked, quarantined or erased one always,
  whatever ``refresh_ttl`` asks;
* a TTL runs from the put, not from the last read: a memory's freshness is
  a property of when it was fetched, so reads never extend it;
* ``delete`` is an erasure: the value is destroyed, the history that it
  existed stays in the log (``memwarden explain``);
* a batch's puts commit together, all or none: a put a revocation covers
  refuses the batch (``RevokedScope``), where another store would keep it.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
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
from memwarden.engine import MAX_PAGE, Memories, MemoryNotFound, MemoryView, Warden
from memwarden.events import parse_ts

from ._items import (
    KIND,
    Namespace,
    NamespaceScope,
    ScopeOf,
    content_of,
    item_of,
    matches,
    memory_id_of,
    namespace_matches,
    summary_of,
    ttl_of,
    value_of,
)
from ._steps import Ask, Embed, Plan, arun, run

PAGE = 500  # memories read a query while a search pages through a namespace
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
        self.index_config = index
        # with LangGraph's index config, puts carry the store's own vectors and a
        # search with a query is semantic recall over them (as InMemoryStore does)
        self._embeddings = ensure_embeddings(index.get("embed")) if index else None
        self._fields_embedded = list(index.get("fields") or ["$"]) if index else []
        self._dims = index.get("dims") if index else None
        self._async = inspect.iscoroutinefunction(getattr(memories, "get", None))

    # -- BaseStore: one plan per batch, performed blocking or awaited (``_steps``) -----------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        if self._async:
            raise TypeError("this store holds an AsyncClient: use its async methods (aget, asearch, aput, abatch)")
        return run(self._batch(list(ops)), self.memories, self._embeddings)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await arun(self._batch(list(ops)), self.memories, self._embeddings, awaitable=self._async)

    def _batch(self, ops: list[Op]) -> Plan[list[Result]]:
        if len(ops) == 1 and isinstance(ops[0], (GetOp, SearchOp)):
            # ``get`` and ``search`` each come as a batch of one: the same plan,
            # without sorting out puts and lists there are none of
            op = ops[0]
            if isinstance(op, GetOp):
                return (yield from self._get_many([op]))
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
            elif not isinstance(op, (GetOp, PutOp)):
                raise ValueError(f"unknown operation: {type(op).__name__}")
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
        """(tenants, scope filters) a search under ``namespace_prefix`` asks
        the query for: with no tenant in the prefix, every tenant the key may read."""
        if self._filters is None:  # a mapping of the developer's own: narrow by tenant only
            if namespace_prefix:
                return [self._tenant(namespace_prefix)], {}
            tenant, scope = None, {}
        else:
            tenant, scope = self._filters.filters(namespace_prefix)
        if tenant is not None:
            return [tenant], scope
        return (yield Ask("tenants")), scope

    def _search(self, op: SearchOp) -> Plan[list[SearchItem]]:
        """Semantic recall for a query when the store has an index, full text
        otherwise; either way only what the gate allows, under the prefix and
        through the filter, paged by ``offset`` and ``limit``."""
        prefix = tuple(op.namespace_prefix)
        wanted = op.offset + op.limit
        size = _page(wanted, op)
        if self._embeddings is not None and op.query:
            (vector,) = self._sized((yield Embed([op.query], query=True)))
            tenants, scope = yield from self._scopes(prefix)
            hits: list[SearchItem] = []
            for tenant in tenants:
                # the prefix and the filter are applied here, after the gate:
                # ask for more candidates until enough pass or none are left
                asked = min(MAX_PAGE, size * 4)
                while True:
                    ask = {"tenant": tenant, "vector": vector, "mode": "vector", "limit": asked, **scope}
                    answered = yield Ask("search", ask)
                    passed = []
                    for found in answered:
                        item = _hit(found.view, prefix, op.filter)
                        if item is not None:
                            item.score = found.similarity
                            passed.append(item)
                    if len(passed) >= wanted or len(answered) < asked or asked == MAX_PAGE:
                        break
                    asked = min(MAX_PAGE, asked * 4)
                hits.extend(passed)
            hits.sort(key=lambda h: -(h.score or 0.0))
            return hits[op.offset : wanted]
        tenants, scope = yield from self._scopes(prefix)
        hits = []
        for tenant in tenants:
            offset = 0
            while len(hits) < wanted:
                ask = {"tenant": tenant, **scope, "text": op.query or None, "limit": size, "offset": offset}
                page = yield Ask("query", {**ask, "with_content": True})
                hits.extend(item for view in page if (item := _hit(view, prefix, op.filter)) is not None)
                if len(page) < size:
                    break
                offset += size
        return hits[op.offset : wanted]

    def _list_namespaces(self, op: ListNamespacesOp) -> Plan[list[Namespace]]:
        namespaces: set[Namespace] = set()
        for tenant in (yield Ask("tenants")):
            offset = 0
            while True:
                page = yield Ask("query", {"tenant": tenant, "limit": PAGE, "offset": offset, "with_content": False})
                for view in page:
                    item = item_of(view.memory_id)
                    if item is not None and view.usable:
                        namespaces.add(item[0])
                if len(page) < PAGE:
                    break
                offset += PAGE
        return _listed(namespaces, op)

    # -- writing -----------------------------------------------------------------------------

    def _sized(self, vectors: list[Any]) -> list[Any]:
        """The embedding function's vectors, each as long as the index config's ``dims`` says."""
        for vector in vectors:
            if isinstance(self._dims, int) and len(vector) != self._dims:
                raise ValueError(f"index dims is {self._dims}; the embedding function answered {len(vector)} numbers")
        return vectors

    def _texts(self, op: PutOp) -> str | None:
        """What a put's vector is made from: its ``index`` fields (the
        store's, unless the put names its own); None: not indexed."""
        if self._embeddings is None or op.index is False:
            return None
        fields = self._fields_embedded if op.index is None else list(op.index)
        texts = [t for f in fields for t in get_text_at_path(op.value, tokenize_path(f))]
        return "\n".join(texts) or "{}"

    def _fields(self, op: PutOp, embedding: list[float] | None) -> dict[str, Any]:
        """``save``'s fields for a put."""
        namespace = tuple(op.namespace)
        value = dict(op.value or {})
        kind = value.get("kind") if isinstance(value.get("kind"), str) else self.kind
        source = value.get("source_url")
        memory_id = memory_id_of(namespace, op.key)
        return {
            "memory_id": memory_id,
            "kind": kind,
            "summary": summary_of(value, op.key),
            "content": content_of(value),
            "source_url": source if isinstance(source, str) else "langgraph:" + memory_id[3:],
            "scope": self.scope_of(namespace),
            "ttl": ttl_of(op.ttl),
            "embedding": embedding,
        }

    def _put(self, ops: list[PutOp]) -> Plan[None]:
        # as every LangGraph store: the last put of a key in a batch wins
        ops = list({(tuple(op.namespace), op.key): op for op in ops}.values())
        kept = [op for op in ops if op.value is not None]
        texts = [self._texts(op) for op in kept]
        to_embed = [t for t in texts if t is not None]
        # one request to the embeddings for the whole batch
        made = iter(self._sized((yield Embed(to_embed))) if to_embed else [])
        saves = [self._fields(op, None if t is None else next(made)) for op, t in zip(kept, texts, strict=True)]
        if len(saves) == 1:
            yield Ask("save", saves[0])
        elif saves:
            yield Ask("save_many", {"memories": saves})
        for op in ops:
            if op.value is None:
                namespace = tuple(op.namespace)
                erase = {"memory_id": memory_id_of(namespace, op.key), "tenant": self._tenant(namespace)}
                try:
                    yield Ask("erase", {**erase, "reason": DELETED})
                except MemoryNotFound:
                    continue  # deleting what is not there changes nothing, as in every store


def _page(wanted: int, op: SearchOp) -> int:
    """Memories a search reads a query: what it wants when nothing is left
    to filter here, more when a filter may pass over some."""
    return min(PAGE, max(wanted * (4 if op.filter else 1), 16))


def _item(view: MemoryView, found: tuple[Namespace, str] | None, *, search: bool = False) -> Item | None:
    """The item a memory is, if it is one of this store's (``found``: its
    namespace and key, ``item_of`` its id) and may be used now."""
    if found is None or not view.usable or view.content is None:
        return None
    namespace, key = found
    value = value_of(view.content) or {}
    when = parse_ts(view.fetched_at)
    if search:
        return SearchItem(namespace=namespace, key=key, value=value, created_at=when, updated_at=when, score=None)
    return Item(namespace=namespace, key=key, value=value, created_at=when, updated_at=when)


def _hit(view: MemoryView, prefix: Namespace, filter: dict[str, Any] | None) -> SearchItem | None:
    """A search's item for ``view``, if usable now, under ``prefix`` and through ``filter``."""
    found = item_of(view.memory_id)  # once: both the item and the prefix test read it
    if found is None or found[0][: len(prefix)] != prefix:
        return None
    item = _item(view, found, search=True)
    if item is None or not matches(item.value, filter):
        return None
    return item  # type: ignore[return-value]


def _listed(namespaces: set[Namespace], op: ListNamespacesOp) -> list[Namespace]:
    chosen = [ns for ns in namespaces if namespace_matches(ns, op.match_conditions or ())]
    if op.max_depth is not None:
        chosen = list({ns[: op.max_depth] for ns in chosen})
    return sorted(chosen)[op.offset : op.offset + op.limit]


__all__ = ["MemwardenStore", "NamespaceScope"]
