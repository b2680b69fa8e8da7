"""Semantic recall: the index proposes, the gate decides.

Candidates come from the tenant's vector projection (closest first) and
from the full-text index; what is answered is only what the usable view
says is usable now for the caller, asked through the same query every
agent read takes (``_reading.query`` with ``ids``: its confinement, its
gate), so a revoked, expired, quarantined, erased or retired memory is
never answered whatever its score, and a revocation is in force at
commit even if the index has not followed it yet.

Both halves are confined before they rank: the text index matches only
what the caller may read, and the vector index compares only the vectors
of the caller's tenant and, for a key bound to an agent, of that agent,
narrowed by the request's scope fields first (``Wanted``). So neither the
answer nor the work of a search depends on memories the caller may not
see. Where the gate withholds candidates, more of the caller's own are
fetched until ``limit`` usable ones are found, the candidates run out, or
``_most`` of them were looked at (the work is bounded by the request).

What the gate withheld is told: ``hidden`` counts, by reason, the matches
it kept from this caller among those looked at (as ``query --all`` lists
them), only of memories the caller may see exist, and never of a status
whose text the caller may not receive (``Access.unsearchable``: counting
those by their nearness to a query would tell of their text).

A vector is a match only above a similarity floor: the request's
``min_similarity``, else the embedder's (``[embedder] min_similarity``),
else 0: a vector no closer to the query than an unrelated direction is
no match, in ``vector`` mode as in ``hybrid`` (a hybrid search for
nonsense answered the nearest vector at a similarity of -0.15).

The two halves are fused by reciprocal rank fusion: a memory's score is
the sum over the halves that found it of ``weight / (RRF_K + rank)``
(rank from 1), with ``RRF_K = 60`` (the value of Cormack et al.'s paper,
which keeps one half's first place from outweighing agreement between
both) and both weights 1.0 unless the caller gives others.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from memwarden.events import unstorable
from memwarden.projections import Wanted

from .._core import Core
from .._errors import InvalidInput
from .._limits import AnswerBudget, Page
from .._reading import MAX_LIMIT, MAX_SEARCH_WORDS, distinct_words, query
from .._rights import Principal, authorize, confine_agent, confine_tenant, operation
from .._views import Found, MemoryView
from ._embedders import vector_input

RRF_K = 60
MODES = ("hybrid", "vector", "text")
_FIRST_CANDIDATES = 64  # the first request to the index: most searches need no second
_GROWTH = 16  # a half looks at no more than this many times its first request


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
    min_similarity: float | None = None,
    caller: Principal,
) -> Page[Found]:
    """The memories of ``tenant`` closest in meaning (and, in ``hybrid``, in
    words) to ``query_text`` (or to ``vector``), best first, usable now for
    ``caller``; the page's ``hidden`` counts by reason those the gate
    withheld. ``include_hidden`` (staff) answers them too, each with its
    reason. ``min_similarity``: the floor a vector must pass to match
    (default: the embedder's, else 0). The answer's contents are held to
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
    words = _words(query_text, mode)
    floor = _floor(core, min_similarity)
    if include_hidden:
        authorize(caller, "review", field="include_hidden")
    if not isinstance(tenant, str) or not tenant:
        raise InvalidInput("tenant", "is required")
    confine_tenant(caller, tenant)
    agent = confine_agent(caller, agent)
    filters = dict(project=project, permission=permission, user=user, agent=agent, tool=tool, kind=kind)
    for name, value in filters.items():
        if isinstance(value, str) and (problem := unstorable(value)) is not None:
            raise InvalidInput(name, problem)
    # the halves are judged without contents: only the answer's are read
    # (``_with_contents``); every status, so what the gate withholds is told
    gated = dict(tenant=tenant, include_unusable=True, min_seq=min_seq, with_content=False, caller=caller, **filters)
    hidden = _Hidden(caller, shown=include_hidden)
    text_hits: list[MemoryView] = []
    if words:
        text_hits = _text_half(core, query_text, limit, gated, hidden)  # type: ignore[arg-type]
    vector_hits: list[tuple[MemoryView, float]] = []
    # the vector half alone is the answer: its candidates' contents are
    # read as they are judged (the row is read either way, for its
    # checksum), held only for the answer, within its budget
    budget = AnswerBudget(core.limits.max_answer_bytes) if with_content and not words else None
    # hybrid is both halves where both can run: with no embedder to turn
    # the words into a vector (and none given), it is the text half alone
    text_only = mode == "hybrid" and vector is None and core.embedder is None
    if mode != "text" and not text_only:
        q = _query_vector(core, query_text, vector)
        if q is not None:
            wanted = Wanted(**filters)
            vector_hits = _nearest_usable(core, q, limit, gated, wanted, floor, hidden, budget)
    found = _fused(text_hits, vector_hits, limit, weights)
    answered = dict(gated, include_unusable=include_hidden)
    if budget is not None:
        page = Page.of(found, truncated=budget.truncated)
    else:
        page = _with_contents(core, found, answered) if with_content else Page.of(found)
    page.hidden = hidden.counts({f.view.memory_id for f in page})
    return page


def _words(text: str | None, mode: str) -> bool:
    """Whether the full-text half takes ``text``: a query is checked as a
    text search's (``GET /v1/memories?text=``) wherever words are matched,
    so past ``MAX_SEARCH_WORDS`` words it is refused in ``text`` and
    ``hybrid`` mode alike; ``vector`` mode only embeds it."""
    if text is None:
        return False
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("query", "must be non-empty text")
    if len(text) > 1000 or any(ord(c) < 32 and c not in "\t\n\r" for c in text):
        raise InvalidInput("query", "must be at most 1000 characters, without NUL or other control characters")
    if (problem := unstorable(text)) is not None:
        raise InvalidInput("query", problem)
    if mode == "vector":
        return False
    words = distinct_words(text)
    if len(words) > MAX_SEARCH_WORDS:
        raise InvalidInput(
            "query",
            f"must have at most {MAX_SEARCH_WORDS} distinct words to be matched as words, has {len(words)} "
            '(mode "vector" only embeds it)',
        )
    if not words and mode == "text":
        raise InvalidInput("query", "has no searchable words")
    return bool(words)  # a query of quotes alone is the vector half's, in hybrid


def _floor(core: Core, given: float | None) -> float:
    """The similarity a vector must exceed to be a match; -1, the least a
    cosine can be, is no floor at all (every vector ranks, as LangGraph's
    stores rank every item)."""
    if given is None:
        return float(getattr(core.embedder, "min_similarity", 0.0) or 0.0)
    if isinstance(given, bool) or not isinstance(given, int | float) or not -1.0 <= given <= 1.0:
        raise InvalidInput("min_similarity", "must be a number from -1 to 1")
    return -math.inf if given == -1 else float(given)


def _most(limit: int) -> int:
    """The most candidates a half looks at for ``limit`` answers."""
    return _GROWTH * max(_FIRST_CANDIDATES, limit * 4)


class _Hidden:
    """The matches the gate withheld from this caller, by memory, with why."""

    def __init__(self, caller: Principal, *, shown: bool) -> None:
        self.shown = shown  # staff asked for them: they are answered, none is withheld
        self.untold = frozenset(caller.access.unsearchable)
        self.reasons: dict[str, str] = {}

    def answered(self, view: MemoryView) -> bool:
        """Whether ``view`` is answered; if not, it is counted (unless its status is one never told)."""
        if view.usable or self.shown:
            return True
        if view.status not in self.untold:
            self.reasons[view.memory_id] = view.reason or view.status
        return False

    def counts(self, answered: set[str]) -> dict[str, int]:
        return dict(sorted(Counter(r for m, r in self.reasons.items() if m not in answered).items()))


def _text_half(core: Core, text: str, limit: int, gated: dict[str, Any], hidden: _Hidden) -> list[MemoryView]:
    """The text matches the gate lets through, newest first, up to ``limit``."""
    asked = min(MAX_LIMIT, max(_FIRST_CANDIDATES, limit * 4))
    hits: list[MemoryView] = []
    offset = 0
    while True:
        page = query(core, text=text, limit=asked, offset=offset, **gated)
        for view in page:
            if hidden.answered(view):
                hits.append(view)
                if len(hits) >= limit:
                    return hits
        offset += len(page)
        if len(page) < asked or offset >= _most(limit):
            return hits


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
    core: Core,
    q: tuple[float, ...],
    limit: int,
    gated: dict[str, Any],
    wanted: Wanted,
    floor: float,
    hidden: _Hidden,
    budget: AnswerBudget | None = None,
) -> list[tuple[MemoryView, float]]:
    """The ``limit`` closest of the caller's candidates the gate lets
    through, asking the index for more (twice as many each time) until it
    has no more, or ``_most`` were asked for.

    The index proposes ``want`` candidates at once (a graph's work is its
    breadth, not ``k``), but the gate is asked about them closest first, a
    few at a time (``_judged_in_turn``): most searches find ``limit``
    usable ones among the first ``limit``, and reading and judging a
    candidate's row costs more than the graph's search of it. With
    ``budget``, the contents are read with the judgement, and the answer
    stops at the first that does not fit it."""
    tenant, caller = gated["tenant"], gated["caller"]
    want = max(_FIRST_CANDIDATES, limit * 4)
    most = _most(limit)
    asked: set[str] = set()
    found: list[tuple[MemoryView, float]] = []
    while True:
        with core.reading(gated["min_seq"]) as view:
            candidates = core.vector_index.nearest(
                view, tenant, q, want, access=caller.access, wanted=wanted, floor=floor
            )
        fresh = [(m, s) for m, s in candidates if m not in asked]
        asked.update(m for m, _ in fresh)
        if _judged_in_turn(core, fresh, limit, gated, hidden, found, budget):
            return found
        if len(candidates) < want or want >= most:
            return found
        want = min(want * 2, most)


def _judged_in_turn(
    core: Core,
    candidates: list[tuple[str, float]],
    limit: int,
    gated: dict[str, Any],
    hidden: _Hidden,
    found: list[tuple[MemoryView, float]],
    budget: AnswerBudget | None,
) -> bool:
    """Judge ``candidates`` (closest first) until ``found`` holds ``limit``:
    the first turn asks about as many as are still missing, each turn
    after it twice as many as the one before (the gate withholding many
    costs few turns); whether the search is done (``limit`` found, or the
    answer's ``budget`` spent). With ``budget``, a turn reads the contents
    too, no more of them than the budget holds, so no turn's read stops
    early (``_with_contents``' rule)."""
    most = MAX_LIMIT
    asked = gated
    if budget is not None:
        most = max(1, min(MAX_LIMIT, core.limits.max_answer_bytes // core.limits.max_content_bytes))
        asked = dict(gated, with_content=True)
    at, turn = 0, 0
    while at < len(candidates) and len(found) < limit:
        turn = min(most, max(limit - len(found), turn * 2))
        chunk = candidates[at : at + turn]
        at += len(chunk)
        views = {v.memory_id: v for v in query(core, ids=[m for m, _ in chunk], limit=len(chunk), **asked)}
        for m, s in chunk:
            judged = views.get(m)
            if judged is not None and hidden.answered(judged):
                if budget is not None and not budget.admits(judged.content):
                    return True
                found.append((judged, s))
                if len(found) >= limit:
                    return True
    return len(found) >= limit


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
