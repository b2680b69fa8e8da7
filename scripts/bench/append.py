"""Append throughput of the event log against raw sqlite3 and eventsourcing.

    .venv/bin/python scripts/bench/append.py [--quick] [--json PATH] [--backend postgres]

Targets: batched appends >= 1/3 of raw executemany (the floor) and >= 3x
eventsourcing; single durable appends >= 60% of raw one-commit-per-row at
synchronous=FULL; audit verify >= 300k events/s over 1M events.
With --backend postgres (scripts/bench/postgres.py): batched >= 1/3 of raw
COPY and >= 2x eventsourcing's PostgreSQL recorder, single durable >= 50%
of raw one-row commits, the same verify target.
"""

from __future__ import annotations

import sys
from pathlib import Path

# scripts/bench/http.py would shadow the standard library's http package:
# look in this folder last, not first
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE] + [_HERE]

import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

from _common import Metric, arguments, median_of, repeats, report, scratch_dir, sized, timed
from memwarden.events import (
    MemorySaved,
    Scope,
    SQLiteEventLog,
    content_checksum,
)
from memwarden.events._canonical import canonical_json


def events(n: int, prefix: str) -> list[MemorySaved]:
    return [
        MemorySaved(
            memory_id=f"{prefix}-{i}",
            version=1,
            kind="external_fact",
            summary=f"서울 지사 요약 {i} summary text",
            content_checksum=content_checksum(str(i)),
            content_length=len(str(i)),
            source_url=f"https://example.org/docs/{i}",
            fetched_at="2026-01-05T09:00:00Z",
            expires_at="2026-01-05T15:00:00Z",
            scope=Scope(tenant=f"t{i % 1000}", project=f"p{i % 10}"),
        )
        for i in range(n)
    ]


def raw_rows(evs: list[MemorySaved]) -> list[tuple[object, ...]]:
    return [
        (
            i + 1,
            e.event_id,
            e.type,
            e.stream,
            1,
            "2026-01-05T09:00:00.000000Z",
            "2026-01-05T09:00:00.000000Z",
            e.actor,
            1,
            canonical_json(e.payload()),
            "0" * 64,
            "f" * 64,
        )
        for i, e in enumerate(evs)
    ]


RAW_SCHEMA = (
    "CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL UNIQUE, type TEXT NOT NULL, "
    "stream TEXT NOT NULL, stream_version INTEGER NOT NULL, occurred_at TEXT NOT NULL, recorded_at TEXT NOT NULL, "
    "actor TEXT NOT NULL, schema_version INTEGER NOT NULL, payload TEXT NOT NULL, prev_hash TEXT NOT NULL, "
    "hash TEXT NOT NULL, UNIQUE (stream, stream_version))"
)
RAW_INSERT = "INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"


def raw_conn(path: Path, sync: str = "FULL") -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={sync}")
    conn.execute(RAW_SCHEMA)
    return conn


from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event


class EsMemory(Aggregate):
    """The peer library's equivalent of a memory.saved event."""

    @event("Saved")
    def __init__(self, payload: dict) -> None:
        self.payload = payload


def eventsourcing_app(path: Path) -> tuple[Application, type[EsMemory]]:
    app = Application(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)})
    return app, EsMemory


def main() -> None:
    args = arguments(__doc__ or "")
    if args.backend == "postgres":
        from _common import Databases
        from postgres import append_metrics

        report("memwarden append benchmark (postgres)", append_metrics(args, Databases(args.server)), args.json_path)
        return
    n = sized(args, full=200_000, quick=20_000, smoke=2_000)
    singles = sized(args, full=2_000, quick=300, smoke=20)
    verify_n = sized(args, full=1_000_000, quick=100_000, smoke=2_000)
    runs = repeats(args, 3)
    tmp = scratch_dir("memwarden-bench-")
    counter = iter(range(10_000))

    def fresh(name: str) -> Path:
        return tmp / f"{name}-{next(counter)}.db"

    evs = events(n, "b")
    payloads = [e.payload() for e in evs]

    def ours_batched() -> float:
        log = SQLiteEventLog(fresh("ours"))
        batch = [e.model_copy(update={"event_id": f"{e.event_id}-{os.urandom(4).hex()}"}) for e in evs]
        t = timed(lambda: [log.append(batch[i : i + 1000]) for i in range(0, n, 1000)])
        log.close()
        return n / t

    def raw_batched() -> float:
        conn = raw_conn(fresh("raw"))
        rows = raw_rows(evs)

        def go() -> None:
            conn.execute("BEGIN")
            conn.executemany(RAW_INSERT, rows)
            conn.execute("COMMIT")

        t = timed(go)
        conn.close()
        return n / t

    def es_batched() -> float:
        app, memory = eventsourcing_app(fresh("es"))
        t = timed(lambda: [app.save(*[memory(payload=p) for p in payloads[i : i + 1000]]) for i in range(0, n, 1000)])
        return n / t

    def ours_single() -> float:
        log = SQLiteEventLog(fresh("ours1"), synchronous="FULL")
        single = events(singles, f"s{next(counter)}")
        t = timed(lambda: [log.append([e]) for e in single])
        log.close()
        return singles / t

    def raw_single() -> float:
        conn = raw_conn(fresh("raw1"), "FULL")
        rows = raw_rows(events(singles, "r"))

        def go() -> None:
            for row in rows:
                conn.execute("BEGIN")
                conn.execute(RAW_INSERT, row)
                conn.execute("COMMIT")

        t = timed(go)
        conn.close()
        return singles / t

    def es_single() -> float:
        app, memory = eventsourcing_app(fresh("es1"))
        t = timed(lambda: [app.save(memory(payload=p)) for p in payloads[:singles]])
        return singles / t

    print(
        f"batched: {n:,} events in batches of 1,000; singles: {singles:,}; verify: {verify_n:,}; median of {runs} runs",
        file=sys.stderr,
    )
    batched = median_of(runs, ours_batched)
    floor = median_of(runs, raw_batched)
    es = median_of(runs, es_batched)
    single = median_of(runs, ours_single)
    raw1 = median_of(runs, raw_single)
    es1 = median_of(runs, es_single)

    # audit verify over a big log (written fast, synchronous=OFF: it is the read that is measured)
    log = SQLiteEventLog(fresh("verify"), synchronous="OFF")
    verify_rate = verify_rate_over(log, verify_n, runs)

    metrics = [
        Metric(
            "batched append vs raw executemany",
            batched,
            "events/s",
            floor,
            batched / floor,
            ">= 0.333",
            batched / floor >= 1 / 3,
        ),
        Metric("batched append vs eventsourcing", batched, "events/s", es, batched / es, ">= 3.0", batched / es >= 3),
        Metric(
            "single durable append vs raw commit",
            single,
            "events/s",
            raw1,
            single / raw1,
            ">= 0.6",
            single / raw1 >= 0.6,
        ),
        Metric("single durable append vs eventsourcing", single, "events/s", es1, single / es1, "(info)", True),
        Metric(
            f"audit verify over {verify_n:,} events",
            verify_rate,
            "events/s",
            None,
            None,
            ">= 300000",
            verify_rate >= 300_000,
        ),
    ]
    report("memwarden append benchmark", metrics, args.json_path)


def verify_rate_over(log: Any, n: int, runs: int) -> float:
    """Events/s of ``log.verify_chain()`` over ``n`` events appended first in
    batches of 10,000 (either backend's log); the log is closed after."""
    step = min(10_000, n)
    chunk = events(step, "v")
    for start in range(0, n, step):
        log.append(
            [
                e.model_copy(update={"memory_id": f"v{start + k}", "event_id": f"v{start + k}"})
                for k, e in enumerate(chunk)
            ]
        )
    rate = median_of(runs, lambda: n / timed(lambda: _check(log.verify_chain())))
    log.close()
    return rate


def _check(report_: object) -> None:
    assert getattr(report_, "ok", False), report_


if __name__ == "__main__":
    main()
