"""The outbox's writer: a reactor that, inside the transaction appending a
revocation, an erasure, an invalidation or a policy change, writes the
notice each sink is owed (and, for a revocation, the read-back each sink
owes). One commit holds both, so a notice exists exactly when its event
does: a failure to write the notice rolls the revocation back with it, and
a crash after the commit leaves a notice to deliver.

A notice names the memories to drop, per tenant, as the fold found them at
that commit: a revocation's covered memories and everything drawn from
them (the cascade's own invalidations are folded into it rather than
announced again), an erasure's or invalidation's memories, a policy
change's retired memories.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from memwarden.events import RecordedEvent, canonical_json
from memwarden.projections import CheckedUnder, Key, LineageQuery, RevokedBy, ViewWriter, Write

from ._config import NOTICE_TYPES, SinkSpec

Reactor = Callable[[Write, Sequence[RecordedEvent]], None]


def notice_id(record: RecordedEvent) -> str:
    """A notice's id from the chain hash of the (first) event it announces:
    the same on every retry and every node (the receiver's idempotency key,
    Standard Webhooks' ``webhook-id``), and never the id of another notice
    for the life of the store. Not the event's seq: a backup restored
    hands its seqs out again, and a receiver that de-duplicates by id would
    drop the new notice as one it had. The hash covers the event's own id,
    its time and the whole chain before it, so no other event has it,
    across backup, restore and ``migrate`` (which carries events as recorded)."""
    return f"ntc_{record.hash[:40]}"


def outbox_writer(sinks: Callable[[], Sequence[SinkSpec]], now: Callable[[], tuple[str, float]]) -> Reactor:
    """The reactor, for the sinks ``sinks()`` names when it runs."""

    def react(tx: Write, records: Sequence[RecordedEvent]) -> None:
        specs = sinks()
        if not specs or not any(r.type in NOTICE_TYPES for r in records):
            return
        announced = _announcements(tx, records)
        if not announced:
            return
        at, stamp = now()
        notices: list[dict[str, Any]] = []
        readbacks: list[dict[str, Any]] = []
        for first, kind, fields, keys in announced:
            seq = first.seq
            for spec in specs:
                if not spec.receives(kind):
                    continue
                ids = _by_tenant(k for k in keys if spec.covers(k[0]))
                if not ids and kind != "policy.version_changed":
                    continue
                nid = notice_id(first)
                body = {"notice_id": nid, "type": kind, "seq": seq, "recorded_at": at, **fields, "ids": ids}
                notices.append(
                    {
                        "sink": spec.name,
                        "notice_id": nid,
                        "seq": seq,
                        "type": kind,
                        "revocation_id": fields.get("revocation_id"),
                        "body": canonical_json(body),
                        "state": "pending",
                        "attempts": 0,
                        "next_at": 0.0,
                        "created_at": at,
                    }
                )
                if kind == "revocation.issued":
                    readbacks.append(
                        {
                            "revocation_id": fields["revocation_id"],
                            "sink": spec.name,
                            "notice_id": nid,
                            "status": "pending",
                            "covered": sum(len(v) for v in ids.values()),
                            "attempts": 0,
                            "deadline": stamp + spec.readback_deadline.total_seconds(),
                            "next_at": 0.0,
                        }
                    )
        tx.view.outbox().add(notices, readbacks)

    return react


def _announcements(
    tx: Write, records: Sequence[RecordedEvent]
) -> list[tuple[RecordedEvent, str, dict[str, Any], list[Key]]]:
    """(first event, type, fields, memories) of each notice ``records`` call for."""
    view = tx.view
    absorbed = _absorbed(tx.recorded)
    out: list[tuple[RecordedEvent, str, dict[str, Any], list[Key]]] = []
    batch: dict[str, tuple[RecordedEvent, list[Key]]] = {}
    for r in records:
        p = r.payload
        if r.type == "revocation.issued":
            out.append(
                (
                    r,
                    r.type,
                    {"revocation_id": p["revocation_id"], "reason": p["reason"], "effective_at": p["effective_at"]},
                    _covered(view, r),
                )
            )
        elif r.type == "policy.version_changed":
            retired = view.covered(CheckedUnder(p["policy"], str(p["previous_version"])))
            fields = {"policy": p["policy"], "version": p["version"], "previous_version": p["previous_version"]}
            out.append((r, r.type, fields, [c.key for c in retired]))
        elif r.type in ("memory.erased", "memory.invalidated") and r.seq not in absorbed:
            batch.setdefault(r.type, (r, []))[1].append((p["tenant"], p["memory_id"]))
    out.extend((first, kind, {}, keys) for kind, (first, keys) in batch.items())
    return sorted(out, key=lambda a: a[0].seq)


def _absorbed(recorded: Iterable[RecordedEvent]) -> set[int]:
    """Seqs of this transaction's invalidations that a revocation's notice
    already names: the cascade below a revocation, at every depth."""
    causes: set[int] = set()
    absorbed: set[int] = set()
    for r in recorded:
        if r.type == "revocation.issued":
            causes.add(r.seq)
        elif r.type == "memory.invalidated" and r.payload.get("caused_by") in causes:
            causes.add(r.seq)
            absorbed.add(r.seq)
    return absorbed


def _covered(view: ViewWriter, record: RecordedEvent) -> list[Key]:
    """What the revocation took out at this commit, and everything drawn from it."""
    p = record.payload
    query = RevokedBy(p["revocation_id"], record.seq, p["effective_at"], p["selector"])
    direct = [c.key for c in view.covered(query)]
    below = {k.key for k in view.lineage(LineageQuery("down", tuple(direct)))} - set(direct)
    return [*direct, *sorted(below)]


def _by_tenant(keys: Iterable[Key]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for tenant, memory_id in keys:
        out[tenant].append(memory_id)
    return {t: sorted(set(ids)) for t, ids in sorted(out.items())}
