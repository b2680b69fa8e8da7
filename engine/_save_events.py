"""A save's event as the view has it: who holds the id, the version it
takes, its evidence and its policy's version (``Reads``, ``built_event``),
and no resurrection (``refuse_if_revoked``). A single save asks all of it
under the write lock; a large batch builds its events before the lock and
asks again under it (``_batch``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memwarden.events import MemorySaved, ParentRef, Scope, check_storable, content_checksum, format_ts, sha256_hex
from memwarden.projections import (
    Access,
    Key,
    LineageQuery,
    MemoryRow,
    Revocation,
    ViewReader,
    blocking_revocation,
    depth_of,
    row_of,
)

from ._core import Core
from ._derivation import Judge
from ._errors import InvalidInput, MemoryIdTaken, RevokedScope
from ._limits import CONTROL, TooLarge, check_source_url
from ._rights import Principal, may
from ._validation import build, when
from ._versions import IMPLICIT_VERSION, adopt, version_of


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
    # the version's embeddings, of one length (given, or the embedder's one)
    vectors: tuple[tuple[float, ...], ...] | None = None
    embedder: str | None = None  # what made them ("caller": given with the save)


@dataclass(frozen=True, slots=True)
class Pending:
    """What a memory's row will say of a save pending in a batch
    (``Reads.saved``): its holder and version, and no revocation yet."""

    tenant: str
    memory_id: str
    agent: str | None
    version: int
    revoked_until: str | None = None
    last_revocation: str | None = None


# a memory's row as a save reads it: the view's, or a pending save's
Held = MemoryRow | Pending


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
        found = view.rows(Access.system(), wanted) if wanted else {}
        self._rows: dict[Key, Held | None] = {key: found.get(key) for key in wanted}
        self._policies: dict[str, int | str] = {}

    def refresh(self, changed: Iterable[Key]) -> None:
        """After a batch's own appends: the rows of the memories they wrote
        read again, and the policies' versions (an adoption may have
        changed one). Only those: re-reading every remaining row after each
        append made a batch repeating one id quadratic."""
        wanted = list(dict.fromkeys(changed))
        found = self.view.rows(Access.system(), wanted) if wanted else {}
        self._rows.update((key, found.get(key)) for key in wanted)
        self._policies.clear()

    def saved(self, event: MemorySaved) -> None:
        """A save pending in this batch: what the memory's row will say of
        it (its holder and version), for a repeat of the id that follows
        before the save is appended. ``refresh`` reads the real row again."""
        scope = event.scope
        self._rows[(scope.tenant, event.memory_id)] = Pending(scope.tenant, event.memory_id, scope.agent, event.version)

    def row(self, tenant: str, memory_id: str) -> Held | None:
        key = (tenant, memory_id)
        if key not in self._rows:  # kept: the event and the revocations' check both ask
            self._rows[key] = row_of(self.view, Access.system(), tenant, memory_id)
        return self._rows[key]

    def version_of(self, policy: str) -> int | str:
        if policy not in self._policies:
            self._policies[policy] = version_of(self.view, policy)
        return self._policies[policy]


def saved_event(
    core: Core,
    view: ViewReader,
    item: Checked,
    revocations: Sequence[Revocation],
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
    if row is not None and not access.allows(row.tenant, row.agent):
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
        version=(row.version + 1) if row else 1,
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
        embedding_dims=len(item.vectors[0]) if item.vectors else None,
        embedding_count=len(item.vectors) if item.vectors and len(item.vectors) > 1 else None,
        actor=f["actor"],
        **({"event_id": tenant_event_id(tenant, f["event_id"], item.scope.agent)} if f["event_id"] is not None else {}),
    )
    check_source_url("source_url", event.source_url)
    return event, adopted


def tenant_event_id(tenant: str, event_id: Any, agent: str | None = None) -> str:
    """A caller's event id as the log keeps it: in its tenant, and for a
    memory of an agent in that agent's, so that one tenant's (or agent's)
    ids never meet, nor tell of, another's (an agent probing which ids
    another used, or claiming them first). Neither a tenant nor an agent
    holds a NUL, so the three parts never run together."""
    if not isinstance(event_id, str) or not event_id.strip() or CONTROL.search(event_id) or len(event_id) > 512:
        raise InvalidInput("event_id", "must be 1 to 512 characters, not all spaces, without control characters")
    owner = tenant if agent is None else f"{tenant}\x00{agent}"
    return "cid_" + sha256_hex(f"{owner}\x00{event_id}")[:40]


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
        if parent is None or not access.allows(parent.tenant, parent.agent):
            raise InvalidInput("derived_from", f"parent {parent_id!r} does not exist")
        decision = judge.decide(parent)
        if not decision.usable:
            raise InvalidInput(
                "derived_from",
                f"parent {parent_id!r} is not usable ({decision.reason}): nothing may be drawn from it",
            )
        if parent_id not in {r.memory_id for r in refs}:
            refs.append(ParentRef(memory_id=parent_id, version=parent.version))
    parents = tuple((tenant, r.memory_id) for r in refs)
    if memory_id in {k.memory_id for k in view.lineage(LineageQuery("up", parents))}:
        raise InvalidInput("derived_from", f"a cycle: memory {memory_id!r} is already evidence for one of its parents")
    limit = core.limits.max_derivation_depth
    levels = depth_of(view.lineage(LineageQuery("up", parents, limit))) + 1
    if levels > limit:
        raise InvalidInput(
            "derived_from",
            f"would make a chain of derivations more than {limit} deep (limits.max_derivation_depth)",
        )
    return tuple(refs)


def refuse_if_revoked(revocations: Sequence[Revocation], event: MemorySaved, row: Held | None = None) -> None:
    """No resurrection: a fetch older than a revocation covering it is
    refused, and so is one older than the last revocation that ever covered
    a version of this memory (``row``), whatever scope the new one claims:
    the fold would record it revoked, so the caller is told now."""
    fetched = format_ts(event.fetched_at)
    until = row.revoked_until if row else None
    if row is not None and until is not None and fetched <= until:
        # a row revoked once names the revocation that did it
        raise RevokedScope(event.memory_id, str(row.last_revocation), until, fetched)
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
        raise RevokedScope(event.memory_id, rev.revocation_id, rev.effective_at, fetched)
