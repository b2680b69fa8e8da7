"""A sink's read-back outcomes as events in the log (``sink.readback_recorded``).

The outbox keeps each sink's working state (attempts, next try, deadline);
what an auditor must be able to replay is the outcome: confirmed (with its
latency), a leak when first found and whenever what leaks changes, and the
state a sink was left in at its read-back deadline (leaked or unreachable).
Each is appended in the same transaction that updates the outbox's row, so
the row and the log never disagree about what was found.

Event ids are derived from what they record, so two nodes reading one sink
back at once (PostgreSQL) record it once: a sink's final outcome has one id
per revocation (a second final is a no-op, whichever node tries), and a
leak's id names the ids leaked and the attempt it was found on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memwarden.events import SinkReadbackRecorded, sha256_hex

from .._core import Core
from ._config import SinkSpec

NOT_DELIVERED = "its notice was not delivered by the read-back deadline"


def outcome_id(revocation_id: str, sink: str, *, final: bool, attempts: int = 0, leaked: Sequence[str] = ()) -> str:
    if final:
        key = f"{revocation_id}\x00{sink}\x00final"
    else:
        key = f"{revocation_id}\x00{sink}\x00leaked\x00{attempts}\x00{','.join(leaked)}"
    return "sro_" + sha256_hex(key)[:40]


def outcome_event(
    spec: SinkSpec,
    row: dict[str, Any],
    outcome: str,
    *,
    final: bool,
    leaked: list[str] | None = None,
    latency_ms: float | None = None,
    detail: str | None = None,
    attempts: int | None = None,
) -> SinkReadbackRecorded:
    """The event recording ``outcome`` for the read-back ``row`` (as the
    outbox held it before this attempt)."""
    leaked = sorted(leaked or [])
    tried = row["attempts"] if attempts is None else attempts
    return SinkReadbackRecorded(
        event_id=outcome_id(row["revocation_id"], spec.name, final=final, attempts=row["attempts"], leaked=leaked),
        revocation_id=row["revocation_id"],
        sink=spec.name,
        sink_kind=spec.kind,
        notice_id=row["notice_id"],
        outcome=outcome,  # type: ignore[arg-type]
        final=final,
        covered=row["covered"],
        attempts=tried,
        leaked_ids=tuple(leaked),
        latency_ms=latency_ms if outcome == "confirmed" else None,
        detail=(detail or None) if outcome == "unreachable" else None,
        actor="memwarden",
    )


def deadline_event(spec: SinkSpec, row: dict[str, Any], last_error: str | None) -> SinkReadbackRecorded:
    """The final outcome of a read-back whose deadline passed: the state it
    was left in (one confirmed before final outcomes were recorded is
    recorded confirmed, with its latency)."""
    if row["status"] == "confirmed":
        return outcome_event(spec, row, "confirmed", final=True, latency_ms=row["latency_ms"] or 0.0)
    if row["status"] == "leaked" and row["leaked_ids"]:
        return outcome_event(spec, row, "leaked", final=True, leaked=row["leaked_ids"])
    if row["status"] == "pending" or not row["detail"]:
        detail = NOT_DELIVERED + (f" ({last_error})" if last_error else "")
    else:
        detail = row["detail"]
    return outcome_event(spec, row, "unreachable", final=True, detail=detail[:500])


def record(core: Core, event: SinkReadbackRecorded, readback: dict[str, Any] | None = None) -> int:
    """Append ``event`` and, in the same transaction, update its read-back
    row (``readback``: ``Outbox.set_readback``'s fields; None leaves the row's
    state as it is) and mark a final outcome's position. Its seq.

    One final outcome per read-back, whoever writes it: two writers can
    read the same open read-back (the scheduler's sink job, a caller
    waiting on the revocation, another node) and each find an outcome. The
    first to commit is the record; the second, seeing it here under the
    write lock, writes nothing and answers the first's position (its own
    event, under the same id with another latency, would be refused)."""
    with core.transaction() as tx:
        outbox = tx.view.outbox()
        settled = outbox.final_seq(event.revocation_id, event.sink)
        if settled is not None:
            return settled
        seq = tx.append([event])[0]
        if readback is not None:
            outbox.set_readback(event.revocation_id, event.sink, **readback)
        if event.final:
            outbox.set_final(event.revocation_id, event.sink, seq)
    return seq
