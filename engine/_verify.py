"""Re-verification against the source (what is due: ``_due``)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from memwarden.events import (
    CacheKey,
    MemoryInvalidated,
    MemorySaved,
    MemoryVerificationFailed,
    MemoryVerified,
    Scope,
    content_checksum,
    format_ts,
    get_logger,
    parse_ts,
)
from memwarden.projections import SCOPE_COLUMNS, TERMINAL, Access, MemoryRow, Write, parent_refs, row_of

from ._core import Core
from ._derivation import Judge, deepest_first
from ._due import due
from ._errors import FetchFailed, MemoryNotFound
from ._rights import Principal, operation
from ._versions import version_of
from ._views import VerifyResult

log = get_logger("memwarden.verify")


@operation("verify")
def verify(
    warden: Core, memory_id: str, *, tenant: str | None = None, caller: Principal, accept: bool = False
) -> VerifyResult:
    """Fetch the source again and compare it with the recorded checksum."""
    access = caller.access
    with warden.reading() as view:
        row = warden.find_row(view, memory_id, tenant=tenant, access=access)
    tenant = row.tenant
    if row.status in TERMINAL:
        return _refused(row)
    if _is_derived(row):
        return _verify_derived(warden, row, access=access)
    return _verify_source(warden, row, accept=accept)


def _refused(row: MemoryRow) -> VerifyResult:
    return VerifyResult(
        row.memory_id,
        row.status,
        "refused: only a fresh save can follow a revocation or erasure",
        None,
        row.tenant,
    )


def _is_derived(row: MemoryRow) -> bool:
    return row.derived_from not in (None, "[]")


def _verify_source(warden: Core, row: MemoryRow, *, accept: bool) -> VerifyResult:
    memory_id, tenant = row.memory_id, row.tenant
    try:
        text: str | None = warden.fetchers.fetch(row.as_dict())
        problem = None
    except FetchFailed as exc:  # the caller sees the category; the detail is in the log
        text, problem = None, exc.public
    now = warden.clock.now()
    with warden.transaction() as tx:
        current = row_of(tx.view, Access.system(), tenant, memory_id)
        if current is None or current.version != row.version or current.status in TERMINAL:
            return VerifyResult(memory_id, "skipped", "the memory changed while it was being verified", None, tenant)
        if text is None:
            seq = tx.append(
                [
                    MemoryVerificationFailed(
                        tenant=tenant,
                        memory_id=memory_id,
                        version=row.version,
                        error=problem or "fetch failed",
                        attempted_at=now,
                        actor="memwarden",
                    )
                ]
            )[0]
            log.warning("verification_failed", memory_id=memory_id, problem=problem)
            return VerifyResult(memory_id, "failed", problem, seq, tenant)
        checksum = content_checksum(text)
        if checksum == row.checksum:
            policy_version = version_of(tx.view, row.policy)
            expires = _renewed_expiry(row, now)
            # also heals a damaged stored text
            tx.texts.restore(tenant, memory_id, row.version, checksum, text)
            seq = tx.append(
                [
                    MemoryVerified(
                        tenant=tenant,
                        memory_id=memory_id,
                        version=row.version,
                        content_checksum=checksum,
                        fetched_at=now,
                        verified_at=now,
                        expires_at=expires,
                        revocation_version=policy_version,
                        after_expiry=row.expires_at is not None and row.expires_at <= format_ts(now),
                        actor="memwarden",
                    )
                ]
            )[0]
            return VerifyResult(memory_id, "verified", None, seq, tenant)
        events: list[Any] = [
            MemoryInvalidated(
                tenant=tenant,
                memory_id=memory_id,
                version=row.version,
                reason="source_changed",
                new_checksum=checksum,
                detail=f"source now hashes to {checksum}",
                actor="memwarden",
            )
        ]
        if accept:
            expires = _renewed_expiry(row, now)
            summary = tx.texts.summary(tenant, memory_id, row.version) or row.kind
            tx.texts.put(tenant, memory_id, row.version + 1, summary, text)
            events.append(
                MemorySaved(
                    tenant=tenant,
                    memory_id=memory_id,
                    version=row.version + 1,
                    kind=row.kind,
                    summary_checksum=content_checksum(summary),
                    content_checksum=checksum,
                    content_length=len(text.encode("utf-8")),
                    source_url=row.source_url,
                    source=row.source,
                    repo=row.repo,
                    branch=row.branch,
                    fetched_at=now,
                    expires_at=expires,
                    verified_at=now,
                    scope=Scope(**{k: getattr(row, k) for k in SCOPE_COLUMNS}),
                    policy=row.policy,
                    revocation_version=version_of(tx.view, row.policy),
                    derived_from=parent_refs(memory_id, row.derived_from),
                    cache_key=(
                        CacheKey(tool=row.tool, tool_version=row.tool_version, input_hash=row.input_hash)
                        if row.tool and row.tool_version and row.input_hash
                        else None
                    ),
                    actor="memwarden",
                )
            )
        seqs = tx.append(events)
        log.warning("source_changed", memory_id=memory_id, accepted=accept)
        return VerifyResult(
            memory_id, "updated" if accept else "changed", f"source now hashes to {checksum}", seqs[-1], tenant
        )


def _verify_derived(warden: Core, row: MemoryRow, *, access: Access) -> VerifyResult:
    """A derived memory is re-checked from its evidence: each memory it
    rests on, at any depth, is verified first (against its own source, or
    re-issued from its own evidence), each once; only if every parent then
    comes back usable and unchanged is this memory re-issued with new
    times. A parent whose content changed is invalidated, and the cascade
    takes this memory with it: it is never silently kept. Evidence the
    caller may not see is not checked.

    The sources are fetched first, each in a transaction of its own (no
    lock is held across a fetch). The derived memories are then re-issued
    in one transaction, deepest first, with one ``Judge``: each re-issue
    updates that memory's decision, so its children are judged from their
    parents' new state without judging the whole chain again (a chain of
    N memories costs N decisions, not N squared)."""
    outcomes: dict[str, str] = {}
    derived: list[MemoryRow] = []
    for evidence in _evidence_of(warden, row, access):
        if evidence.status in TERMINAL:
            outcomes[evidence.memory_id] = _refused(evidence).outcome
        elif _is_derived(evidence):
            derived.append(evidence)
        else:  # a parent is re-verified, never updated, on a child's behalf
            outcomes[evidence.memory_id] = _verify_source(warden, evidence, accept=False).outcome
    now = warden.clock.now()
    with warden.transaction() as tx:
        judge = Judge(tx.view, format_ts(now), tx.view.policies())
        for evidence in derived:
            outcomes[evidence.memory_id] = _reissue(tx, judge, evidence, now).outcome
        result = _reissue(tx, judge, row, now)
    if result.outcome != "verified":
        return result
    detail = ", ".join(
        f"{ref['memory_id']}: {outcomes.get(ref['memory_id'], 'not_checked')}"
        for ref in parent_refs(row.memory_id, row.derived_from)
    )
    return VerifyResult(row.memory_id, "verified", f"re-issued from its evidence ({detail})", result.seq, row.tenant)


def _evidence_of(warden: Core, row: MemoryRow, access: Access) -> list[MemoryRow]:
    """The memories ``row`` rests on, each once, each after its own evidence.
    Evidence is in the same tenant, and checked only within the caller's
    rights: a parent the caller may not see is left out."""

    def parents_of(current: MemoryRow) -> list[MemoryRow]:
        found = []
        for ref in parent_refs(current.memory_id, current.derived_from):
            try:
                found.append(warden.find_row(view, ref["memory_id"], tenant=row.tenant, access=access))
            except MemoryNotFound:
                continue
        return found

    with warden.reading() as view:
        return deepest_first(row, parents_of, lambda r: r.memory_id)[:-1]  # the last is row itself


def _reissue(tx: Write, judge: Judge, row: MemoryRow, now: datetime) -> VerifyResult:
    """Re-issue ``row`` with new times if every parent is usable and
    unchanged now; then ``judge`` holds its new state for its children."""
    memory_id, tenant = row.memory_id, row.tenant
    current = judge.row(tenant, memory_id)
    if current is None or current.version != row.version or current.status in TERMINAL:
        return VerifyResult(memory_id, "skipped", "the memory changed while it was being verified", None, tenant)
    parents = judge.parents(current)
    broken = next((p for p in parents if p.current != p.wanted or not (p.decision and p.decision.usable)), None)
    if broken is not None:
        why = (
            "changed" if broken.current != broken.wanted else (broken.decision.reason if broken.decision else "missing")
        )
        return VerifyResult(memory_id, "evidence_unusable", f"parent {broken.memory_id}: {why}", tx.head.seq, tenant)
    seq = tx.append(
        [
            MemoryVerified(
                tenant=tenant,
                memory_id=memory_id,
                version=row.version,
                content_checksum=row.checksum,
                fetched_at=now,
                verified_at=now,
                expires_at=_renewed_expiry(row, now),
                revocation_version=version_of(tx.view, row.policy),
                after_expiry=row.expires_at is not None and row.expires_at <= format_ts(now),
                actor="memwarden",
            )
        ]
    )[0]
    judge.refresh(tenant, memory_id)
    return VerifyResult(memory_id, "verified", "re-issued from its evidence", seq, tenant)


def _renewed_expiry(row: MemoryRow, now: datetime) -> datetime | None:
    """Keep the memory's own lifetime (expires_at - fetched_at) from now on."""
    if row.expires_at is None:
        return None
    lifetime = parse_ts(row.expires_at) - parse_ts(row.fetched_at)
    return now + max(lifetime, timedelta(seconds=1))


@operation("verify")
def verify_due(
    warden: Core, *, accept: bool = False, limit: int | None = None, caller: Principal
) -> list[VerifyResult]:
    return [
        verify(warden, item.memory_id, tenant=item.tenant, caller=caller, accept=accept)
        for item in due(warden, limit=limit, caller=caller)
    ]
