"""Saving memories: checksums, expiry, evidence, and no resurrection."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from memwarden.events import (
    CLOCK_SKEW,
    EventIdReused,
    MemorySaved,
    ParentRef,
    Scope,
    Vector,
    check_storable,
    content_checksum,
    format_ts,
    parse_duration,
    sha256_hex,
)
from memwarden.projections import Access, Key, ViewReader, blocking_revocation

from ._core import Core, log
from ._derivation import Judge
from ._embedders import vector_input
from ._errors import ChecksumMismatch, InvalidInput, MemoryIdTaken, RevokedScope
from ._limits import CONTROL, TooLarge, check_source_url, encoded, normal_checksum, normal_url
from ._memory_ids import agent_named
from ._metrics import SAVES
from ._rights import Principal, may, operation, scope_for_save
from ._validation import build, when
from ._versions import IMPLICIT_VERSION, adopt, version_of
from ._views import SaveResult

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
        SAVES.inc()
        return result

    return wrapper


@dataclass(frozen=True)
class Checked:
    """A save's input, checked as far as it can be without the view."""

    memory_id: Any
    kind: str
    summary: str
    content: str
    checksum: str
    fetched: datetime
    expires: datetime | None
    scope: Scope
    fields: dict[str, Any]  # the rest of the event's fields, as given
    vector: tuple[float, ...] | None = None  # the version's embedding (given, or the embedder's)
    embedder: str | None = None  # what made it ("caller": given with the save)


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
    expires = _expiry(core, kind, fetched, expires_at, ttl)
    if expires is not None and expires <= fetched:
        raise InvalidInput("expires_at", "must be after fetched_at")
    if isinstance(scope, Scope):
        scope = scope.model_dump(exclude_none=True)
    if not isinstance(scope, dict):
        raise InvalidInput("scope", "must be an object naming at least the tenant")
    scope_model = build(Scope, "scope", **scope_for_save(caller, scope))
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
    vector = None
    if embedding is not None:
        dims = core.embedder.dims if core.embedder is not None else None
        vector = vector_input("embedding", embedding, dims)
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
        vector,
        GIVEN_EMBEDDING if vector is not None else None,
    )


GIVEN_EMBEDDING = "caller"


def embedded(core: Core, items: Sequence[Checked]) -> list[Checked]:
    """``items`` with a vector each where the configured embedder can make
    one (those given one keep theirs): one call for the batch, before any
    transaction, so a slow endpoint holds no write lock."""
    embedder = core.embedder
    missing = [i for i, item in enumerate(items) if item.vector is None]
    if embedder is None or not missing:
        return list(items)
    vectors = embedder.embed([embedding_text(items[i].summary, items[i].content) for i in missing])
    out = list(items)
    for i, vector in zip(missing, vectors, strict=True):
        out[i] = replace(out[i], vector=vector, embedder=embedder.name)
    return out


def embedding_text(summary: str, content: str) -> str:
    """What an embedder is given of a memory: its summary, then its text."""
    return f"{summary}\n\n{content}"


def vector_of(item: Checked, event: MemorySaved) -> list[Vector]:
    if item.vector is None or item.embedder is None:
        return []
    return [Vector(item.scope.tenant, event.memory_id, event.version, item.embedder, item.vector)]


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


class Reads:
    """What a save reads of the view before it writes: the memory's row and
    its policy's version. A batch reads the rows of all its items at once
    (``keys``) and each policy's version once, not once per item: on
    PostgreSQL each read is a round trip, and a batch of 1,000 made 2,000
    of them. A row not among ``keys`` is read when asked. A batch's own
    appends change what these say, so it ``refresh``es them after each."""

    def __init__(self, view: ViewReader, keys: Iterable[Key] = ()) -> None:
        self.view = view
        wanted = list(dict.fromkeys(keys))
        found = view.rows(wanted) if wanted else {}
        self._rows: dict[Key, dict[str, Any] | None] = {key: found.get(key) for key in wanted}
        self._policies: dict[str, int | str] = {}

    def refresh(self, changed: Iterable[Key]) -> None:
        """After a batch's own appends: the rows of the memories they wrote
        read again, and the policies' versions (an adoption may have
        changed one). Only those: re-reading every remaining row after each
        append made a batch repeating one id quadratic."""
        wanted = list(dict.fromkeys(changed))
        found = self.view.rows(wanted) if wanted else {}
        self._rows.update((key, found.get(key)) for key in wanted)
        self._policies.clear()

    def saved(self, event: MemorySaved) -> None:
        """A save pending in this batch: what the memory's row will say of
        it (its holder and version), for a repeat of the id that follows
        before the save is appended. ``refresh`` reads the real row again."""
        scope = event.scope
        self._rows[(scope.tenant, event.memory_id)] = {
            "tenant": scope.tenant,
            "memory_id": event.memory_id,
            "agent": scope.agent,
            "version": event.version,
        }

    def row(self, tenant: str, memory_id: str) -> dict[str, Any] | None:
        key = (tenant, memory_id)
        if key not in self._rows:  # kept: the event and the revocations' check both ask
            self._rows[key] = self.view.row(tenant, memory_id)
        return self._rows[key]

    def version_of(self, policy: str) -> int | str:
        if policy not in self._policies:
            self._policies[policy] = version_of(self.view, policy)
        return self._policies[policy]


def saved_event(
    core: Core,
    view: ViewReader,
    item: Checked,
    revocations: Sequence[dict[str, Any]],
    caller: Principal,
    reads: Reads | None = None,
) -> tuple[MemorySaved, Any]:
    """The ``memory.saved`` event of a checked input (and the policy
    adoption it needs, or None), checked against the view: who holds the
    id, evidence, policy versions, and no resurrection. A memory that was
    erased takes a new version: the erased ones never return (the text
    store refuses their texts), a new text starts afresh."""
    reads = reads or Reads(view)
    event, adopted = built_event(core, view, item, caller, reads)
    refuse_if_revoked(revocations, event, reads.row(item.scope.tenant, event.memory_id))
    return event, adopted


def built_event(
    core: Core, view: ViewReader, item: Checked, caller: Principal, reads: Reads
) -> tuple[MemorySaved, Any]:
    """``saved_event`` but for the revocations: what the event says, and
    what it reads of the view to say it (``Reads``: the memory's row, its
    holder and version, and its policy's version)."""
    f = item.fields
    tenant, memory_id = item.scope.tenant, item.memory_id
    access = caller.access
    row = reads.row(tenant, memory_id) if isinstance(memory_id, str) else None
    if row is not None and not access.allows(row["tenant"], row["agent"]):
        raise MemoryIdTaken(memory_id)
    adopted = None
    policy, revocation_version = f["policy"], f["revocation_version"]
    if revocation_version is None:
        revocation_version = reads.version_of(policy) if isinstance(policy, str) else IMPLICIT_VERSION
    elif isinstance(policy, str):
        adopted = adopt(view, policy, revocation_version, actor=f["actor"], may_set=may(caller, "set_policy"))
    derived_from = f["derived_from"]
    parents = _evidence(core, view, tenant, memory_id, derived_from, access) if derived_from else ()
    event = build(
        MemorySaved,
        memory_id=memory_id,
        version=(row["version"] + 1) if row else 1,
        kind=item.kind,
        summary_checksum=content_checksum(item.summary),
        content_checksum=item.checksum,
        content_length=len(item.content.encode("utf-8")),
        source_url=f["source_url"],
        source=f["source"],
        repo=f["repo"],
        branch=f["branch"],
        fetched_at=item.fetched,
        expires_at=item.expires,
        verified_at=when("verified_at", f["verified_at"]),
        scope=item.scope,
        policy=policy,
        revocation_version=revocation_version,
        derived_from=parents,
        cache_key=f["cache_key"],
        embedder=item.embedder,
        embedding_dims=len(item.vector) if item.vector is not None else None,
        actor=f["actor"],
        **({"event_id": tenant_event_id(tenant, f["event_id"])} if f["event_id"] else {}),
    )
    check_source_url("source_url", event.source_url)
    return event, adopted


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
        caller=caller,
    )
    [item] = embedded(core, [item])
    with core.transaction() as tx:
        first = retried(core, tx.view, item)
        if first is not None:
            return first
        revocations = tx.view.revocations(item.scope.tenant)  # only those that may cover it
        event, adopted = saved_event(core, tx.view, item, revocations, caller)
        tx.texts.put(item.scope.tenant, event.memory_id, event.version, item.summary, item.content)
        tx.texts.put_vectors(vector_of(item, event))
        seq = tx.append([adopted, event] if adopted else [event])[-1]
    log.info(
        "memory_saved",
        tenant=item.scope.tenant,
        memory_id=event.memory_id,
        version=event.version,
        seq=seq,
        kind=item.kind,
    )
    expires = format_ts(item.expires) if item.expires else None
    return SaveResult(event.memory_id, event.version, item.checksum, seq, expires, item.scope.tenant)


def tenant_event_id(tenant: str, event_id: Any) -> str:
    """A caller's event id as the log keeps it: in its tenant, so that one
    tenant's ids never meet (nor tell of) another's."""
    if not isinstance(event_id, str) or not event_id or CONTROL.search(event_id) or len(event_id) > 512:
        raise InvalidInput("event_id", "must be 1 to 512 characters without control characters")
    return "cid_" + sha256_hex(f"{tenant}\x00{event_id}")[:40]


def retried(core: Core, view: ViewReader, item: Checked) -> SaveResult | None:
    """The first save's result when ``item`` repeats it under the same
    event id (a client retrying after a lost answer); ``EventIdReused``
    when the id already names a different save (saying nothing of it), or
    a save whose text was erased since: its answer carried the erased
    text's checksum, and whether a guess matched it would tell the text."""
    event_id = item.fields["event_id"]
    if not event_id:
        return None
    prior = core.log.by_event_id(tenant_event_id(item.scope.tenant, event_id))
    if prior is None:
        return None
    p = prior.payload
    if prior.type == "memory.saved" and p["version"] <= view.erased_through(p["tenant"], p["memory_id"]):
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


def _evidence(
    core: Core,
    view: ViewReader,
    tenant: str,
    memory_id: str,
    derived_from: Sequence[str | ParentRef | dict[str, Any]],
    access: Access,
) -> tuple[ParentRef, ...]:
    """The parents of a new memory: each a memory of the same tenant that
    the caller may read (one it may not answers as one that does not
    exist), usable now (a conclusion cannot be drawn from evidence that
    may not be used), and none descended from the memory itself."""
    if isinstance(derived_from, str):
        derived_from = [derived_from]
    if len(derived_from) > core.limits.max_parents:
        raise TooLarge(
            "derived_from",
            f"names {len(derived_from)} parents; the limit is {core.limits.max_parents} (limits.max_parents)",
        )
    judge = Judge(view, core.now(), view.policies())
    refs: list[ParentRef] = []
    for item in derived_from:
        parent_id = (
            item
            if isinstance(item, str)
            else (item.memory_id if isinstance(item, ParentRef) else item.get("memory_id"))
        )
        if not isinstance(parent_id, str) or not parent_id:
            raise InvalidInput("derived_from", "each parent must be a memory id")
        check_storable("derived_from", parent_id)
        if parent_id == memory_id:
            raise InvalidInput("derived_from", f"memory {memory_id!r} cannot be derived from itself")
        parent = judge.row(tenant, parent_id)
        if parent is None or not access.allows(parent["tenant"], parent["agent"]):
            raise InvalidInput("derived_from", f"parent {parent_id!r} does not exist")
        decision = judge.decide(parent)
        if not decision.usable:
            raise InvalidInput(
                "derived_from",
                f"parent {parent_id!r} is not usable ({decision.reason}): nothing may be drawn from it",
            )
        if parent_id not in {r.memory_id for r in refs}:
            refs.append(ParentRef(memory_id=parent_id, version=parent["version"]))
    if memory_id in view.ancestors(tenant, [r.memory_id for r in refs]):
        raise InvalidInput("derived_from", f"a cycle: memory {memory_id!r} is already evidence for one of its parents")
    limit = core.limits.max_derivation_depth
    levels = view.depth(tenant, [r.memory_id for r in refs], limit) + 1
    if levels > limit:
        raise InvalidInput(
            "derived_from",
            f"would make a chain of derivations more than {limit} deep (limits.max_derivation_depth)",
        )
    return tuple(refs)


def _expiry(
    core: Core, kind: str, fetched: datetime, expires_at: datetime | str | None, ttl: timedelta | str | None
) -> datetime | None:
    if expires_at is not None and ttl is not None:
        raise InvalidInput("ttl", "give either expires_at or ttl, not both")
    if expires_at is not None:
        return when("expires_at", expires_at)
    if ttl is not None:
        try:
            return fetched + (parse_duration(ttl) if isinstance(ttl, str) else ttl)
        except ValueError as exc:
            raise InvalidInput("ttl", str(exc)) from None
    rule_ttl = core.policy.ttl_for(kind) if isinstance(kind, str) else None
    return None if rule_ttl is None else fetched + rule_ttl


def refuse_if_revoked(
    revocations: Sequence[dict[str, Any]], event: MemorySaved, row: dict[str, Any] | None = None
) -> None:
    """No resurrection: a fetch older than a revocation covering it is
    refused, and so is one older than the last revocation that ever covered
    a version of this memory (``row``), whatever scope the new one claims:
    the fold would record it revoked, so the caller is told now."""
    fetched = format_ts(event.fetched_at)
    until = row.get("revoked_until") if row else None
    if until is not None and fetched <= until:
        raise RevokedScope(event.memory_id, row["last_revocation"], until, fetched)  # type: ignore[index]
    candidate = {
        "memory_id": event.memory_id,
        "kind": event.kind,
        "source_url": event.source_url,
        **event.scope.model_dump(),
    }
    if event.cache_key and not candidate.get("tool"):
        candidate["tool"] = event.cache_key.tool
    rev = blocking_revocation(revocations, {**candidate, "fetched_at": fetched})
    if rev is not None:
        raise RevokedScope(event.memory_id, rev["revocation_id"], rev["effective_at"], fetched)
