"""Saving memories: a save's input checked (checksums, expiry, scope), and
the save itself; its event as the view has it is ``_save_events``."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from memwarden.events import (
    CLOCK_SKEW,
    EventIdReused,
    MemorySaved,
    ParentRef,
    RecordedEvent,
    Scope,
    Vector,
    content_checksum,
    format_ts,
    parse_duration,
)
from memwarden.projections import ViewReader, Write, blocking_revocation, fold_memory

from . import _metrics
from ._core import Core, log
from ._errors import ChecksumMismatch, InvalidInput
from ._limits import encoded, normal_checksum, normal_url
from ._memory_ids import agent_named, check_addressable
from ._rights import Principal, operation, scope_for_save
from ._save_events import Checked, saved_event, tenant_event_id
from ._validation import build, when
from ._views import SaveResult
from .recall._embedders import vector_input, vectors_input

# A fetch claimed this far in the future is a clock problem or a lie
# (refused); one claimed less far ahead is clamped to now, never trusted.
MAX_CLOCK_SKEW = CLOCK_SKEW
MAX_SUMMARY = 4096


def _records_refusal(save: Callable[..., SaveResult]) -> Callable[..., SaveResult]:
    """Every refused save leaves a ``save_refused`` log line naming why."""

    @functools.wraps(save)
    def wrapper(core: Core, **kwargs: Any) -> SaveResult:
        try:
            result = save(core, **kwargs)
        except (ValueError, PermissionError) as exc:
            memory_id = kwargs.get("memory_id")
            log.warning(
                "save_refused",
                memory_id=memory_id if isinstance(memory_id, str) else None,
                error=type(exc).__name__,
                problem=str(exc),
                revocation_id=getattr(exc, "revocation_id", None),
            )
            raise
        _metrics.SAVES.inc()
        return result

    return wrapper


def check_input(
    core: Core,
    *,
    memory_id: str,
    kind: str,
    summary: str,
    content: str,
    source_url: str,
    scope: Scope | dict[str, Any],
    fetched_at: datetime | str | None = None,
    expires_at: datetime | str | None = None,
    ttl: timedelta | str | None = None,
    verified_at: datetime | str | None = None,
    source: str | None = None,
    repo: str | None = None,
    branch: str | None = None,
    policy: str = "default",
    revocation_version: int | str | None = None,
    checksum: str | None = None,
    derived_from: Sequence[str | ParentRef | dict[str, Any]] = (),
    cache_key: dict[str, Any] | None = None,
    actor: str | None = None,
    event_id: str | None = None,
    embedding: Sequence[float] | None = None,
    embeddings: Sequence[Sequence[float]] | None = None,
    caller: Principal,
) -> Checked:
    """Every check of a save that needs no view: the text, its checksum and
    limits, the times, the scope and what ``caller`` may write."""
    if isinstance(memory_id, str):  # the event checks the rest; a read by it must not meet a surrogate first
        encoded("memory_id", memory_id)
    if not isinstance(content, str):
        raise InvalidInput("content", "must be text")
    core.limits.check_text("content", content, "max_content_bytes")
    actual = content_checksum(content)
    if checksum is not None and normal_checksum("checksum", checksum) != actual:
        raise ChecksumMismatch("checksum", checksum, actual)
    now = core.clock.now()
    fetched = fetch_time(when("fetched_at", fetched_at), now)
    expires = expiry(core, kind, fetched, expires_at, ttl)
    if expires is not None and expires <= fetched:
        raise InvalidInput("expires_at", "must be after fetched_at")
    if isinstance(scope, Scope):
        scope = scope.model_dump(exclude_none=True)
    if not isinstance(scope, dict):
        raise InvalidInput("scope", "must be an object naming at least the tenant")
    scope_model = build(Scope, "scope", **scope_for_save(caller, scope))
    if isinstance(memory_id, str):
        check_addressable(memory_id)
    owner = agent_named(memory_id) if isinstance(memory_id, str) else None
    if owner is not None and scope_model.agent != owner:
        raise InvalidInput(
            "memory_id",
            f"{memory_id!r} is the Memory API's entry of agent {owner!r}: save it in that agent's scope "
            "(scope.agent), or choose another id",
        )
    if not isinstance(summary, str) or not summary:
        raise InvalidInput("summary", "must be non-empty text")
    if len(summary) > MAX_SUMMARY:
        raise InvalidInput("summary", f"is longer than {MAX_SUMMARY} characters")
    encoded("summary", summary)
    fields = dict(
        # spelled as every source is (its check comes with the event's, below)
        source_url=normal_url("source_url", source_url) if isinstance(source_url, str) else source_url,
        verified_at=_not_ahead("verified_at", when("verified_at", verified_at), now),
        source=source,
        repo=repo,
        branch=branch,
        policy=policy,
        revocation_version=revocation_version,
        derived_from=derived_from,
        cache_key=cache_key,
        actor=actor or caller.actor,
        event_id=event_id,
    )
    vectors = _given_vectors(core, embedding, embeddings)
    return Checked(
        memory_id,
        kind,
        summary,
        content,
        actual,
        fetched,
        expires,
        scope_model,
        fields,
        vectors,
        GIVEN_EMBEDDING if vectors is not None else None,
    )


GIVEN_EMBEDDING = "caller"


def _given_vectors(
    core: Core, embedding: Sequence[float] | None, embeddings: Sequence[Sequence[float]] | None
) -> tuple[tuple[float, ...], ...] | None:
    """A save's own vectors: ``embedding`` (one) or ``embeddings`` (several
    of one length, e.g. an item's fields each embedded apart: a search finds
    the version by the closest of them), each of the embedder's length when
    one is configured."""
    dims = core.embedder.dims if core.embedder is not None else None
    if embedding is not None and embeddings is not None:
        raise InvalidInput("embeddings", "give embedding (one vector) or embeddings (several), not both")
    if embedding is not None:
        return (vector_input("embedding", embedding, dims),)
    if embeddings is not None:
        return vectors_input("embeddings", embeddings, dims)
    return None


def embedded(core: Core, items: Sequence[Checked]) -> list[Checked]:
    """``items`` with a vector each where the configured embedder can make
    one (those given one keep theirs): one call for the batch, before any
    transaction, so a slow endpoint holds no write lock."""
    embedder = core.embedder
    missing = [i for i, item in enumerate(items) if item.vectors is None]
    if embedder is None or not missing:
        return list(items)
    vectors = embedder.embed([embedding_text(items[i].summary, items[i].content) for i in missing])
    out = list(items)
    for i, vector in zip(missing, vectors, strict=True):
        out[i] = replace(out[i], vectors=(vector,), embedder=embedder.name)
    return out


def embedding_text(summary: str, content: str) -> str:
    """What an embedder is given of a memory: its summary, then its text."""
    return f"{summary}\n\n{content}"


def vector_of(item: Checked, event: MemorySaved) -> list[Vector]:
    if item.vectors is None or item.embedder is None:
        return []
    return [Vector(item.scope.tenant, event.memory_id, event.version, item.embedder, item.vectors)]


def fetch_time(claimed: datetime | None, now: datetime, field: str = "fetched_at") -> datetime:
    """A caller's fetch time as it is recorded: refused past the clock skew
    allowed, clamped to ``now`` within it (a fetch cannot have happened
    after the moment it is recorded), ``now`` when none is given."""
    if claimed is None:
        return now
    if claimed > now + MAX_CLOCK_SKEW:
        raise InvalidInput(
            field,
            f"{format_ts(claimed)} is in the future (now is {format_ts(now)}; at most {MAX_CLOCK_SKEW} of clock skew)",
        )
    return min(claimed, now)


def _not_ahead(field: str, value: datetime | None, now: datetime) -> datetime | None:
    """A time a caller says has passed: refused past the clock skew, clamped to now within it."""
    return None if value is None else fetch_time(value, now, field)


@operation("save")
@_records_refusal
def save(
    core: Core,
    *,
    memory_id: str,
    kind: str,
    summary: str,
    content: str,
    source_url: str,
    scope: Scope | dict[str, Any],
    fetched_at: datetime | str | None = None,
    expires_at: datetime | str | None = None,
    ttl: timedelta | str | None = None,
    verified_at: datetime | str | None = None,
    source: str | None = None,
    repo: str | None = None,
    branch: str | None = None,
    policy: str = "default",
    revocation_version: int | str | None = None,
    checksum: str | None = None,
    derived_from: Sequence[str | ParentRef | dict[str, Any]] = (),
    cache_key: dict[str, Any] | None = None,
    actor: str | None = None,
    event_id: str | None = None,
    embedding: Sequence[float] | None = None,
    embeddings: Sequence[Sequence[float]] | None = None,
    caller: Principal,
) -> SaveResult:
    """Record a memory (a new version if (tenant, memory_id) exists) with
    its provenance (the fields of ``check_input``). ``caller`` decides what
    may be written: its tenants, and for a key bound to an agent, that
    agent's memories only (``_rights``).

    A refused save (bad input, a revoked scope, an erased memory) raises
    and is recorded as a ``save_refused`` log line; the log is unchanged.
    """
    item = check_input(
        core,
        memory_id=memory_id,
        kind=kind,
        summary=summary,
        content=content,
        source_url=source_url,
        scope=scope,
        fetched_at=fetched_at,
        expires_at=expires_at,
        ttl=ttl,
        verified_at=verified_at,
        source=source,
        repo=repo,
        branch=branch,
        policy=policy,
        revocation_version=revocation_version,
        checksum=checksum,
        derived_from=derived_from,
        cache_key=cache_key,
        actor=actor,
        event_id=event_id,
        embedding=embedding,
        embeddings=embeddings,
        caller=caller,
    )
    [item] = embedded(core, [item])
    prepare = _prepared(core, item, caller)

    def alone() -> SaveResult:
        with core.transaction() as tx:
            return prepare(tx)()

    # inside this thread's own transaction it writes there; else with the
    # saves of other threads queued now, in one commit
    result = alone() if core.write_turns.mine() else core.group_commit.run(prepare, alone)
    log.info(
        "memory_saved",
        tenant=result.tenant,
        memory_id=result.memory_id,
        version=result.version,
        seq=result.seq,
        kind=item.kind,
    )
    return result


def _prepared(core: Core, item: Checked, caller: Principal) -> Callable[[Write], Callable[[], SaveResult]]:
    """A save's work in a write transaction: its checks against the view
    (a refusal raised before anything is written), then a callable that
    writes it and answers."""

    def prepare(tx: Write) -> Callable[[], SaveResult]:
        first = retried(core, tx.view, item)
        if first is not None:
            return lambda: first
        revocations = tx.view.revocations([item.scope.tenant])[item.scope.tenant]  # only those that may cover it
        event, adopted = saved_event(core, tx.view, item, revocations, caller)

        def write() -> SaveResult:
            tx.texts.put(item.scope.tenant, event.memory_id, event.version, item.summary, item.content)
            tx.texts.put_vectors(vector_of(item, event))
            seq = tx.append([adopted, event] if adopted else [event])[-1]
            expires = format_ts(item.expires) if item.expires else None
            return SaveResult(event.memory_id, event.version, item.checksum, seq, expires, item.scope.tenant)

        return write

    return prepare


def retried(core: Core, view: ViewReader, item: Checked) -> SaveResult | None:
    """The first save's result when ``item`` repeats it under the same
    event id (a client retrying after a lost answer); ``EventIdReused``
    when the id already names a different save (saying nothing of it), or
    a save whose text was erased or revoked since: its answer carried the
    text's checksum, which an agent no longer receives, and whether a guess
    matched it would tell the text."""
    event_id = item.fields["event_id"]
    if event_id is None:
        return None
    prior = core.log.by_event_id(tenant_event_id(item.scope.tenant, event_id, item.scope.agent))
    if prior is None:
        return None
    p = prior.payload
    if prior.type == "memory.saved" and _taken_out(view, prior):
        raise EventIdReused(event_id, prior.seq)
    same = (
        prior.type == "memory.saved"
        and p["memory_id"] == item.memory_id
        and p["content_checksum"] == item.checksum
        and p["summary_checksum"] == content_checksum(item.summary)
        and p["kind"] == item.kind
        and p["source_url"] == item.fields["source_url"]
        and p["scope"] == item.scope.model_dump(mode="json", exclude_none=True)
    )
    if not same:
        raise EventIdReused(event_id, prior.seq)
    return SaveResult(p["memory_id"], p["version"], p["content_checksum"], prior.seq, p.get("expires_at"), p["tenant"])


def _taken_out(view: ViewReader, saved: RecordedEvent) -> bool:
    """Whether the version a ``memory.saved`` event recorded was since
    erased, or is covered by a revocation of its tenant (recorded after it,
    or blocking its fetch)."""
    p = saved.payload
    tenant, memory_id = p["tenant"], p["memory_id"]
    if p["version"] <= view.erasures([(tenant, memory_id)]).get((tenant, memory_id), 0):
        return True
    row = fold_memory(None, saved, ())  # the version as the view spells its row: the rule's input
    revocations = view.revocations([tenant])[tenant]
    return row is not None and blocking_revocation(revocations, row, recorded_seq=saved.seq) is not None


def expiry(
    core: Core, kind: str, fetched: datetime, expires_at: datetime | str | None, ttl: timedelta | str | None
) -> datetime | None:
    """When a memory of ``kind`` fetched at ``fetched`` stops being usable:
    as given, else its TTL's, else the kind's rule in the policy file (an
    unknown kind refused, naming ``kind``)."""
    if expires_at is not None and ttl is not None:
        raise InvalidInput("ttl", "give either expires_at or ttl, not both")
    if expires_at is not None:
        return when("expires_at", expires_at)
    if ttl is not None:
        try:
            return fetched + parse_duration(ttl)
        except ValueError as exc:
            raise InvalidInput("ttl", str(exc)) from None
    rule_ttl = core.policy.ttl_for(kind) if isinstance(kind, str) else None
    return None if rule_ttl is None else fetched + rule_ttl
