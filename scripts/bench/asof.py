"""Time travel: explain and replay as of a past moment, from the indexes.

    .venv/bin/python scripts/bench/asof.py [--quick] [--json PATH] [--backend postgres]

The log is the rebuild benchmark's mix (saves, re-saves, expiries,
verifications, revocations of whole tenants) with derived memories among
them, 1,000,000 events (50,000 with --quick, 3,000 with --smoke), its view built once. Each
question runs in a fresh process, so its peak RSS (VmHWM) is its own (--smoke: all in one):

* explain as of a random past moment, of a random memory (p50, p99);
  baseline: the same explain without as-of, on the live view;
* replay of one tenant as of a random seq, the first page of 100 (p99);
  baseline: a rebuild of the whole view, what the old replay cost at least;
* the whole view as of seq 0.1, 0.5 and 0.9 x head, each streamed to the
  end; baseline: a rebuild of the view from the same log, in the same run.

With --backend postgres the same log is copied into PostgreSQL (every seq
and hash) and the same questions are asked of it.
ASOF_DB=PATH keeps the filled log there (and reuses it on the next run).
Peak memory is the process's private (anonymous) pages, sampled; VmHWM is
shown beside it, as it also counts the database file's pages read through
SQLite's memory map, which the OS shares and reclaims.

Targets: explain as-of p99 <= 50 ms; first page of a tenant's replay
<= 1 s; peak RSS of either <= 200 MB; the whole-view replay no slower than
a rebuild (ratio <= 1).
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
import subprocess
import time

from _common import Metric, arguments, fresh_store, report, scratch_dir, sized
from memwarden.events import SQLiteEventLog

PRELUDE = """
import json, random, statistics, sys, time
from memwarden.engine import OPERATOR, Warden, configure_logging
configure_logging(level="ERROR")
w = Warden(sys.argv[1])
random.seed(int(sys.argv[2]))
count = int(sys.argv[3])
head = w.log.head().seq

def status(field):
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(field + ":")) / 1024

# The peak of the process's private memory (anonymous pages), sampled: VmHWM
# also counts the database file's pages that SQLite reads through its memory
# map, which the OS shares and reclaims, so it grows with the file touched
peak = [0.0]
def sample():
    while True:
        peak[0] = max(peak[0], status("RssAnon"))
        time.sleep(0.005)
import threading
threading.Thread(target=sample, daemon=True).start()

def hwm():
    time.sleep(0.02)
    return {"rss_mb": status("VmHWM"), "private_mb": peak[0]}

def p(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]

def keys(n):
    # random memories of the log, each with a seq at or after its first save
    out = []
    while len(out) < n:
        e = w.log.get(random.randint(1, head))
        if e is not None and e.type == "memory.saved":
            out.append((e.payload["tenant"], e.payload["memory_id"], random.randint(e.seq, head)))
    return out
"""

EXPLAIN = """
chosen = keys(count)
w.explain(chosen[0][1], tenant=chosen[0][0], caller=OPERATOR)  # warm the connection, as a server's is
live, past = [], []
for tenant, memory_id, seq in chosen:
    started = time.perf_counter()
    w.explain(memory_id, tenant=tenant, caller=OPERATOR)
    live.append(time.perf_counter() - started)
    when = w.log.get(seq).recorded_at
    started = time.perf_counter()
    answer = w.explain(memory_id, tenant=tenant, as_of=when, caller=OPERATOR)
    past.append(time.perf_counter() - started)
    assert answer["seq"] >= seq
print(json.dumps({"p50": p(past, 0.5), "p99": p(past, 0.99), "live_p99": p(live, 0.99), **hwm()}))
"""

REPLAY_PAGE = """
chosen = keys(count)
took = []
for tenant, _memory_id, seq in chosen:
    started = time.perf_counter()
    page = w.replay(seq=seq, tenant=tenant, limit=100, caller=OPERATOR)
    took.append(time.perf_counter() - started)
    assert page["memories"] or page["next"] is None
print(json.dumps({"p50": p(took, 0.5), "p99": p(took, 0.99), **hwm()}))
"""

WHOLE = """
from memwarden.engine._past import replay_memories
point = int(head * count / 100)
when = w.log.get(point).recorded_at
started = time.perf_counter()
n = sum(1 for _ in replay_memories(w, point, when, include_unusable=True))
print(json.dumps({"memories": n, "seconds": time.perf_counter() - started, **hwm()}))
"""

REBUILD = """
started = time.perf_counter()
events = w.store.rebuild()
print(json.dumps({"events": events, "seconds": time.perf_counter() - started, **hwm()}))
"""


def fill(path: Path, n: int) -> None:
    """The rebuild benchmark's log, with one derived memory for every 500
    events (each drawn from a memory saved before it, in its tenant), and
    its view built once."""
    from memwarden.engine import Warden
    from memwarden.events import MemorySaved, Scope, content_checksum
    from rebuild import fill as rebuild_fill

    rebuild_fill(path, n - n // 500)
    log = SQLiteEventLog(path, synchronous="OFF")
    parents = [e for e in log.read(until_seq=n // 2, types=["memory.saved"])][:: max(1, n // 2 // (n // 500 + 1))]
    derived = [
        MemorySaved(
            event_id=f"d-{i}",
            memory_id=f"d{i}",
            version=1,
            kind="external_fact",
            summary=f"요약 {i} summary",
            content_checksum=content_checksum(f"d{i}"),
            content_length=len(f"d{i}"),
            source_url="agent://summariser",
            fetched_at="2026-01-05T09:30:00Z",
            expires_at="2026-01-05T15:00:00Z",
            scope=Scope(tenant=parent.payload["tenant"], project="p0"),
            derived_from=[{"memory_id": parent.payload["memory_id"], "version": parent.payload["version"]}],
        )
        for i, parent in enumerate(parents[: n // 500])
    ]
    log.append(derived)
    log.close()
    Warden(path).close()  # opening builds the view from the log


def child(script: str, path: Path | str, count: int) -> dict:
    """The answer to one question, asked in a process of its own."""
    return children([(script, count)], path)[0]


def children(questions: list[tuple[str, int]], path: Path | str) -> list[dict]:
    """The answers to ``questions`` (each a script and its count), asked in
    one process: each its own seed, its peak memory that of all before it
    (--smoke asks them this way, where a process each is most of the time)."""
    script = PRELUDE + "".join(f"\nrandom.seed(7)\ncount = {count}\n{body}" for body, count in questions)
    done = subprocess.run([sys.executable, "-c", script, str(path), "7", "0"], capture_output=True, text=True)
    if done.returncode != 0:  # the question's own traceback, not only its exit status
        sys.exit(f"a question's process failed:\n{done.stderr}")
    return [json.loads(line) for line in done.stdout.splitlines()]


def size_mb(store: str) -> float:
    if store.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(store) as conn:
            return conn.execute("SELECT pg_database_size(current_database())").fetchone()[0] / 1e6
    return Path(store).stat().st_size / 1e6


def main() -> None:
    args = arguments(__doc__ or "")
    n = sized(args, full=1_000_000, quick=50_000, smoke=3_000)
    asked = sized(args, full=200, quick=40, smoke=5)
    kept = os.environ.get("ASOF_DB")
    path = Path(kept) if kept else scratch_dir("memwarden-asof-") / "asof.db"
    if not path.exists():
        started = time.perf_counter()
        fill(path, n)
        print(f"filled {n:,} events in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    store: str = str(path)
    if args.backend == "postgres":
        from rebuild import to_postgres

        store = fresh_store(args, "asof")
        to_postgres(path, store)  # the same log, every seq and hash, its view built once
    shares = (10, 50, 90)
    if args.smoke:  # every question once, in one process: its figures judge nothing
        explain, page, *whole, rebuild = children(
            [(EXPLAIN, asked), (REPLAY_PAGE, asked), *((WHOLE, share) for share in shares), (REBUILD, 0)], store
        )
        wholes = dict(zip(shares, whole, strict=True))
    else:
        explain = child(EXPLAIN, store, asked)
        page = child(REPLAY_PAGE, store, asked)
        wholes = {share: child(WHOLE, store, share) for share in shares}
        rebuild = child(REBUILD, store, 0)
    slowest = max(r["seconds"] for r in wholes.values())

    def memory(label: str, r: dict, baseline: float | None = None) -> list[Metric]:
        return [
            Metric(
                f"{label}: peak private memory",
                r["private_mb"],
                "MB",
                baseline,
                r["private_mb"] / baseline if baseline else None,
                "<= 200 MB",
                r["private_mb"] <= 200,
            ),
            Metric(f"{label}: VmHWM (with mapped file pages)", r["rss_mb"], "MB", None, None, "(info)", True),
        ]

    metrics = [
        Metric(
            "explain as-of p99",
            explain["p99"] * 1000,
            "ms",
            explain["live_p99"] * 1000,
            explain["p99"] / explain["live_p99"],
            "<= 50 ms",
            explain["p99"] <= 0.050,
        ),
        Metric("explain as-of p50", explain["p50"] * 1000, "ms", None, None, "(info)", True),
        *memory("explain as-of", explain),
        Metric(
            "tenant replay, first page of 100 p99",
            page["p99"] * 1000,
            "ms",
            rebuild["seconds"] * 1000,
            page["p99"] / rebuild["seconds"],
            "<= 1000 ms",
            page["p99"] <= 1.0,
        ),
        *memory("tenant replay", page),
        *(
            Metric(
                f"whole-view replay at {share / 100:.1f} x head ({r['memories']:,} memories)",
                r["seconds"],
                "s",
                rebuild["seconds"],
                r["seconds"] / rebuild["seconds"],
                "<= rebuild",
                r["seconds"] <= rebuild["seconds"],
            )
            for share, r in wholes.items()
        ),
        *memory("whole-view replay", max(wholes.values(), key=lambda r: r["private_mb"]), rebuild["private_mb"]),
        Metric("rebuild (the baseline)", rebuild["seconds"], "s", None, None, "(info)", True),
        Metric("database size", size_mb(store), "MB", None, None, "(info)", True),
    ]
    print(f"whole view: slowest {slowest:.1f} s; rebuild: {rebuild['events']:,} events", file=sys.stderr)
    report(f"time travel, {n:,} events", metrics, args.json_path)


if __name__ == "__main__":
    main()
