"""Rebuilding the projections from the log, against the floor and eventsourcing.

    .venv/bin/python scripts/bench/rebuild.py [--quick] [--json PATH] [--backend postgres]

Floor (same run, same rows): a raw sqlite3 scan of the events, json.loads of
each payload, and a raw executemany insert of the resulting projection rows.
Peer: reading the same number of events back through eventsourcing 9.x.
Peak RSS of a rebuild is measured in a fresh process at two log sizes.
Targets: >= 100k events/s, >= 1/3 of the floor; peak RSS < 200 MB at the
large size and <= 1.2x its value at the small one. With --backend postgres
the same logs are copied into PostgreSQL (seqs and hashes as they are), the
store's own rebuild is timed, and the floor is raw psycopg: the scan, the
decode and a COPY of the rows into a temporary table.
"""

from __future__ import annotations

import sys
from pathlib import Path

# scripts/bench/http.py would shadow the standard library's http package:
# look in this folder last, not first
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE] + [_HERE]

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import Metric, arguments, fresh_store, median_of, repeats, report, scratch_dir, sized, timed
from memwarden.events import ROW_COLUMNS, SQLiteEventLog, TextStore
from memwarden.projections import COLUMNS, Projector

CHILD = """
import json, sys, time
from memwarden.events import SQLiteEventLog
from memwarden.projections import Projector
log = SQLiteEventLog(sys.argv[1], synchronous="OFF")
started = time.perf_counter()
count = Projector().rebuild(log.conn, log.read())
seconds = time.perf_counter() - started
# VmHWM is this process image's own peak: ru_maxrss would also count the
# parent's pages inherited through fork before exec
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"events": count, "seconds": seconds, "rss_mb": hwm / 1024}))
"""


def fill(path: Path, n: int) -> None:
    """A log of n events: saves of many memories, with re-saves, expiries,
    verifications and a few revocations mixed in, plus their texts."""
    from append import events
    from memwarden.events import MemoryExpired, MemoryVerified, RevocationIssued, Selector

    log = SQLiteEventLog(path, synchronous="OFF")
    texts = TextStore(log.conn)
    template = events(5000, "t")
    written = 0
    k = 0
    while written < n:
        batch: list = []
        for i, e in enumerate(template):
            memory_id = f"m{(k * 5000 + i) % max(n * 4 // 5, 1)}"
            batch.append(e.model_copy(update={"memory_id": memory_id, "event_id": f"s{k}-{i}"}))
            if i % 10 == 0:
                batch.append(
                    MemoryExpired(
                        event_id=f"x{k}-{i}",
                        tenant=e.tenant,
                        memory_id=memory_id,
                        version=1,
                        expires_at="2026-01-05T15:00:00Z",
                    )
                )
            if i % 20 == 0:
                batch.append(
                    MemoryVerified(
                        event_id=f"v{k}-{i}",
                        tenant=e.tenant,
                        memory_id=memory_id,
                        version=1,
                        content_checksum=e.content_checksum,
                        fetched_at="2026-01-05T16:00:00Z",
                        verified_at="2026-01-05T16:00:00Z",
                        expires_at="2026-01-05T22:00:00Z",
                        revocation_version=1,
                    )
                )
        if k % 20 == 0:
            batch.append(
                RevocationIssued(
                    event_id=f"r{k}",
                    revocation_id=f"rev{k}",
                    selector=Selector(tenant=f"t{k % 1000}"),
                    reason="bench",
                    issued_by="bench",
                    effective_at="2026-01-05T12:00:00Z",
                )
            )
        batch = batch[: n - written]
        log.conn.execute("BEGIN")
        for e in batch:
            if e.type == "memory.saved":
                texts.put(e.tenant, e.memory_id, e.version, None, str(int(e.event_id.split("-")[1])))
        log.conn.execute("COMMIT")
        log.append(batch)
        written += len(batch)
        k += 1
    log.close()


def floor_rate(path: Path) -> float:
    """Scan + decode + insert of projection-shaped rows, in raw sqlite3."""
    src = sqlite3.connect(path)
    dst = sqlite3.connect(":memory:", isolation_level=None)
    cols = ", ".join(f'"{c}"' for c in COLUMNS)
    dst.execute(f"CREATE TABLE memories (mid INTEGER PRIMARY KEY, {cols})")
    insert = f"INSERT INTO memories ({cols}) VALUES ({', '.join('?' * len(COLUMNS))})"
    started = time.perf_counter()
    count = 0
    dst.execute("BEGIN")
    last = 0
    while True:
        rows = src.execute(
            f"SELECT {ROW_COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT 5000", (last,)
        ).fetchall()
        if not rows:
            break
        values = []
        for row in rows:
            p = json.loads(row[9])
            values.append(tuple(p.get(c) if not isinstance(p.get(c), (dict, list)) else None for c in COLUMNS))
        dst.executemany(insert, values)
        count += len(rows)
        last = rows[-1][0]
    dst.execute("COMMIT")
    return count / (time.perf_counter() - started)


def ours_rate(path: Path) -> float:
    log = SQLiteEventLog(path, synchronous="OFF")
    seconds = timed(lambda: Projector().rebuild(log.conn, log.read()))
    count = log.head().seq
    log.close()
    return count / seconds


def eventsourcing_rate(n: int, tmp: Path) -> float:
    from append import eventsourcing_app

    app, memory = eventsourcing_app(tmp / "es.db")
    ids = []
    for start in range(0, n, 1000):
        aggregates = [
            memory(payload={"i": i, "summary": "서울 지사 요약 summary text" * 8})
            for i in range(start, min(start + 1000, n))
        ]
        app.save(*aggregates)
        ids.extend(a.id for a in aggregates)
    recorder = app.recorder

    def read_all() -> None:
        count = 0
        last = 0
        while True:
            records = recorder.select_notifications(start=last + 1, limit=5000)
            if not records:
                break
            for record in records:
                app.mapper.to_domain_event(record)
            count += len(records)
            last = records[-1].id
        assert count == n, count

    return n / timed(read_all)


def child_rss(path: Path | str) -> dict:
    child = CHILD_POSTGRES if str(path).startswith("postgresql://") else CHILD
    done = subprocess.run([sys.executable, "-c", child, str(path)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


# the same rebuild on PostgreSQL: the store's own, in one transaction under
# the head lock (the view is open and caught up first, as a running store's is)
CHILD_POSTGRES = """
import json, sys, time
from memwarden.engine import Warden
w = Warden(sys.argv[1])
started = time.perf_counter()
count = w.store.rebuild()
seconds = time.perf_counter() - started
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"events": count, "seconds": seconds, "rss_mb": hwm / 1024}))
"""


def to_postgres(path: Path, url: str) -> None:
    """The SQLite log and texts ``fill`` wrote, copied as they are (every
    seq and hash) into a PostgreSQL store, and its view built once."""
    from memwarden.engine import Warden
    from memwarden.events import PostgresEventLog, PostgresTextStore

    source = SQLiteEventLog(path, synchronous="OFF")
    target = PostgresEventLog(url)
    with target.transaction() as tx:
        PostgresTextStore(tx.conn)  # its table
        with (
            tx.conn.cursor() as cur,
            cur.copy("COPY texts (tenant, memory_id, version, summary, content) FROM STDIN") as copy,
        ):
            for t in TextStore(source.conn).all():
                copy.write_row((t.tenant, t.memory_id, t.version, _utf8(t.summary), _utf8(t.content)))
    target.import_records(source.read())
    source.close()
    target.close()
    Warden(url).close()  # opening folds the imported log into the view


def _utf8(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8")


def floor_rate_postgres(url: str) -> float:
    """Scan + decode + COPY of projection-shaped rows, in raw psycopg."""
    import psycopg

    cols = ", ".join(f'"{c}"' for c in COLUMNS)
    with psycopg.connect(url) as src, psycopg.connect(url) as dst:
        typed = ", ".join(f'"{c}" text' for c in COLUMNS)
        dst.execute(f"CREATE TEMP TABLE floor_memories (mid bigserial PRIMARY KEY, {typed})")
        started = time.perf_counter()
        count = last = 0
        with dst.cursor() as cur, cur.copy(f"COPY floor_memories ({cols}) FROM STDIN") as copy:
            while True:
                rows = src.execute(
                    f"SELECT {ROW_COLUMNS} FROM events WHERE seq > %s ORDER BY seq LIMIT 5000", (last,)
                ).fetchall()
                if not rows:
                    break
                for row in rows:
                    p = json.loads(row[9])
                    copy.write_row(tuple(None if isinstance(p.get(c), (dict, list)) else p.get(c) for c in COLUMNS))
                count += len(rows)
                last = rows[-1][0]
        dst.commit()
        return count / (time.perf_counter() - started)


def ours_rate_postgres(url: str) -> float:
    from memwarden.engine import Warden

    w = Warden(url)
    seconds = timed(w.store.rebuild)
    count = w.log.head().seq
    w.close()
    return count / seconds


def main() -> None:
    args = arguments(__doc__ or "")
    small, large = sized(args, full=(100_000, 1_000_000), quick=(20_000, 100_000), smoke=(1_000, 3_000))
    es_n = sized(args, full=100_000, quick=20_000, smoke=1_000)
    runs = repeats(args, 3)
    tmp = scratch_dir("memwarden-rebuild-")
    small_db, large_db = tmp / "small.db", tmp / "large.db"
    print(f"filling logs of {small:,} and {large:,} events ...", file=sys.stderr)
    fill(small_db, small)
    fill(large_db, large)
    postgres = args.backend == "postgres"
    small_store: Path | str = small_db
    large_store: Path | str = large_db
    if postgres:
        small_store, large_store = fresh_store(args, "rebuild_small"), fresh_store(args, "rebuild_large")
        print("copying both into PostgreSQL ...", file=sys.stderr)
        to_postgres(small_db, str(small_store))
        to_postgres(large_db, str(large_store))
        ours = median_of(runs, lambda: ours_rate_postgres(str(large_store)))
        floor = median_of(runs, lambda: floor_rate_postgres(str(large_store)))
    else:
        ours = median_of(runs, lambda: ours_rate(large_db))
        floor = median_of(runs, lambda: floor_rate(large_db))
    es = median_of(runs, lambda: eventsourcing_rate(es_n, Path(tempfile.mkdtemp(dir=tmp))))
    rss_small = child_rss(small_store)["rss_mb"]
    rss_large = child_rss(large_store)["rss_mb"]
    os.environ.pop("_", None)
    metrics = [
        Metric(f"rebuild {large:,} events", ours, "events/s", None, None, ">= 100000", ours >= 100_000),
        Metric(
            "rebuild vs floor (scan+decode+insert)",
            ours,
            "events/s",
            floor,
            ours / floor,
            ">= 0.333",
            ours / floor >= 1 / 3,
        ),
        Metric("rebuild vs eventsourcing read-back (SQLite)", ours, "events/s", es, ours / es, "(info)", True),
        Metric(
            f"peak RSS at {large:,}",
            rss_large,
            "MB",
            rss_small,
            rss_large / rss_small,
            "< 200 MB, <= 1.2x",
            rss_large < 200 and rss_large / rss_small <= 1.2,
        ),
    ]
    report(f"memwarden rebuild benchmark ({args.backend})", metrics, args.json_path)


if __name__ == "__main__":
    main()
