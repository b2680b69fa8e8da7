"""A store operation written once, run blocking or awaited.

Each of ``MemwardenStore``'s operations is a plan: a generator that decides
everything (which tenants, which query, what passes the prefix and the
filter, how hits are scored and paged) and yields the I/O it needs as
steps, an ``Ask`` of ``memwarden.engine.Memories`` or an ``Embed`` of the
store's embeddings, receiving each answer back (or the step's error, thrown
in where the plan yielded it). ``run`` performs the steps blocking;
``arun`` awaits them: an ``AsyncClient``'s methods directly, a Warden's in a
worker thread, and the embeddings' async variant (``aembed_query``,
``aembed_documents``), so an async-only embedding function works and a sync
one is run off the event loop by LangChain's own fallback. Only the I/O
differs between the two, so sync and async answers cannot drift apart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.embeddings import Embeddings

T = TypeVar("T")


@dataclass(frozen=True)
class Ask:
    """One call of ``memwarden.engine.Memories``: ``name(**kwargs)``."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Embed:
    """Vectors for ``texts``: as a query (one text, one vector) or as documents (one each)."""

    texts: list[str]
    query: bool = False


Step = Ask | Embed
Plan = Generator[Step, Any, T]


def run(plan: Plan[T], memories: Any, embeddings: Embeddings | None) -> T:
    """``plan``'s answer, each step performed blocking."""
    answer: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = plan.throw(error) if error is not None else plan.send(answer)
        except StopIteration as done:
            return done.value
        answer, error = None, None
        try:
            if isinstance(step, Embed):
                answer = _embedded(step, embeddings)
            else:
                answer = getattr(memories, step.name)(**step.kwargs)
        except Exception as exc:  # handed to the plan, which decides (a missing memory is no error to delete)
            error = exc


async def arun(plan: Plan[T], memories: Any, embeddings: Embeddings | None, *, awaitable: bool) -> T:
    """``plan``'s answer, each step awaited. ``awaitable``: ``memories``'
    methods are coroutines (an ``AsyncClient``); else each runs in a worker
    thread, so a Warden's database work never blocks the event loop."""
    answer: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = plan.throw(error) if error is not None else plan.send(answer)
        except StopIteration as done:
            return done.value
        answer, error = None, None
        try:
            if isinstance(step, Embed):
                answer = await _aembedded(step, embeddings)
            elif awaitable:
                answer = await getattr(memories, step.name)(**step.kwargs)
            else:
                answer = await asyncio.to_thread(getattr(memories, step.name), **step.kwargs)
        except Exception as exc:
            error = exc


def _embedded(step: Embed, embeddings: Embeddings | None) -> list[Any]:
    if embeddings is None:
        raise RuntimeError("this store has no index config: nothing to embed with")
    if step.query:
        return [list(embeddings.embed_query(step.texts[0]))]
    return [list(v) for v in embeddings.embed_documents(step.texts)]


async def _aembedded(step: Embed, embeddings: Embeddings | None) -> list[Any]:
    if embeddings is None:
        raise RuntimeError("this store has no index config: nothing to embed with")
    if step.query:
        return [list(await embeddings.aembed_query(step.texts[0]))]
    return [list(v) for v in await embeddings.aembed_documents(step.texts)]
