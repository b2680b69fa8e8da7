"""Semantic recall: the index proposes, the gate decides.

Candidates come from the tenant's vector projection (closest first) and
from the full-text index; what is answered is only what the usable view
says is usable now for the caller, asked through the same query every
agent read takes (``_reading.query`` with ``ids``: its confinement, its
gate), so a revoked, expired, quarantined, erased or retired memory is
never answered whatever its score, and a revocation is in force at
commit even if the index has not followed it yet. Where the gate refuses
candidates, more are fetched until ``limit`` usable ones are found or
the candidates run out.

The two halves are fused by reciprocal rank fusion: a memory's score is
the sum over the halves that found it of ``weight / (RRF_K + rank)``
(rank from 1), with ``RRF_K = 60`` (the value of Cormack et al.'s paper,
which keeps one half's first place from outweighing agreement between
both) and both weights 1.0 unless the caller gives others.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memwarden.events import unstorable

from ._core import Core
from ._embedders import vector_input
from ._errors import InvalidInput
from ._limits import AnswerBudget, Page
from ._reading import MAX_LIMIT, query, search_words
from ._rights import Principal, authorize, confine_tenant, operation
from ._views import Found, MemoryView

RRF_K = 60
MODES = ("hybrid", "vector", "text")
_FIRST_CANDIDATES = 64  # the first request to the index: most searches need no second


@operation("read")
def search(
    core: Core,
    *,
    tenant: str,
    query_text: str | None = None,
    vector: Sequence[float] | None = None,
    limit: int = 10,
    mode: str = "hybrid",
    weights: tuple[float, float] = (1.0, 1.0),
    project: str | None = None,
    permission: str | None = None,
    user: str | None = None,
    agent: str | None = None,
    tool: str | None = None,
    kind: str | None = None,
    include_hidden: bool = False,
    min_seq: int | None = None,
    with_content: bool = True,
    caller: Principal,
) -> Page[Found]:
    """The memories of ``tenant`` closest in meaning (and, in ``hybrid``, in
    words) to ``query_text`` (or to ``vector``), best first, usable now for
    ``caller``. ``include_hidden`` (staff) answers the ones the gate
    refuses too, each with its reason. The answer's contents are held to
    ``Limits.max_answer_bytes`` (``truncated`` past it: ask for fewer, or
    without content and ``get`` each)."""
    if mode not in MODES:
        raise InvalidInput("mode", f"must be one of {', '.join(MODES)}")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput("limit", f"must be between 1 and {MAX_LIMIT}")
    if (
        not isinstance(weights, tuple | list)
        or len(weights) != 2
        or any(isinstance(w, bool) or not isinstance(w, int | float) or not 0 <= w <= 100 for w in weights)
    ):
        raise InvalidInput("weights", "must be two numbers from 0 to 100 (text, vector)")
    if query_text is None and vector is None:
        raise InvalidInput("query", "give the text to search for (or a vector)")
    if query_text is not None:
        if not isinstance(query_text, str) or not query_text.strip():
            raise InvalidInput("query", "must be non-empty text")
        if len(query_text) > 1000 or any(ord(c) < 32 and c not in "\t\n\r" for c in query_text):
            raise InvalidInput("query", "must be at most 1000 characters, without NUL or other control characters")
        if (problem := unstorable(query_text)) is not None:
            raise InvalidInput("query", problem)
    if include_hidden:
        authorize(caller, "review")
    if not isinstance(tenant, str) or not tenant:
        raise InvalidInput("tenant", "is required")
    confine_tenant(caller, tenant)
    filters = dict(project=project, permission=permission, user=user, agent=agent, tool=tool, kind=kind)
    for name, value in filters.items():
        if isinstance(value, str) and (problem := unstorable(value)) is not None:
            raise InvalidInput(name, problem)
    # the halves are judged without contents: only the answer's are read (``_with_contents``)
    gated = dict(
        tenant=tenant,
        include_unusable=include_hidden,
        min_seq=min_seq,
        with_content=False,
        caller=caller,
        **filters,
    )
    text_hits: list[MemoryView] = []
    if mode != "vector" and query_text is not None and _searchable(query_text):
        text_hits = query(core, text=query_text, limit=limit, **gated)
    vector_hits: list[tuple[MemoryView, float]] = []
    if mode != "text":
        q = _query_vector(core, query_text, vector)
        if q is not None:
            vector_hits = _nearest_usable(core, q, limit, gated)
    found = _fused(text_hits, vector_hits, limit, weights)
    return _with_contents(core, found, gated) if with_content else Page.of(found)


def _with_contents(core: Core, found: list[Found], gated: dict[str, Any]) -> Page[Found]:
    """The answer's contents, best first, within ``Limits.max_answer_bytes``
    (``AnswerBudget``): the halves judged without them, so no candidate's
    content is held beyond the answer's. Read in chunks no larger than the
    budget can hold, so the read itself never stops early; a memory the
    gate refuses by now (revoked meanwhile) leaves the answer."""
    limits = core.limits
    budget = AnswerBudget(limits.max_answer_bytes)
    step = max(1, min(MAX_LIMIT, limits.max_answer_bytes // limits.max_content_bytes))
    out: list[Found] = []
    for start in range(0, len(found), step):
        chunk = found[start : start + step]
        asked = dict(gated, with_content=True)
        views = {v.memory_id: v for v in query(core, ids=[f.view.memory_id for f in chunk], limit=len(chunk), **asked)}
        for f in chunk:
            view = views.get(f.view.memory_id)
            if view is None:
                continue
            if not budget.admits(view.content):
                return Page.of(out, truncated=True)
            out.append(f._replace(view=view))
    return Page.of(out)


def _searchable(text: str) -> bool:
    """Whether the full-text half can take the query (a query of punctuation,
    or of too many words, is left to the vector half)."""
    try:
        search_words(text)
    except InvalidInput:
        return False
    return True


def _query_vector(core: Core, text: str | None, vector: Sequence[float] | None) -> tuple[float, ...] | None:
    embedder = core.embedder
    if vector is not None:
        return vector_input("vector", vector, embedder.dims if embedder is not None else None)
    if embedder is None:
        raise InvalidInput(
            "embedder", "none is configured ([embedder] in the policy file); give a vector, or search by text"
        )
    return embedder.embed([text or ""])[0]


def _nearest_usable(
    core: Core, q: tuple[float, ...], limit: int, gated: dict[str, Any]
) -> list[tuple[MemoryView, float]]:
    """The ``limit`` closest candidates the gate lets through, asking the
    index for more (twice as many each time) until it has no more."""
    tenant = gated["tenant"]
    want = max(_FIRST_CANDIDATES, limit * 4)
    asked: set[str] = set()
    found: list[tuple[MemoryView, float]] = []
    while True:
        with core.reading(gated["min_seq"]) as view:
            candidates = core.vector_index.nearest(view, tenant, q, want)
        fresh = [(m, s) for m, s in candidates if m not in asked]
        asked.update(m for m, _ in fresh)
        for start in range(0, len(fresh), MAX_LIMIT):
            chunk = fresh[start : start + MAX_LIMIT]
            views = {
                v.memory_id: v
                for v in query(core, ids=[m for m, _ in chunk], limit=min(len(chunk), MAX_LIMIT), **gated)
            }
            found.extend((views[m], s) for m, s in chunk if m in views)
            if len(found) >= limit:
                return found[:limit]
        if len(candidates) < want:
            return found
        want *= 2


def _fused(
    text_hits: list[MemoryView],
    vector_hits: list[tuple[MemoryView, float]],
    limit: int,
    weights: Sequence[float],
) -> list[Found]:
    text_w, vector_w = weights
    scores: dict[str, float] = {}
    views: dict[str, MemoryView] = {}
    halves: dict[str, list[str]] = {}
    similarity: dict[str, float] = {}
    text_rank: dict[str, int] = {}
    for rank, view in enumerate(text_hits, 1):
        key = view.memory_id
        scores[key] = scores.get(key, 0.0) + text_w / (RRF_K + rank)
        views[key] = view
        halves.setdefault(key, []).append("text")
        text_rank[key] = rank
    for rank, (view, sim) in enumerate(vector_hits, 1):
        key = view.memory_id
        scores[key] = scores.get(key, 0.0) + vector_w / (RRF_K + rank)
        views.setdefault(key, view)
        halves.setdefault(key, []).append("vector")
        similarity[key] = sim
    order = sorted(scores, key=lambda k: (-scores[k], -similarity.get(k, -2.0), k))[:limit]
    return [Found(views[k], scores[k], tuple(halves[k]), similarity.get(k), text_rank.get(k)) for k in order]
