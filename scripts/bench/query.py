"""Agent queries, revocation and `due` over a large usable view.

    .venv/bin/python scripts/bench/query.py [--quick] [--json PATH] [--backend postgres]

1M memories over 1,000 tenants x 10 projects (--quick: 100k; --smoke: 2,000 over 20). Measures:
query p50/p99 for one tenant+project (limit 100) through the Python API vs
the same SQL run raw; revoking a tenant of 1,000 memories (commit time, then
zero of them returned by the next query); `due` with 2% due vs a plain Python
scan of the same records as JSONL (json.loads, fromisoformat).
Targets: query p99 <= 1 ms (PostgreSQL: <= 2 ms) and <= 4x raw SQL;
revoke commit <= 100 ms; due >= 20x faster than the scan. The raw SQL runs
on a connection of its own (sqlite3, or psycopg for --backend postgres).
"""

from __future__ import annotations

import sys
from pathlib import Path

# scripts/bench/http.py would shadow the standard library's http package:
# look in this folder last, not first
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE] + [_HERE]

import json
import random
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

from _common import (
    Metric,
    RawConnection,
    arguments,
    fresh_store,
    median_of,
    percentile,
    repeats,
    report,
    scratch_dir,
    sized,
    timed,
)
from memwarden.engine import OPERATOR, Warden
from memwarden.events import FrozenClock, MemorySaved, Scope, content_checksum

NOW = "2026-01-05T09:00:00Z"


def fill(
    w: Warden, n: int, tenants: int = 1000, fetched: str = "2026-01-05T08:00:00Z", expires: str = "2026-01-06T08:00:00Z"
) -> None:
    """n memories, 2% of them already past expiry, written as batched appends
    (the projections are applied inline, as for any append)."""
    for start in range(0, n, 5000):
        batch = []
        texts = []
        for i in range(start, min(start + 5000, n)):
            text = f"memory {i} 서울 지사 기록 {i * 7919 % 1000}"
            expired = (i // 1000) % 50 == 0  # 2%, spread over every tenant
            texts.append(text)
            batch.append(
                MemorySaved(
                    memory_id=f"m{i}",
                    version=1,
                    kind="external_fact",
                    summary=f"요약 {i} summary",
                    content_checksum=content_checksum(text),
                    content_length=len(text.encode()),
                    source_url=f"https://src.example/{i}",
                    fetched_at="2026-01-04T09:00:00Z" if expired else "2026-01-05T08:00:00Z",
                    expires_at="2026-01-04T15:00:00Z" if expired else "2026-01-06T08:00:00Z",
                    scope=Scope(tenant=f"t{i % tenants}", project=f"p{(i // tenants) % 10}"),
                )
            )
        with w.transaction() as tx:
            for event, text in zip(batch, texts, strict=True):
                w.texts.put(event.tenant, event.memory_id, event.version, None, text)
            tx.append(batch)


RAW_QUERY = (
    "SELECT * FROM memories WHERE tenant = ? AND project = ? AND status = 'usable' "
    "AND (expires_at IS NULL OR expires_at > ?) ORDER BY last_seq DESC LIMIT 100"
)


def main() -> None:
    args = arguments(__doc__ or "")
    n = sized(args, full=1_000_000, quick=100_000, smoke=2_000)
    tenants = sized(args, full=1000, quick=1000, smoke=20)
    queries = sized(args, full=2000, quick=300, smoke=20)
    runs = repeats(args, 3)
    tmp = scratch_dir("memwarden-query-")
    clock = FrozenClock(NOW)
    location = fresh_store(args, "query")
    postgres = args.backend == "postgres"
    # SQLite at NORMAL for the fill's speed; PostgreSQL at its defaults
    w = Warden(location, clock=clock, **({} if postgres else {"synchronous": "NORMAL"}))
    query_target = 2.0 if postgres else 1.0
    print(f"filling {n:,} memories ...", file=sys.stderr)
    started = time.perf_counter()
    fill(w, n, tenants)
    print(f"filled in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    raw = RawConnection(location)
    if postgres:
        # as autovacuum would have by now on a store that grew this big: its
        # statistics, and the pages it marks all-visible (an index-only scan
        # of the covering index reads no table page for those)
        raw.execute("VACUUM ANALYZE")
    rng = random.Random(7)
    scopes = [(f"t{rng.randrange(tenants)}", f"p{rng.randrange(10)}") for _ in range(queries)]
    now = w.now()

    def api_latencies() -> list[float]:
        out = []
        for tenant, project in scopes:
            t = time.perf_counter()
            views = w.query(tenant=tenant, project=project, limit=100, caller=OPERATOR)
            out.append(time.perf_counter() - t)
            assert len(views) >= 1
        return out

    def raw_latencies() -> list[float]:
        out = []
        for tenant, project in scopes:
            t = time.perf_counter()
            rows = raw.execute(RAW_QUERY, (tenant, project, now)).fetchall()
            out.append(time.perf_counter() - t)
            assert rows
        return out

    api_runs = [api_latencies() for _ in range(runs)]
    raw_runs = [raw_latencies() for _ in range(runs)]
    api_p50 = statistics.median(percentile(r, 0.5) for r in api_runs) * 1000
    api_p99 = statistics.median(percentile(r, 0.99) for r in api_runs) * 1000
    raw_p50 = statistics.median(percentile(r, 0.5) for r in raw_runs) * 1000
    raw_p99 = statistics.median(percentile(r, 0.99) for r in raw_runs) * 1000

    # revoke a tenant (1,000 memories at 1M; 100 at 100k), then the next query returns none of them
    commit_ms = []
    for k in range(runs):
        tenant = f"t{tenants * 9 // 10 + k}"
        commit_ms.append(
            timed(lambda tenant=tenant: w.revoke({"tenant": tenant}, reason="bench", caller=OPERATOR)) * 1000
        )
        for p in range(10):
            assert w.query(tenant=tenant, project=f"p{p}", caller=OPERATOR) == []
    revoke_ms = statistics.median(commit_ms)

    # due: 2% past expiry, vs a plain scan of the same records exported as JSONL
    records = tmp / "records.jsonl"
    with open(records, "w", encoding="utf-8") as fh:
        for row in raw.execute("SELECT memory_id, source_url, expires_at, status FROM memories"):
            fh.write(
                json.dumps({"memory_id": row[0], "source_url": row[1], "expires_at": row[2], "status": row[3]}) + "\n"
            )
    cutoff = datetime.fromisoformat(now)

    def scan() -> int:
        due = 0
        with open(records, encoding="utf-8") as fh:
            for line in fh:
                rec = json.loads(line)
                if rec["expires_at"] and datetime.fromisoformat(rec["expires_at"]) <= cutoff:
                    due += 1
        return due

    due_count = len(w.due(caller=OPERATOR))
    assert due_count >= n // 60, due_count  # 2% past expiry, less those in revoked tenants
    ours_due = median_of(runs, lambda: timed(lambda: w.due(caller=OPERATOR)))
    scan_due = median_of(runs, lambda: timed(scan))
    w.close()

    metrics = [
        Metric("query p50 (tenant+project, limit 100)", api_p50, "ms", raw_p50, api_p50 / raw_p50, "(info)", True),
        Metric(
            "query p99 (tenant+project, limit 100)",
            api_p99,
            "ms",
            raw_p99,
            api_p99 / raw_p99,
            f"<= {query_target:g} ms and <= 4x raw",
            api_p99 <= query_target and api_p99 / raw_p99 <= 4,
        ),
        Metric(
            f"revoke a tenant ({n // tenants:,} memories): commit",
            revoke_ms,
            "ms",
            None,
            None,
            "<= 100 ms",
            revoke_ms <= 100,
        ),
        Metric(
            f"due over {n:,} ({due_count:,} due)",
            ours_due * 1000,
            "ms",
            scan_due * 1000,
            scan_due / ours_due,
            ">= 20x faster than the scan",
            scan_due / ours_due >= 20,
        ),
    ]
    report(f"memwarden query benchmark ({args.backend})", metrics, args.json_path)


if __name__ == "__main__":
    main()
