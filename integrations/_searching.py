"""``MemwardenStore``'s search, as plans (``_steps``): a listing through
memwarden's query, or semantic recall through its search.

Both leave what they can to the query's own statement: the namespace
prefix (the item ids it covers, ``id_prefixes``), the scope labels and the
``filter`` (memwarden's ``where``: the item's value read as JSON, in SQL on
either backend), so ``limit`` and ``offset`` count only matching items and
no item is read only to be dropped in Python. Only what the gate lets
through is ever answered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.store.base import SearchItem, SearchOp
from memwarden.engine import MAX_PAGE, MemoryView
from memwarden.events import parse_ts

from ._items import Namespace, id_prefixes, item_of, value_of
from ._steps import Ask, Plan

# the first request of candidates to the vector index: most searches need no second
FIRST_CANDIDATES = 64

# where a search looks: (tenants, the scope filters of the prefix) for a prefix
Scopes = Callable[[Namespace], Plan[tuple[list[str], dict[str, str]]]]


def search_item(view: MemoryView, found: tuple[Namespace, str] | None, score: float | None) -> SearchItem | None:
    """The item a memory is, if one of the store's (``found``: its namespace
    and key) that may be used now; None for anything else."""
    if found is None or not view.usable:
        return None
    value = value_of(view.content)
    if value is None:
        return None
    when = parse_ts(view.fetched_at)
    return SearchItem(namespace=found[0], key=found[1], value=value, created_at=when, updated_at=when, score=score)


def listing(op: SearchOp, where: dict[str, Any] | None, scopes: Scopes, text: str | None) -> Plan[list[SearchItem]]:
    """The items under the prefix through the filter (and the words of
    ``text``, memwarden's full text), newest first, paged in the query."""
    prefix = tuple(op.namespace_prefix)
    tenants, scope = yield from scopes(prefix)
    ask = {**scope, "id_prefix": id_prefixes(prefix), "where": where, "text": text or None, "with_content": True}
    if len(tenants) == 1:
        views = yield from _paged(tenants[0], ask, op.offset, op.limit)
    else:  # every tenant's first items, merged newest first across them (the log's order)
        views = []
        for tenant in tenants:
            views.extend((yield from _paged(tenant, ask, 0, op.offset + op.limit)))
        # an agent's views carry no log position (None): they keep their order (a stable sort)
        views.sort(key=lambda v: -(v.last_seq or 0))
        views = views[op.offset : op.offset + op.limit]
    return [item for view in views if (item := search_item(view, item_of(view.memory_id), None)) is not None]


def _paged(tenant: str, ask: dict[str, Any], offset: int, limit: int) -> Plan[list[MemoryView]]:
    """``limit`` answers from ``offset`` on, in pages a query may answer
    (an answer stops early past its size bound, and says where to go on)."""
    views: list[MemoryView] = []
    while len(views) < limit:
        asked = min(MAX_PAGE, limit - len(views))
        page = yield Ask("query", {"tenant": tenant, **ask, "limit": asked, "offset": offset})
        views.extend(page)
        if len(page) < asked and not getattr(page, "truncated", False):
            break
        offset += len(page)
    return views


def recall(op: SearchOp, vector: list[float], where: dict[str, Any] | None, scopes: Scopes) -> Plan[list[SearchItem]]:
    """Semantic recall: the items closest to ``vector`` first, scored by
    cosine similarity, then, as LangGraph's ``InMemoryStore`` answers, the
    items with no vector (put with ``index=False``, or with no indexed
    field), unscored; paged over that order."""
    prefix = tuple(op.namespace_prefix)
    wanted = op.offset + op.limit
    tenants, scope = yield from scopes(prefix)
    prefixes = id_prefixes(prefix)
    scored: list[SearchItem] = []
    unscored: list[MemoryView] = []
    for tenant in tenants:
        hits, seen, complete = yield from _nearest(tenant, vector, scope, prefixes, where, wanted)
        scored.extend(hits)
        if complete and len(hits) < wanted:
            # every vector of the prefix was seen: the rest of its items have none
            listed = yield from _paged(
                tenant,
                {**scope, "id_prefix": prefixes, "where": where, "with_content": True},
                0,
                min(MAX_PAGE, wanted + len(seen)),
            )
            unscored.extend(v for v in listed if v.memory_id not in seen)
    scored.sort(key=lambda h: -(h.score or 0.0))
    # unscored stay in the query's order, newest first (a caller's view of a
    # memory carries no log position to sort by: an agent's is a token)
    fill = [i for v in unscored if (i := search_item(v, item_of(v.memory_id), None)) is not None]
    return [*scored, *fill][op.offset : wanted]


def _nearest(
    tenant: str,
    vector: list[float],
    scope: dict[str, str],
    prefixes: list[str],
    where: dict[str, Any] | None,
    wanted: int,
) -> Plan[tuple[list[SearchItem], set[str], bool]]:
    """The ``wanted`` best usable items of ``tenant`` under the prefix and
    through the filter, asking the index for more candidates while too few
    pass; the ids of every candidate seen; and whether the index had no
    more to give."""
    asked = min(MAX_PAGE, max(FIRST_CANDIDATES, wanted * 4))
    while True:
        # no similarity floor: LangGraph's stores rank every item with a vector
        ask = {"tenant": tenant, "vector": vector, "mode": "vector", "limit": asked, "min_similarity": -1, **scope}
        # with a filter the candidates come without contents: the query reads
        # only those of the ones that pass it
        found = yield Ask("search", {**ask, "with_content": where is None})
        seen = {f.view.memory_id for f in found}
        under = [f for f in found if f.view.memory_id.startswith(tuple(prefixes))]
        if where is not None and under:
            ids = [f.view.memory_id for f in under]
            passing = yield Ask(
                "query",
                {"tenant": tenant, **scope, "ids": ids, "where": where, "with_content": True, "limit": len(ids)},
            )
            views = {v.memory_id: v for v in passing}
            under = [f._replace(view=views[f.view.memory_id]) for f in under if f.view.memory_id in views]
        hits = [
            item for f in under if (item := search_item(f.view, item_of(f.view.memory_id), f.similarity)) is not None
        ]
        complete = len(found) < asked
        if len(hits) >= wanted or complete or asked == MAX_PAGE:
            return hits[:wanted], seen, complete
        asked = min(MAX_PAGE, asked * 4)
