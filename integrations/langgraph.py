"""memwarden as LangGraph's long-term memory store: ``MemwardenStore``, a
``langgraph.store.base.BaseStore`` over a ``memwarden.engine.Memories`` (a
Warden acting for a caller, or ``memwarden.client.Client`` against a server).

    from memwarden.engine import Warden, Principal
    from memwarden.integrations.langgraph import MemwardenStore

    agent = Principal("support-bot", "agent", tenants=("acme",), agent="support-bot")
    store = MemwardenStore(Warden("memwarden.db").acting_as(agent), tenant="acme")
    graph = create_react_agent(model, tools, store=store)

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

import asyncio
import inspect
from collections.abc import Iterable
from datetime import datetime, timedelta
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
from memwarden.engine import Memories, MemoryNotFound, MemoryView
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
    under,
    value_of,
)

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
        self.memories = memories
        self.scope_of = namespace_scope or NamespaceScope(tenant)
        self._filters = NamespaceScope(tenant) if namespace_scope is None else None
        self.kind = kind
        self.ttl_config = ttl
        self.index_config = index
        # with LangGraph's index config, puts carry the store's own vectors and a
        # search with a query is semantic recall over them (as InMemoryStore does)
        self._embeddings = ensure_embeddings(index.get("embed")) if index else None
        self._paths = [(f, tokenize_path(f)) for f in (index.get("fields") or ["$"])] if index else []
        self._async = inspect.iscoroutinefunction(getattr(memories, "get", None))

    # -- BaseStore ---------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        if self._async:
            raise TypeError("this store holds an AsyncClient: use its async methods (aget, asearch, aput, abatch)")
        ops = list(ops)
        results: list[Result] = [None] * len(ops)
        gets = [(i, op) for i, op in enumerate(ops) if isinstance(op, GetOp)]
        for (i, _), found in zip(gets, self._get_many([op for _, op in gets]), strict=True):
            results[i] = found
        for i, op in enumerate(ops):
            if isinstance(op, SearchOp):
                results[i] = self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op)
            elif not isinstance(op, (GetOp, PutOp)):
                raise ValueError(f"unknown operation: {type(op).__name__}")
        self._put([op for op in ops if isinstance(op, PutOp)])
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        if not self._async:
            return await asyncio.to_thread(self.batch, list(ops))
        # an AsyncClient: the same steps, each awaited
        ops = list(ops)
        results: list[Result] = [None] * len(ops)
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                results[i] = await self._aget(op)
            elif isinstance(op, SearchOp):
                results[i] = await self._asearch(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = await self._alist_namespaces(op)
        await self._aput([op for op in ops if isinstance(op, PutOp)])
        return results

    # -- reading -----------------------------------------------------------------------------

    def _tenant(self, namespace: Namespace) -> str:
        return self.scope_of(namespace)["tenant"]

    def _get_many(self, ops: list[GetOp]) -> list[Item | None]:
        """Each item, if it may be used now: one read for one item, one query
        per tenant for many."""
        if len(ops) == 1:
            namespace = tuple(ops[0].namespace)
            try:
                view = self.memories.get(memory_id_of(namespace, ops[0].key), tenant=self._tenant(namespace))
            except MemoryNotFound:
                return [None]
            return [_item(view)]
        wanted: dict[str, list[str]] = {}
        ids = []
        for op in ops:
            memory_id = memory_id_of(tuple(op.namespace), op.key)
            ids.append((self._tenant(tuple(op.namespace)), memory_id))
            wanted.setdefault(ids[-1][0], []).append(memory_id)
        found: dict[tuple[str, str], Item] = {}
        for tenant, memory_ids in wanted.items():
            unique = list(dict.fromkeys(memory_ids))
            for view in self.memories.query(tenant=tenant, ids=unique, limit=len(unique)):
                item = _item(view)
                if item is not None:
                    found[(tenant, view.memory_id)] = item
        return [found.get(key) for key in ids]

    async def _aget(self, op: GetOp) -> Item | None:
        tenant = self._tenant(tuple(op.namespace))
        memory_id = memory_id_of(tuple(op.namespace), op.key)
        try:
            view = await self.memories.get(memory_id, tenant=tenant)  # type: ignore[misc]
        except MemoryNotFound:
            return None
        return _item(view) if view.usable else None

    def _scopes(self, namespace_prefix: Namespace) -> tuple[list[str] | None, dict[str, str]]:
        """(tenants, scope filters) a search under ``namespace_prefix`` asks
        the query for; None: every tenant the key may read."""
        if self._filters is None:  # a mapping of the developer's own: narrow by tenant only
            if not namespace_prefix:
                return None, {}
            return [self._tenant(namespace_prefix)], {}
        tenant, scope = self._filters.filters(namespace_prefix)
        return ([tenant] if tenant is not None else None), scope

    def _embedded(self, value: dict[str, Any]) -> list[float] | None:
        """The put's vector: the store's ``embed`` over its ``fields`` (None without an index)."""
        if self._embeddings is None:
            return None
        texts = [t for _, path in self._paths for t in get_text_at_path(value, path)]
        return list(self._embeddings.embed_documents(["\n".join(texts) or "{}"])[0])

    def _recall(self, op: SearchOp) -> list[SearchItem] | None:
        """Semantic recall for a query when the store has an index; None: full text."""
        if self._embeddings is None or not op.query:
            return None
        vector = list(self._embeddings.embed_query(op.query))
        prefix = tuple(op.namespace_prefix)
        tenants, scope = self._scopes(prefix)
        wanted = op.offset + op.limit
        hits: list[SearchItem] = []
        for tenant in tenants if tenants is not None else self.memories.tenants():
            for found in self.memories.search(
                tenant=tenant, vector=vector, mode="vector", limit=min(10_000, _page(wanted, op) * 4), **scope
            ):
                item = _item(found.view, search=True)
                if item is not None and under(found.view.memory_id, prefix) and matches(item.value, op.filter):
                    hits.append(
                        SearchItem(
                            item.namespace,
                            item.key,
                            item.value,
                            item.created_at,
                            item.updated_at,
                            score=found.similarity,
                        )
                    )
        hits.sort(key=lambda h: -(h.score or 0.0))
        return hits[op.offset : wanted]

    def _search(self, op: SearchOp) -> list[SearchItem]:
        recalled = self._recall(op)
        if recalled is not None:
            return recalled
        prefix = tuple(op.namespace_prefix)
        tenants, scope = self._scopes(prefix)
        wanted = op.offset + op.limit
        size = _page(wanted, op)
        hits: list[SearchItem] = []
        for tenant in tenants if tenants is not None else self.memories.tenants():
            offset = 0
            while len(hits) < wanted:
                page = self.memories.query(
                    tenant=tenant, **scope, text=op.query or None, limit=size, offset=offset, with_content=True
                )
                for view in page:
                    item = _item(view, search=True)
                    if item is not None and under(view.memory_id, prefix) and matches(item.value, op.filter):
                        hits.append(item)  # type: ignore[arg-type]
                if len(page) < size:
                    break
                offset += size
        return hits[op.offset : wanted]

    async def _asearch(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        tenants, scope = self._scopes(prefix)
        wanted = op.offset + op.limit
        size = _page(wanted, op)
        hits: list[SearchItem] = []
        for tenant in tenants if tenants is not None else await self.memories.tenants():  # type: ignore[misc]
            offset = 0
            while len(hits) < wanted:
                page = await self.memories.query(  # type: ignore[misc]
                    tenant=tenant, **scope, text=op.query or None, limit=size, offset=offset, with_content=True
                )
                for view in page:
                    item = _item(view, search=True)
                    if item is not None and under(view.memory_id, prefix) and matches(item.value, op.filter):
                        hits.append(item)  # type: ignore[arg-type]
                if len(page) < size:
                    break
                offset += size
        return hits[op.offset : wanted]

    def _namespaces_of(self, views: Iterable[MemoryView]) -> set[Namespace]:
        found = set()
        for view in views:
            item = item_of(view.memory_id)
            if item is not None and view.usable:
                found.add(item[0])
        return found

    def _list_namespaces(self, op: ListNamespacesOp) -> list[Namespace]:
        namespaces: set[Namespace] = set()
        for tenant in self.memories.tenants():
            offset = 0
            while True:
                page = self.memories.query(tenant=tenant, limit=PAGE, offset=offset, with_content=False)
                namespaces |= self._namespaces_of(page)
                if len(page) < PAGE:
                    break
                offset += PAGE
        return _listed(namespaces, op)

    async def _alist_namespaces(self, op: ListNamespacesOp) -> list[Namespace]:
        namespaces: set[Namespace] = set()
        for tenant in await self.memories.tenants():  # type: ignore[misc]
            offset = 0
            while True:
                page = await self.memories.query(  # type: ignore[misc]
                    tenant=tenant, limit=PAGE, offset=offset, with_content=False
                )
                namespaces |= self._namespaces_of(page)
                if len(page) < PAGE:
                    break
                offset += PAGE
        return _listed(namespaces, op)

    # -- writing -----------------------------------------------------------------------------

    def _fields(self, op: PutOp) -> dict[str, Any]:
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
            "ttl": timedelta(minutes=op.ttl) if op.ttl is not None else None,
            "embedding": self._embedded(value) if op.index is not False else None,
        }

    def _latest(self, ops: list[PutOp]) -> list[PutOp]:
        # as every LangGraph store: the last put of a key in a batch wins
        return list({(tuple(op.namespace), op.key): op for op in ops}.values())

    def _put(self, ops: list[PutOp]) -> None:
        ops = self._latest(ops)
        saves = [self._fields(op) for op in ops if op.value is not None]
        if len(saves) == 1:
            self.memories.save(**saves[0])
        elif saves:
            self.memories.save_many(saves)
        for op in ops:
            if op.value is None:
                try:
                    self.memories.erase(
                        memory_id=memory_id_of(tuple(op.namespace), op.key),
                        tenant=self._tenant(tuple(op.namespace)),
                        reason=DELETED,
                    )
                except MemoryNotFound:
                    pass  # deleting what is not there changes nothing, as in every store

    async def _aput(self, ops: list[PutOp]) -> None:
        ops = self._latest(ops)
        saves = [self._fields(op) for op in ops if op.value is not None]
        if len(saves) == 1:
            await self.memories.save(**saves[0])  # type: ignore[misc]
        elif saves:
            await self.memories.save_many(saves)  # type: ignore[misc]
        for op in ops:
            if op.value is None:
                try:
                    await self.memories.erase(  # type: ignore[misc]
                        memory_id=memory_id_of(tuple(op.namespace), op.key),
                        tenant=self._tenant(tuple(op.namespace)),
                        reason=DELETED,
                    )
                except MemoryNotFound:
                    pass


def _page(wanted: int, op: SearchOp) -> int:
    """Memories a search reads a query: what it wants when nothing is left
    to filter here, more when a filter may pass over some."""
    return min(PAGE, max(wanted * (4 if op.filter else 1), 16))


def _when(text: str) -> datetime:
    return parse_ts(text)


def _item(view: MemoryView, *, search: bool = False) -> Item | None:
    """The item a memory is, if it is one of this store's and may be used now."""
    found = item_of(view.memory_id)
    if found is None or not view.usable or view.content is None:
        return None
    namespace, key = found
    value = value_of(view.content) or {}
    when = _when(view.fetched_at)
    if search:
        return SearchItem(namespace=namespace, key=key, value=value, created_at=when, updated_at=when, score=None)
    return Item(namespace=namespace, key=key, value=value, created_at=when, updated_at=when)


def _listed(namespaces: set[Namespace], op: ListNamespacesOp) -> list[Namespace]:
    chosen = [ns for ns in namespaces if namespace_matches(ns, op.match_conditions or ())]
    if op.max_depth is not None:
        chosen = list({ns[: op.max_depth] for ns in chosen})
    return sorted(chosen)[op.offset : op.offset + op.limit]


__all__ = ["MemwardenStore", "NamespaceScope"]
