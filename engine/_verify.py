"""Re-verification against the source, what is due, and importing records."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
from memwarden.events import (
    MemoryInvalidated,
    MemorySaved,
    MemoryVerificationFailed,
    MemoryVerified,
    PolicyVersionChanged,
    Scope,
    canonical_json,
    content_checksum,
    format_ts,
    parse_ts,
    sha256_hex,
)
from memwarden.events._models import Identifier, NonEmptyStr, UTCDateTime
from memwarden.projections import (
    RECHECK,
    SCOPE_COLUMNS,
    current_policies,
    fetch_row,
    load_revocations,
    parent_refs,
    revocation_blocks,
    selector_covers,
)
from pydantic import BaseModel, ConfigDict, ValidationError

from ._access import EVERYONE, Access
from ._derivation import Judge
from ._errors import FetchFailed, InvalidInput, MemoryNotFound
from ._validation import build, field_error
from ._views import DueItem, ImportResult, VerifyResult

if TYPE_CHECKING:
    from ._warden import Warden

log = structlog.get_logger("memwarden.verify")


def verify(
    warden: Warden, memory_id: str, *, tenant: str | None = None, access: Access = EVERYONE, accept: bool = False
) -> VerifyResult:
    """Fetch the source again and compare it with the recorded checksum."""
    with warden.reading() as conn:
        row = warden.find_row(conn, memory_id, tenant=tenant, access=access)
    tenant = row["tenant"]
    if row["status"] in ("erased", "revoked"):
        return VerifyResult(
            memory_id, row["status"], "refused: only a fresh save can follow a revocation or erasure", None, tenant
        )
    if row["derived_from"] not in (None, "[]"):
        return _verify_derived(warden, row, access=access, accept=accept)
    try:
        text: str | None = warden.fetchers.fetch(row)
        problem = None
    except FetchFailed as exc:  # the caller sees the category; the detail is in the log
        text, problem = None, exc.public
    now = warden.clock.now()
    with warden.log.transaction() as tx:
        current = fetch_row(tx.conn, tenant, memory_id)
        if current is None or current["version"] != row["version"] or current["status"] in ("erased", "revoked"):
            return VerifyResult(memory_id, "skipped", "the memory changed while it was being verified", None, tenant)
        if text is None:
            seq = tx.append(
                [
                    MemoryVerificationFailed(
                        tenant=tenant,
                        memory_id=memory_id,
                        version=row["version"],
                        error=problem or "fetch failed",
                        attempted_at=now,
                        actor="memwarden",
                    )
                ]
            )[0]
            log.warning("verification_failed", memory_id=memory_id, problem=problem)
            return VerifyResult(memory_id, "failed", problem, seq, tenant)
        checksum = content_checksum(text)
        if checksum == row["checksum"]:
            policy_version = warden._policy_version(tx.conn, row["policy"])
            expires = _renewed_expiry(row, now)
            # also heals a damaged stored text
            warden.texts.restore(tenant, memory_id, row["version"], checksum, text)
            seq = tx.append(
                [
                    MemoryVerified(
                        tenant=tenant,
                        memory_id=memory_id,
                        version=row["version"],
                        content_checksum=checksum,
                        fetched_at=now,
                        verified_at=now,
                        expires_at=expires,
                        revocation_version=policy_version,
                        after_expiry=row["expires_at"] is not None and row["expires_at"] <= format_ts(now),
                        actor="memwarden",
                    )
                ]
            )[0]
            return VerifyResult(memory_id, "verified", None, seq, tenant)
        events: list[Any] = [
            MemoryInvalidated(
                tenant=tenant,
                memory_id=memory_id,
                version=row["version"],
                reason="source_changed",
                new_checksum=checksum,
                detail=f"source now hashes to {checksum}",
                actor="memwarden",
            )
        ]
        if accept:
            expires = _renewed_expiry(row, now)
            summary = warden.texts.summary(tenant, memory_id, row["version"]) or row["kind"]
            warden.texts.put(tenant, memory_id, row["version"] + 1, summary, text)
            events.append(
                MemorySaved(
                    tenant=tenant,
                    memory_id=memory_id,
                    version=row["version"] + 1,
                    kind=row["kind"],
                    summary_checksum=content_checksum(summary),
                    content_checksum=checksum,
                    content_length=len(text.encode("utf-8")),
                    source_url=row["source_url"],
                    source=row["source"],
                    repo=row["repo"],
                    branch=row["branch"],
                    fetched_at=now,
                    expires_at=expires,
                    verified_at=now,
                    scope={k: row[k] for k in SCOPE_COLUMNS},
                    policy=row["policy"],
                    revocation_version=warden._policy_version(tx.conn, row["policy"]),
                    derived_from=parent_refs(memory_id, row["derived_from"]),
                    cache_key=(
                        {"tool": row["tool"], "tool_version": row["tool_version"], "input_hash": row["input_hash"]}
                        if row["tool_version"]
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


def _verify_derived(warden: Warden, row: dict[str, Any], *, access: Access, accept: bool) -> VerifyResult:
    """A derived memory is re-checked from its evidence: each parent is
    verified against its own source first, and only if every one comes back
    usable and unchanged is this memory re-issued with new times. A parent
    whose content changed is invalidated, and the cascade takes this memory
    with it: it is never silently kept."""
    memory_id, tenant = row["memory_id"], row["tenant"]
    outcomes = []
    for ref in parent_refs(memory_id, row["derived_from"]):
        try:
            # evidence in the same tenant, re-verified only within the caller's rights
            outcome = verify(warden, ref["memory_id"], tenant=tenant, access=access, accept=False).outcome
        except MemoryNotFound:
            outcome = "not_checked"
        outcomes.append((ref["memory_id"], outcome))
    now = warden.clock.now()
    with warden.log.transaction() as tx:
        current = fetch_row(tx.conn, tenant, memory_id)
        if current is None or current["version"] != row["version"] or current["status"] in ("erased", "revoked"):
            return VerifyResult(memory_id, "skipped", "the memory changed while it was being verified", None, tenant)
        judge = Judge(tx.conn, format_ts(now), current_policies(tx.conn))
        parents = judge.parents(current)
        broken = next((p for p in parents if p.current != p.wanted or not (p.decision and p.decision.usable)), None)
        if broken is not None:
            why = (
                "changed"
                if broken.current != broken.wanted
                else (broken.decision.reason if broken.decision else "missing")
            )
            return VerifyResult(
                memory_id, "evidence_unusable", f"parent {broken.memory_id}: {why}", tx.head.seq, tenant
            )
        seq = tx.append(
            [
                MemoryVerified(
                    tenant=tenant,
                    memory_id=memory_id,
                    version=row["version"],
                    content_checksum=row["checksum"],
                    fetched_at=now,
                    verified_at=now,
                    expires_at=_renewed_expiry(row, now),
                    revocation_version=warden._policy_version(tx.conn, row["policy"]),
                    after_expiry=row["expires_at"] is not None and row["expires_at"] <= format_ts(now),
                    actor="memwarden",
                )
            ]
        )[0]
    detail = ", ".join(f"{m}: {o}" for m, o in outcomes)
    return VerifyResult(memory_id, "verified", f"re-issued from its evidence ({detail})", seq, tenant)


def _renewed_expiry(row: dict[str, Any], now: datetime) -> datetime | None:
    """Keep the memory's own lifetime (expires_at - fetched_at) from now on."""
    if row["expires_at"] is None:
        return None
    lifetime = parse_ts(row["expires_at"]) - parse_ts(row["fetched_at"])
    return now + max(lifetime, timedelta(seconds=1))


def due(warden: Warden, *, limit: int | None = None, access: Access = EVERYONE) -> list[DueItem]:
    """What must be re-verified now, in precedence: an invalidated memory is
    listed as ``revoked`` (the record format's word), one past its expiry as
    ``expired``, then failed checks (``unknown``) and older policy versions.
    ``access`` confines every statement to what the caller may see."""
    now = warden.now()
    allowed, params = access.where()
    items: dict[tuple[str, str], DueItem] = {}

    def add(sql: str, args: list[Any], reason: str) -> None:
        for tenant, memory_id, url in conn.execute(
            f"SELECT tenant, memory_id, source_url FROM memories WHERE {sql} AND {allowed}", [*args, *params]
        ):
            items.setdefault((memory_id, tenant), DueItem(memory_id, url, reason, tenant))

    with warden.reading() as conn:
        add(f"status = 'invalidated' AND {RECHECK}", [], "revoked")
        # "+status": walk the expiry index (the few past due), not a status
        # index; memories marked expired come from the recheck index. Separate
        # statements, not a UNION: the dict drops the overlap for free.
        add("expires_at <= ? AND +status IN ('usable', 'expired', 'unknown')", [now], "expired")
        add(f"status = 'expired' AND {RECHECK}", [], "expired")
        add(f"status = 'unknown' AND {RECHECK}", [], "unknown")
        for policy, version in conn.execute("SELECT policy, version FROM policies").fetchall():
            add(
                "policy = ? AND revocation_version < ? AND +status IN ('usable', 'expired', 'unknown')",
                [policy, version],
                "policy_changed",
            )
    ordered = sorted(items)  # by memory id, then tenant
    return [items[k] for k in (ordered[:limit] if limit is not None else ordered)]


def verify_due(
    warden: Warden, *, accept: bool = False, limit: int | None = None, access: Access = EVERYONE
) -> list[VerifyResult]:
    return [
        verify(warden, item.memory_id, tenant=item.tenant, access=access, accept=accept)
        for item in due(warden, limit=limit, access=access)
    ]


# -- importing an operator's memory records ------------------------------------------


class MemoryRecord(BaseModel):
    """One line of a memory-record file (as operators keep them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    memory_id: Identifier
    kind: Identifier
    summary: NonEmptyStr
    source_url: NonEmptyStr
    fetched_at: UTCDateTime
    expires_at: UTCDateTime | None = None
    scope: Scope
    revocation_version: int = 1
    invalidation_reason: str | None = None
    verified_at: UTCDateTime | None = None
    content: str | None = None


def import_records(warden: Warden, path: str | Path) -> ImportResult:
    """Turn a JSONL file of memory records into events, all or nothing.

    A record has no separate content: its summary is its text unless a
    ``content`` field is given. Re-importing the same file is a no-op
    (event ids come from each record's bytes). A record whose fetch is
    older than a revocation covering it is refused and reported.
    """
    records: list[tuple[int, MemoryRecord, str]] = []
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise InvalidInput("file", f"{path}: {exc.strerror or exc}") from None
    with fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                data = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise InvalidInput(f"line {number}", f"not valid JSON: {exc}") from None
            if not isinstance(data, dict):
                raise InvalidInput(f"line {number}", "a record must be a JSON object")
            try:
                record = MemoryRecord.model_validate(data)
            except ValidationError as exc:
                raise field_error(exc, f"line {number}") from None
            if record.expires_at is not None and record.expires_at <= record.fetched_at:
                raise InvalidInput(f"line {number}.expires_at", "must be after fetched_at")
            if record.revocation_version < 1:
                raise InvalidInput(f"line {number}.revocation_version", "must be at least 1")
            records.append((number, record, sha256_hex(canonical_json(data))))

    refused: list[dict[str, Any]] = []
    imported = skipped = 0
    with warden.log.transaction() as tx:
        conn = tx.conn
        revocations = load_revocations(conn)
        top = max((r.revocation_version for _, r, _ in records), default=1)
        current = warden._policy_version(conn, "default")
        if top > current:
            tx.append([PolicyVersionChanged(policy="default", version=top, previous_version=current, actor="import")])
        for number, record, digest in records:
            scope = record.scope.model_dump()
            fetched = format_ts(record.fetched_at)
            candidate = {"memory_id": record.memory_id, "kind": record.kind, "source_url": record.source_url, **scope}
            blocking = next(
                (
                    r
                    for r in revocations
                    if revocation_blocks(r["effective_at"], fetched) and selector_covers(r["selector"], candidate)
                ),
                None,
            )
            if blocking is not None:
                refused.append(
                    {"line": number, "memory_id": record.memory_id, "revocation_id": blocking["revocation_id"]}
                )
                continue
            row = fetch_row(conn, record.scope.tenant, record.memory_id)
            if row is not None and row["status"] == "erased":
                refused.append({"line": number, "memory_id": record.memory_id, "reason": "erased"})
                continue
            event_id = f"rec_{digest[:40]}"
            if conn.execute("SELECT 1 FROM events WHERE event_id = ?", (event_id,)).fetchone():
                skipped += 1  # this very record was imported before
                continue
            text = record.content if record.content is not None else record.summary
            saved = build(
                MemorySaved,
                f"line {number}",
                event_id=event_id,
                memory_id=record.memory_id,
                version=(row["version"] + 1) if row else 1,
                kind=record.kind,
                summary_checksum=content_checksum(record.summary),
                content_checksum=content_checksum(text),
                content_length=len(text.encode("utf-8")),
                source_url=record.source_url,
                fetched_at=record.fetched_at,
                expires_at=record.expires_at,
                verified_at=record.verified_at,
                scope=scope,
                revocation_version=record.revocation_version,
                actor="import",
            )
            warden.texts.put(saved.tenant, record.memory_id, saved.version, record.summary, text)
            tx.append([saved])
            imported += 1
            if record.invalidation_reason:
                tx.append(
                    [
                        MemoryInvalidated(
                            event_id=f"{event_id}_inv",
                            tenant=saved.tenant,
                            memory_id=record.memory_id,
                            version=saved.version,
                            reason=record.invalidation_reason,
                            actor="import",
                        )
                    ]
                )
    if refused:
        log.warning("records_refused", count=len(refused))
    return ImportResult(imported, refused, skipped)
