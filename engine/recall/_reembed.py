"""Re-embedding: when the configured embedder changes, the vectors it did
not make are made again, in bounded batches, until none is left.

Each ``memory.saved`` event names the embedder that made its version's
vector; the vector itself lives outside the chain, beside the texts, one
per version. A change of model (another name, or another length) leaves
the old vectors in place, where a query embedded by the new model cannot
be compared with them. ``embedding_status`` reports them;
``reembed`` makes each again from the version's own texts (summary, then
content, as at save) and records it as a ``memory.reembedded`` event per
version, in the same transaction as the new vector, so the vector index on
every node follows (it catches up from memory events, as for a save) and
an auditor sees which model made what, when. The chain covers which
embedder made the vector, never the vector.

What is never re-embedded: an erased version (its texts are gone, and the
store refuses a vector for it), a revoked one (it can never be usable
again; a fresh save makes a new version with a vector of the new model),
and a version whose stored text no longer matches its checksum (it is
quarantined when read; the resync that restores it is a later run's).
Each batch is read, embedded outside the write lock (the embedder may be a
remote model), then checked again under it: a version erased, revoked or
superseded in between is left out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from memwarden.events import MemoryReembedded, Vector, get_logger
from memwarden.projections import TERMINAL, Access, StaleVector

from .._core import Core
from .._errors import InvalidInput
from .._rights import Principal, confine_tenant, operation
from .._saving import embedding_text
from ._embedders import Embedder

log = get_logger("memwarden")

MAX_BATCH = 5000  # versions a batch embeds: one embedder call, one transaction
NEVER = TERMINAL  # never re-embedded: they cannot be usable again


@dataclass
class ReembedResult:
    """What a run did: the model, how many versions it re-embedded, how many
    it left (a text gone or damaged, or changed meanwhile), and how many
    stale ones remain (0: converged)."""

    embedder: str
    dims: int
    reembedded: int = 0
    skipped: int = 0
    batches: int = 0
    remaining: int = 0
    skipped_ids: list[dict[str, Any]] = field(default_factory=list)  # the first 100, with why

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _configured(core: Core) -> Embedder:
    if core.embedder is None:
        raise InvalidInput("embedder", "none is configured ([embedder] in the policy file): nothing to re-embed with")
    return core.embedder


def _tenant(caller: Principal, tenant: str | None) -> None:
    if tenant is not None:
        if not isinstance(tenant, str) or not tenant:
            raise InvalidInput("tenant", "must be a non-empty name")
        confine_tenant(caller, tenant)


@operation("review")
def embedding_status(core: Core, *, tenant: str | None = None, caller: Principal) -> dict[str, Any]:
    """Which embedders made the vectors of the current versions that may yet
    be used, and how many the configured one did not make (``stale``)."""
    _tenant(caller, tenant)
    embedder = core.embedder
    with core.reading() as view:
        counts = view.vectors().embedding_counts(tenant)
        stale = (
            view.vectors().count_stale_vectors(embedder.name, embedder.dims, tenant) if embedder is not None else None
        )
    return {
        "embedder": embedder.name if embedder is not None else None,
        "dims": embedder.dims if embedder is not None else None,
        "tenant": tenant,
        "versions": sum(c.versions for c in counts),
        "stale": stale,
        "by_embedder": [{"embedder": c.embedder, "dims": c.dims, "versions": c.versions} for c in counts],
    }


@operation("operate")
def reembed(
    core: Core,
    *,
    tenant: str | None = None,
    batch: int = 500,
    max_batches: int | None = None,
    caller: Principal,
    actor: str | None = None,
) -> ReembedResult:
    """Make again, with the configured embedder, every stale vector (of
    ``tenant``, or of all), ``batch`` versions at a time, at most
    ``max_batches`` batches (None: until none is left)."""
    embedder = _configured(core)
    _tenant(caller, tenant)
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
        raise InvalidInput("batch", f"must be between 1 and {MAX_BATCH}")
    if max_batches is not None and (
        isinstance(max_batches, bool) or not isinstance(max_batches, int) or max_batches < 1
    ):
        raise InvalidInput("max_batches", "must be a positive whole number")
    result = ReembedResult(embedder.name, embedder.dims)
    after = ("", "")  # key order: a version skipped is not asked about again in this run
    while max_batches is None or result.batches < max_batches:
        with core.reading() as view:
            rows = view.vectors().stale_vectors(embedder.name, embedder.dims, batch, after, tenant)
        if not rows:
            break
        after = (rows[-1].tenant, rows[-1].memory_id)
        _one_batch(core, embedder, rows, result, actor or caller.actor)
        result.batches += 1
    with core.reading() as view:
        result.remaining = view.vectors().count_stale_vectors(embedder.name, embedder.dims, tenant)
    log.info(
        "memories_reembedded",
        embedder=embedder.name,
        reembedded=result.reembedded,
        skipped=result.skipped,
        remaining=result.remaining,
    )
    return result


def _one_batch(core: Core, embedder: Embedder, rows: list[StaleVector], result: ReembedResult, actor: str) -> None:
    texts: list[tuple[StaleVector, str]] = []
    for row in rows:
        t, m, v, checksum = row.tenant, row.memory_id, row.version, row.checksum
        summary = core.texts.summary(t, m, v)
        content = core.texts.content(t, m, v, checksum)
        if summary is None or content is None:
            _skip(result, t, m, v, "text_gone_or_damaged")
            continue
        texts.append((row, embedding_text(summary, content)))
    if not texts:
        return
    vectors = embedder.embed([text for _, text in texts])
    with core.transaction() as tx:
        now = tx.view.rows(Access.system(), [(row.tenant, row.memory_id) for row, _ in texts])
        events, kept = [], []
        for (row, _), vector in zip(texts, vectors, strict=True):
            t, m, v = row.tenant, row.memory_id, row.version
            current = now.get((t, m))
            if current is None or current.version != v or current.status in NEVER:
                _skip(result, t, m, v, "changed_meanwhile")
                continue
            kept.append(Vector(t, m, v, embedder.name, (vector,)))
            events.append(
                MemoryReembedded(
                    tenant=t,
                    memory_id=m,
                    version=v,
                    embedder=embedder.name,
                    embedding_dims=embedder.dims,
                    previous_embedder=row.embedder,
                    previous_dims=row.dims,
                    actor=actor,
                )
            )
        if events:
            tx.texts.put_vectors(kept)
            tx.append(events)
    result.reembedded += len(events)


def _skip(result: ReembedResult, tenant: str, memory_id: str, version: int, why: str) -> None:
    result.skipped += 1
    if len(result.skipped_ids) < 100:
        result.skipped_ids.append({"tenant": tenant, "memory_id": memory_id, "version": version, "why": why})
