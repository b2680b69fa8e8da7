"""Counters per ISO week, for operators and auditors."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from memwarden.events import RecordedEvent, iso_week

from ._reads import WeekRow
from ._rows import Connection

SCHEMA = """CREATE TABLE IF NOT EXISTS stats (
    week TEXT NOT NULL, counter TEXT NOT NULL, count INTEGER NOT NULL,
    PRIMARY KEY (week, counter)
) WITHOUT ROWID"""

COUNTERS = (
    "saved",
    "verified",
    "reverified_after_expiry",
    "verification_failed",
    "expired",
    "invalidated",
    "revocations",
    "blocked_by_revocation",
    "integrity_failures",
    "resynced",
    "erased",
    "policy_changes",
    "readback_confirmed",
    "readback_failed",
)

_SIMPLE = {
    "memory.saved": "saved",
    "memory.verification_failed": "verification_failed",
    "memory.expired": "expired",
    "memory.invalidated": "invalidated",
    "memory.integrity_failed": "integrity_failures",
    "memory.resynced": "resynced",
    "memory.erased": "erased",
    "policy.version_changed": "policy_changes",
    "readback.confirmed": "readback_confirmed",
    "readback.failed": "readback_failed",
}


class StatsProjection:
    """Projection ``stats``. Runs after ``usable``: a revocation's count of
    memories taken out is read from the revocations table it wrote."""

    name = "stats"
    tables = ("stats",)

    def create(self, conn: Connection, *, indexes: bool = True) -> None:
        conn.execute(SCHEMA)

    def create_indexes(self, conn: Connection) -> None:
        pass

    def drop(self, conn: Connection) -> None:
        conn.execute("DROP TABLE IF EXISTS stats")

    def apply(self, conn: Connection, events: Sequence[RecordedEvent], *, bulk: bool = False) -> None:
        counts: Counter[tuple[str, str]] = Counter()
        week_of: dict[str, str] = {}
        for event in events:
            day = event.recorded_at[:10]
            week = week_of.get(day) or week_of.setdefault(day, iso_week(event.recorded_at))
            name = _SIMPLE.get(event.type)
            if name is not None:
                counts[(week, name)] += 1
            elif event.type == "memory.verified":
                counts[(week, "verified")] += 1
                if event.payload.get("after_expiry"):
                    counts[(week, "reverified_after_expiry")] += 1
            elif event.type == "revocation.issued":
                counts[(week, "revocations")] += 1
                row = conn.execute(
                    "SELECT covered FROM revocations WHERE revocation_id = ?", (event.payload["revocation_id"],)
                ).fetchone()
                if row and row[0]:
                    counts[(week, "blocked_by_revocation")] += row[0]
        conn.executemany(
            "INSERT INTO stats (week, counter, count) VALUES (?,?,?) "
            "ON CONFLICT(week, counter) DO UPDATE SET count = stats.count + excluded.count",
            [(w, c, n) for (w, c), n in sorted(counts.items())],
        )

    def finish_bulk(self, conn: Connection) -> None:
        pass

    def digest_rows(self, conn: Connection) -> dict[str, list[tuple[Any, ...]]]:
        return {"stats": conn.execute("SELECT week, counter, count FROM stats ORDER BY week, counter").fetchall()}


def weekly(conn: Connection) -> list[WeekRow]:
    weeks: dict[str, dict[str, int]] = {}
    for week, counter, count in conn.execute("SELECT week, counter, count FROM stats ORDER BY week, counter"):
        weeks.setdefault(week, dict.fromkeys(COUNTERS, 0))[counter] = count
    return [WeekRow(w, c) for w, c in weeks.items()]
