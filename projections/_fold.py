"""The fold: what one event does to one memory's row, as pure functions.

The usable view changes only through these (and their set forms in
``_usable``, which tests hold equal to them), so replaying the log always
gives the same view.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memwarden.events import RecordedEvent, canonical_json, spelled, version_key

from ._selector import Revocation, blocking_revocation, revokes

TERMINAL = frozenset({"erased", "revoked"})
# what a cascade's invalidation passes over: nothing is left to take from these
SETTLED = TERMINAL | {"invalidated"}


def _sql(statuses: frozenset[str]) -> str:
    """``statuses`` for a SQL ``status NOT IN`` / ``IN``."""
    return "(" + ", ".join(f"'{s}'" for s in sorted(statuses)) + ")"


TERMINAL_SQL = _sql(TERMINAL)
SETTLED_SQL = _sql(SETTLED)
STATUSES = ("usable", "expired", "unknown", "revoked", "invalidated", "erased", "quarantined")

SCOPE_COLUMNS = ("tenant", "project", "permission", "user", "agent", "tool")

COLUMNS = (
    "memory_id",
    "version",
    "kind",
    "status",
    "reason",
    *SCOPE_COLUMNS,
    "tool_version",
    "input_hash",
    "source_url",
    "source",
    "repo",
    "branch",
    "fetched_at",
    "expires_at",
    "verified_at",
    "policy",
    "revocation_version",
    "checksum",
    "content_length",
    "invalidation_reason",
    "invalidated_by",
    "revoked_by",
    "revoked_until",
    "last_revocation",
    "quarantined_from",
    "derived_from",
    "first_seq",
    "last_seq",
)


def fold_memory(
    row: dict[str, Any] | None, event: RecordedEvent, revocations: Sequence[Revocation]
) -> dict[str, Any] | None:
    """The memory row after ``event``: a pure function of its inputs. The
    row holds no text: summaries and contents live in the text store."""
    p = event.payload
    kind = event.type
    if kind == "memory.saved":
        if row is not None and row["status"] == "erased" and p["version"] <= row["version"]:
            # a version the erasure destroyed never comes back; a later one
            # (the memory saved again) starts afresh with its own text
            return {**row, "last_seq": event.seq}
        scope = p["scope"]
        cache = p.get("cache_key") or {}
        new = {
            "memory_id": p["memory_id"],
            "version": p["version"],
            "kind": p["kind"],
            "status": "usable",
            "reason": None,
            "tenant": p["tenant"],
            "project": scope.get("project"),
            "permission": scope.get("permission"),
            "user": scope.get("user"),
            "agent": scope.get("agent"),
            "tool": scope.get("tool") or cache.get("tool"),
            "tool_version": cache.get("tool_version"),
            "input_hash": cache.get("input_hash"),
            # one spelling, whichever path wrote the event: what a source prefix is compared with
            "source_url": spelled(p["source_url"]),
            "source": p.get("source"),
            "repo": p.get("repo"),
            "branch": p.get("branch"),
            "fetched_at": fetched_at(p, event),
            "expires_at": p.get("expires_at"),
            "verified_at": p.get("verified_at"),
            "policy": p.get("policy", "default"),
            "revocation_version": version_key(p.get("revocation_version", 1)),
            "checksum": p["content_checksum"],
            "content_length": p.get("content_length", 0),
            "invalidation_reason": None,
            "invalidated_by": None,
            "revoked_by": None,
            # the latest effective time of any revocation that ever covered a
            # version of this memory, and that revocation: whatever a later
            # version's scope or source says, none fetched by then comes back
            "revoked_until": row["revoked_until"] if row else None,
            "last_revocation": row["last_revocation"] if row else None,
            "quarantined_from": None,
            "derived_from": canonical_json(p["derived_from"], floats=False) if p.get("derived_from") else "[]",
            "first_seq": row["first_seq"] if row else event.seq,
            "last_seq": event.seq,
        }
        # A save can never undo a revocation that came before it: only a
        # fetch made after the revocation took effect escapes it.
        blocking = blocking_revocation(revocations, new)
        if blocking is not None:
            new.update(status="revoked", reason="revoked", revoked_by=blocking.revocation_id)
            if new["revoked_until"] is None or new["revoked_until"] <= blocking.effective_at:
                new.update(revoked_until=blocking.effective_at, last_revocation=blocking.revocation_id)
        elif new["revoked_until"] is not None and new["fetched_at"] <= new["revoked_until"]:
            new.update(status="revoked", reason="revoked", revoked_by=new["last_revocation"])
        return new
    if row is None:
        return None  # an event about a memory never saved: nothing to show
    status = row["status"]
    out = {**row, "last_seq": event.seq}
    same_version = p.get("version", row["version"]) == row["version"]
    if kind == "memory.erased":
        out.update(status="erased", reason="erased")
    elif status in TERMINAL or not same_version:
        return out
    elif kind == "memory.verified":
        out.update(
            status="usable",
            reason=None,
            fetched_at=fetched_at(p, event),
            verified_at=p["verified_at"],
            expires_at=p.get("expires_at"),
            revocation_version=version_key(p["revocation_version"]),
            checksum=p["content_checksum"],
            invalidation_reason=None,
            invalidated_by=None,
        )
    elif kind == "memory.verification_failed":
        out.update(status="unknown", reason="unknown")
    elif kind == "memory.expired":
        if status == "usable" and row["expires_at"] == p["expires_at"]:
            out.update(status="expired", reason="expired")
    elif kind == "memory.invalidated":
        out.update(
            status="invalidated",
            reason=p["reason"],
            invalidation_reason=p["reason"],
            invalidated_by=event.seq,
        )
    elif kind == "memory.integrity_failed":
        if status != "quarantined":
            out.update(status="quarantined", reason="integrity_failed", quarantined_from=status)
    elif kind == "memory.resynced":
        if status == "quarantined":
            previous = row["quarantined_from"] or "usable"
            out.update(status=previous, reason=_reason_of(previous, row), quarantined_from=None)
    return out


def _reason_of(status: str, row: dict[str, Any]) -> str | None:
    if status == "invalidated":
        return row["invalidation_reason"]
    return None if status == "usable" else status


def fetched_at(payload: dict[str, Any], event: RecordedEvent) -> str:
    """A version's fetch time as the view holds it: the caller's claim, but
    never later than the moment the log recorded it. A fetch claimed in the
    future is clamped, not trusted: the one place every path's fetch times
    pass (saves, imports, records, verifications, replays of the past)."""
    claimed = payload["fetched_at"]
    return event.recorded_at if event.recorded_at and claimed > event.recorded_at else claimed


def revoke_row(row: dict[str, Any], revocation: Revocation, seq: int) -> dict[str, Any] | None:
    """The row after a revocation, or None if the revocation does not touch
    it. Every row the view holds when the revocation applies was recorded
    before it: its selector alone decides."""
    if row["status"] not in TERMINAL and revokes(revocation, row, recorded_before=True):
        later = row["revoked_until"] is None or row["revoked_until"] <= revocation.effective_at
        return {
            **row,
            "status": "revoked",
            "reason": "revoked",
            "revoked_by": revocation.revocation_id,
            "revoked_until": revocation.effective_at if later else row["revoked_until"],
            "last_revocation": revocation.revocation_id if later else row["last_revocation"],
            "last_seq": seq,
        }
    return None
