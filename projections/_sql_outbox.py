"""The sinks' outbox and their read-back states: tables beside the log, not
in its hash chain.

A notice row is written by the transaction that appends the event it
announces (a revocation, an erasure, an invalidation, a policy change), so
it exists exactly when that event does. It is a side table rather than a
notice derived later from the log position: the ids a revocation covers are
the fold's answer at that commit (a later view answers for a later state),
and each sink's delivery state (attempts, lease, dead letter) needs a row
of its own anyway. Like the retry schedule of the sources, a delivery state
is not history: it never enters the chain, so redelivering or pruning it
leaves the log verifying. Written once in SQL both backends speak.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ._rows import Connection


def outbox_schema(text: str = "TEXT", real: str = "REAL", big: str = "INTEGER") -> list[str]:
    """The tables, in each backend's types (PostgreSQL: C-collated keys)."""
    return [
        f"""CREATE TABLE IF NOT EXISTS sink_outbox (
            sink {text} NOT NULL, notice_id {text} NOT NULL, seq {big} NOT NULL, type TEXT NOT NULL,
            revocation_id TEXT, body TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL,
            next_at {real} NOT NULL, lease_owner TEXT, lease_until {real}, created_at TEXT NOT NULL,
            delivered_at TEXT, last_error TEXT, PRIMARY KEY (sink, notice_id))""",
        "CREATE INDEX IF NOT EXISTS sink_outbox_due ON sink_outbox (sink, state, seq)",
        "CREATE INDEX IF NOT EXISTS sink_outbox_revocation ON sink_outbox (revocation_id)",
        f"""CREATE TABLE IF NOT EXISTS sink_readbacks (
            revocation_id {text} NOT NULL, sink {text} NOT NULL, notice_id TEXT NOT NULL, status TEXT NOT NULL,
            covered INTEGER NOT NULL, latency_ms {real}, leaked_ids TEXT, attempts INTEGER NOT NULL,
            deadline {real} NOT NULL, next_at {real} NOT NULL, checked_at TEXT, detail TEXT,
            final_seq {big}, PRIMARY KEY (revocation_id, sink))""",
        "CREATE INDEX IF NOT EXISTS sink_readbacks_open ON sink_readbacks (status, next_at)",
        # a sink's signed acknowledgements (ack = true), each accepted once by its webhook-id
        f"""CREATE TABLE IF NOT EXISTS sink_acks (
            sink {text} NOT NULL, ack_id {text} NOT NULL, notice_id {text} NOT NULL, removed TEXT NOT NULL,
            received_at TEXT NOT NULL, PRIMARY KEY (sink, ack_id))""",
        "CREATE INDEX IF NOT EXISTS sink_acks_notice ON sink_acks (sink, notice_id, received_at)",
    ]


def upgrade_outbox(conn: Connection, big: str = "INTEGER") -> None:
    """Add what this version keeps to tables an earlier one created (run
    under the install's lock, after ``outbox_schema``): ``final_seq``."""
    columns = {d[0] for d in conn.execute("SELECT * FROM sink_readbacks LIMIT 0").description}
    if "final_seq" not in columns:
        conn.execute(f"ALTER TABLE sink_readbacks ADD COLUMN final_seq {big}")


NOTICE_COLUMNS = (
    "sink",
    "notice_id",
    "seq",
    "type",
    "revocation_id",
    "body",
    "state",
    "attempts",
    "next_at",
    "lease_owner",
    "lease_until",
    "created_at",
    "delivered_at",
    "last_error",
)
READBACK_COLUMNS = (
    "revocation_id",
    "sink",
    "notice_id",
    "status",
    "covered",
    "latency_ms",
    "leaked_ids",
    "attempts",
    "deadline",
    "next_at",
    "checked_at",
    "detail",
    "final_seq",  # the log position of the sink's final outcome (sink.readback_recorded), once recorded
)
_NOTICES = ", ".join(NOTICE_COLUMNS)
_READBACKS = ", ".join(READBACK_COLUMNS)


class Outbox:
    """The outbox as one connection (in one transaction) sees it. ``lock``
    is how a backend takes a row no other node is taking: PostgreSQL's
    ``FOR UPDATE SKIP LOCKED``; SQLite has one writer and needs nothing."""

    def __init__(self, conn: Connection, lock: str = "") -> None:
        self.conn = conn
        self.lock = lock

    # -- written in the event's own transaction ------------------------------------------

    def add(self, notices: Sequence[dict[str, Any]], readbacks: Sequence[dict[str, Any]]) -> None:
        if notices:
            self.conn.executemany(
                f"INSERT INTO sink_outbox ({_NOTICES}) VALUES ({','.join('?' * len(NOTICE_COLUMNS))})",
                [tuple(n.get(c) for c in NOTICE_COLUMNS) for n in notices],
            )
        if readbacks:
            self.conn.executemany(
                f"INSERT INTO sink_readbacks ({_READBACKS}) VALUES ({','.join('?' * len(READBACK_COLUMNS))})",
                [tuple(r.get(c) for c in READBACK_COLUMNS) for r in readbacks],
            )

    # -- delivery: the head of each sink's line, taken under a lease -----------------------

    def take_head(self, sink: str, owner: str, now: float, lease: float) -> dict[str, Any] | None:
        """The oldest undelivered notice of ``sink``, leased to ``owner`` until
        ``now + lease``; None when there is none, when it is not due yet, or
        when another node holds it (its row locked now, or its lease
        running). Only the head: a later notice never overtakes it, so a
        sink receives its notices in log order."""
        head = self.conn.execute(
            "SELECT notice_id FROM sink_outbox WHERE sink = ? AND state = 'pending' ORDER BY seq LIMIT 1", (sink,)
        ).fetchone()
        if head is None:
            return None
        row = self.conn.execute(
            f"SELECT {_NOTICES} FROM sink_outbox WHERE sink = ? AND notice_id = ? AND state = 'pending'{self.lock}",
            (sink, head[0]),
        ).fetchone()
        if row is None:  # another node is taking it this moment
            return None
        notice = dict(zip(NOTICE_COLUMNS, row, strict=True))
        if notice["next_at"] > now or (notice["lease_until"] is not None and notice["lease_until"] > now):
            return None
        self.conn.execute(
            "UPDATE sink_outbox SET lease_owner = ?, lease_until = ? WHERE sink = ? AND notice_id = ?",
            (owner, now + lease, sink, head[0]),
        )
        notice["lease_owner"], notice["lease_until"] = owner, now + lease
        return notice

    def delivered(self, sink: str, notice_id: str, at: str) -> None:
        self.conn.execute(
            "UPDATE sink_outbox SET state = 'delivered', attempts = attempts + 1, delivered_at = ?, "
            "lease_owner = NULL, lease_until = NULL, last_error = NULL WHERE sink = ? AND notice_id = ?",
            (at, sink, notice_id),
        )

    def failed(self, sink: str, notice_id: str, owner: str, error: str, next_at: float, max_attempts: int) -> str:
        """A failed attempt; past ``max_attempts`` the notice is a dead letter
        (the next in line goes on). The state it is left in. Only the lease's
        holder records it: a node whose lease ran out leaves the notice to
        the one that took it over."""
        row = self.conn.execute(
            "SELECT attempts FROM sink_outbox WHERE sink = ? AND notice_id = ?", (sink, notice_id)
        ).fetchone()
        attempts = (int(row[0]) if row else 0) + 1
        state = "dead" if attempts >= max_attempts else "pending"
        self.conn.execute(
            "UPDATE sink_outbox SET state = ?, attempts = ?, next_at = ?, last_error = ?, "
            "lease_owner = NULL, lease_until = NULL WHERE sink = ? AND notice_id = ? AND lease_owner = ?",
            (state, attempts, next_at, error[:500], sink, notice_id, owner),
        )
        return state

    def redeliver(self, notice_id: str, sink: str | None = None) -> int:
        """Put a delivered or dead notice back in line, from its first attempt."""
        where, params = "notice_id = ?", [notice_id]
        if sink is not None:
            where, params = where + " AND sink = ?", [*params, sink]
        cursor = self.conn.execute(
            "UPDATE sink_outbox SET state = 'pending', attempts = 0, next_at = 0, lease_owner = NULL, "
            f"lease_until = NULL, delivered_at = NULL WHERE {where}",
            params,
        )
        # its read-backs look again once it is delivered again
        self.conn.execute(
            f"UPDATE sink_readbacks SET next_at = 0 WHERE status <> 'confirmed' AND {where}",
            params,
        )
        return int(cursor.rowcount)

    # -- reading ---------------------------------------------------------------------------

    def notice(self, sink: str, notice_id: str) -> dict[str, Any] | None:
        row = self.conn.execute(
            f"SELECT {_NOTICES} FROM sink_outbox WHERE sink = ? AND notice_id = ?", (sink, notice_id)
        ).fetchone()
        return dict(zip(NOTICE_COLUMNS, row, strict=True)) if row else None

    def notices(self, sink: str | None = None, state: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """Notices newest first (without their bodies)."""
        terms, params = ["TRUE"], []
        if sink is not None:
            terms.append("sink = ?")
            params.append(sink)
        if state is not None:
            terms.append("state = ?")
            params.append(state)
        rows = self.conn.execute(
            f"SELECT {_NOTICES} FROM sink_outbox WHERE {' AND '.join(terms)} ORDER BY seq DESC, sink LIMIT ?",
            [*params, limit],
        ).fetchall()
        out = [dict(zip(NOTICE_COLUMNS, r, strict=True)) for r in rows]
        for n in out:
            del n["body"]
        return out

    def counts(self) -> dict[str, dict[str, int]]:
        """Per sink, how many notices are in each state."""
        out: dict[str, dict[str, int]] = {}
        for sink, state, n in self.conn.execute(
            "SELECT sink, state, count(*) FROM sink_outbox GROUP BY sink, state"
        ).fetchall():
            out.setdefault(sink, {})[state] = int(n)
        return out

    def last_error(self, sink: str) -> str | None:
        row = self.conn.execute(
            "SELECT last_error FROM sink_outbox WHERE sink = ? AND last_error IS NOT NULL ORDER BY seq DESC LIMIT 1",
            (sink,),
        ).fetchone()
        return row[0] if row else None

    def readbacks(self, revocation_id: str) -> list[dict[str, Any]]:
        """Each sink's read-back of a revocation, by sink name."""
        rows = self.conn.execute(
            f"SELECT {_READBACKS} FROM sink_readbacks WHERE revocation_id = ? ORDER BY sink", (revocation_id,)
        ).fetchall()
        return [_readback(r) for r in rows]

    def open_readbacks(self, now: float, sinks: Sequence[str]) -> list[dict[str, Any]]:
        """Read-backs of ``sinks`` not confirmed, due now and before their deadline."""
        if not sinks:
            return []
        rows = self.conn.execute(
            f"SELECT {_READBACKS} FROM sink_readbacks WHERE status <> 'confirmed' AND next_at <= ? "
            f"AND deadline > ? AND sink IN ({','.join('?' * len(sinks))}) ORDER BY revocation_id, sink",
            [now, now, *sinks],
        ).fetchall()
        return [_readback(r) for r in rows]

    def unsettled_past_deadline(self, now: float, sinks: Sequence[str], limit: int = 500) -> list[dict[str, Any]]:
        """Read-backs of ``sinks`` whose deadline passed with no final outcome
        recorded: the state each was left in is recorded as final."""
        if not sinks:
            return []
        rows = self.conn.execute(
            f"SELECT {_READBACKS} FROM sink_readbacks WHERE final_seq IS NULL AND deadline <= ? "
            f"AND sink IN ({','.join('?' * len(sinks))}) ORDER BY revocation_id, sink LIMIT ?",
            [now, *sinks, limit],
        ).fetchall()
        return [_readback(r) for r in rows]

    def final_seq(self, revocation_id: str, sink: str) -> int | None:
        """The log position of the sink's final outcome for the revocation, once recorded."""
        row = self.conn.execute(
            "SELECT final_seq FROM sink_readbacks WHERE revocation_id = ? AND sink = ?", (revocation_id, sink)
        ).fetchone()
        return int(row[0]) if row and row[0] is not None else None

    def set_final(self, revocation_id: str, sink: str, seq: int) -> None:
        self.conn.execute(
            "UPDATE sink_readbacks SET final_seq = ? WHERE revocation_id = ? AND sink = ?", (seq, revocation_id, sink)
        )

    def add_ack(self, sink: str, ack_id: str, notice_id: str, removed: dict[str, list[str]], at: str) -> bool:
        """Keep a verified acknowledgement; False when its id was received
        before (a replay). Its notice's read-backs look again at once."""
        cursor = self.conn.execute(
            "INSERT INTO sink_acks (sink, ack_id, notice_id, removed, received_at) VALUES (?,?,?,?,?) "
            "ON CONFLICT (sink, ack_id) DO NOTHING",
            (sink, ack_id, notice_id, json.dumps(removed, sort_keys=True), at),
        )
        if not cursor.rowcount:
            return False
        self.conn.execute(
            "UPDATE sink_readbacks SET next_at = 0 WHERE sink = ? AND notice_id = ? AND status <> 'confirmed'",
            (sink, notice_id),
        )
        return True

    def removed(self, sink: str, notice_id: str) -> dict[str, set[str]] | None:
        """Every id the sink's acknowledgements of a notice say it removed
        (None: it has acknowledged none)."""
        rows = self.conn.execute(
            "SELECT removed FROM sink_acks WHERE sink = ? AND notice_id = ?", (sink, notice_id)
        ).fetchall()
        if not rows:
            return None
        out: dict[str, set[str]] = {}
        for (removed,) in rows:
            for tenant, ids in json.loads(removed).items():
                out.setdefault(tenant, set()).update(ids)
        return out

    def leaks_found(self) -> int:
        """Read-backs that found a sink still holding covered ids (and still do)."""
        return int(self.conn.execute("SELECT count(*) FROM sink_readbacks WHERE status = 'leaked'").fetchone()[0])

    def set_readback(
        self,
        revocation_id: str,
        sink: str,
        *,
        status: str,
        latency_ms: float | None,
        leaked: Sequence[str],
        detail: str | None,
        next_at: float,
        checked_at: str,
    ) -> None:
        # a read-back whose final outcome is recorded is settled: a writer
        # that read it before that (another node, a caller waiting) leaves it
        self.conn.execute(
            "UPDATE sink_readbacks SET status = ?, latency_ms = ?, leaked_ids = ?, attempts = attempts + 1, "
            "next_at = ?, checked_at = ?, detail = ? WHERE revocation_id = ? AND sink = ? AND final_seq IS NULL",
            (
                status,
                latency_ms,
                json.dumps(sorted(leaked)) if leaked else None,
                next_at,
                checked_at,
                detail[:500] if detail else None,
                revocation_id,
                sink,
            ),
        )


def _readback(row: Sequence[Any]) -> dict[str, Any]:
    out = dict(zip(READBACK_COLUMNS, row, strict=True))
    out["leaked_ids"] = json.loads(out["leaked_ids"]) if out["leaked_ids"] else []
    return out
