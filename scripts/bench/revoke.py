"""Revoking a scope: time to commit and time to a recorded read-back.

    .venv/bin/python scripts/bench/revoke.py [--quick] [--json PATH] [--backend postgres]

A scope of 10,000 memories among 1M (--quick: 1,000 among 100k; --smoke: 100 among 2,000), revoked
several times (a different scope each run; medians reported). Commit is the
revoke() call; confirmed is commit plus the read-back through every agent
read path until `readback.confirmed` is written. Baseline: the raw SQL
UPDATE of the same rows' status in one transaction, in the same run.
Then the derived case: an evidence memory with 10,000 descendants (1,000
with --quick) among the same memories, revoked; every descendant gets its
own `memory.invalidated` in the same commit. Same targets. Its baseline is
the floor under that commit: the same event rows and projection changes
written by raw sqlite3 in one commit, everything computed beforehand
(SQLite only). Beside it (info), chaining alone: the cascade's events'
payloads encoded, their preimages built and hashed in a plain loop, with
no model, validation, walk, lookup or write: what no cascade of that many
events can go below in Python. Targets: commit <= 250 ms (PostgreSQL:
500 ms), confirmed <= 1 s; the cascade's commit within 2.5x its floor
(issue #39 retired the absolute 250 ms there: the floor alone took 150 ms
and moved with the machine; PostgreSQL, with no floor, keeps 500 ms).
"""

from __future__ import annotations

import sys
from pathlib import Path

# scripts/bench/http.py would shadow the standard library's http package:
# look in this folder last, not first
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE] + [_HERE]

import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _common import Metric, RawConnection, arguments, fresh_store, repeats, report, sized
from memwarden.engine import OPERATOR, Scheduler, Warden
from memwarden.events import (
    GENESIS_HASH,
    ROW_COLUMNS,
    MemorySaved,
    ParentRef,
    Scope,
    canonical_json,
    content_checksum,
    memory_stream,
)
from memwarden.events._canonical import chain_hash, preimage_bytes
from query import fill


def main() -> None:
    args = arguments(__doc__ or "")
    n, scope = sized(args, full=(1_000_000, 10_000), quick=(100_000, 1_000), smoke=(2_000, 100))
    runs = repeats(args, 5)
    tenants = n // scope
    postgres = args.backend == "postgres"
    location = fresh_store(args, "revoke")
    # durable commits on both: synchronous=FULL, or PostgreSQL's default
    w = Warden(location, **({} if postgres else {"synchronous": "FULL"}))
    raw = RawConnection(location)
    commit_target = 500 if postgres else 250  # #19 asks 500 ms of PostgreSQL
    now = datetime.now(UTC)
    print(f"filling {n:,} memories in {tenants} tenants of {scope:,} ...", file=sys.stderr)
    fill(
        w,
        n,
        tenants=tenants,
        fetched=(now - timedelta(hours=1)).isoformat(),
        expires=(now + timedelta(days=1)).isoformat(),
    )
    jobs = Scheduler(w)

    commits, confirms, raws, covered = [], [], [], []
    for k in range(runs):
        tenant = f"t{k + 1}"
        started = time.perf_counter()
        result = w.revoke({"tenant": tenant}, reason="bench", caller=OPERATOR)
        committed = time.perf_counter()
        readback = jobs.read_back(result.revocation_id, caller=OPERATOR)
        confirmed = time.perf_counter()
        assert readback["readback_status"] == "confirmed", readback
        assert w.query(tenant=tenant, limit=10_000, caller=OPERATOR) == []
        commits.append((committed - started) * 1000)
        confirms.append((confirmed - started) * 1000)
        covered.append(result.covered)
        # the floor: the same rows' status flipped by one raw UPDATE
        raw_tenant = f"t{tenants - 1 - k}"
        t = time.perf_counter()
        raw.execute("BEGIN" if postgres else "BEGIN IMMEDIATE")
        raw.execute("UPDATE memories SET status = 'revoked' WHERE tenant = ? AND status = 'usable'", (raw_tenant,))
        raw.execute("COMMIT")
        raws.append((time.perf_counter() - t) * 1000)
    # evidence with `scope` descendants (half direct, half one level further
    # down); then a second tree of the same shape for the floor
    derived_commits, derived_confirms, floors = [], [], []
    if not postgres:  # the floor is written by raw sqlite3
        create_floor_table(w)
    for k in range(runs):
        tenant = f"t{tenants // 2 + k}"
        root, floor_root = f"evidence-{k}", f"floor-{k}"
        plant_tree(w, root, tenant, scope, now)
        started = time.perf_counter()
        result = w.revoke({"ids": [root]}, reason="bench: poisoned evidence", caller=OPERATOR)
        committed = time.perf_counter()
        readback = jobs.read_back(result.revocation_id, caller=OPERATOR)
        confirmed = time.perf_counter()
        assert result.cascaded == scope and readback["readback_status"] == "confirmed", (result, readback)
        derived_commits.append((committed - started) * 1000)
        derived_confirms.append((confirmed - started) * 1000)
        if not postgres:
            plant_tree(w, floor_root, tenant, scope, now)  # after: the read-back reads this tenant
            floors.append(write_floor(w, result.seq, root, floor_root, scope))
    w.close()
    chaining_ms = statistics.median(chain_alone(scope) for _ in range(runs))
    commit_ms, confirm_ms, raw_ms = statistics.median(commits), statistics.median(confirms), statistics.median(raws)
    d_commit, d_confirm = statistics.median(derived_commits), statistics.median(derived_confirms)
    floor_ms = statistics.median(floors) if floors else None
    metrics = [
        Metric(
            f"revoke {statistics.median(covered):,.0f} of {n:,}: commit",
            commit_ms,
            "ms",
            raw_ms,
            commit_ms / raw_ms,
            f"<= {commit_target} ms",
            commit_ms <= commit_target,
        ),
        Metric(
            f"revoke {statistics.median(covered):,.0f} of {n:,}: read-back confirmed",
            confirm_ms,
            "ms",
            None,
            None,
            "<= 1000 ms",
            confirm_ms <= 1000,
        ),
        Metric(
            f"revoke evidence with {scope:,} descendants: commit (vs raw floor)",
            d_commit,
            "ms",
            floor_ms,
            None if floor_ms is None else d_commit / floor_ms,
            # the floor is raw sqlite3's: PostgreSQL keeps its absolute target
            f"<= {commit_target} ms" if floor_ms is None else "<= 2.5x floor",
            d_commit <= commit_target if floor_ms is None else d_commit <= 2.5 * floor_ms,
        ),
        Metric(
            f"chaining {scope:,} invalidations alone (no model, walk or write)",
            chaining_ms,
            "ms",
            d_commit,
            chaining_ms / d_commit,
            "(info)",
            True,
        ),
        Metric(
            f"revoke evidence with {scope:,} descendants: read-back confirmed",
            d_confirm,
            "ms",
            confirm_ms,
            d_confirm / confirm_ms,
            "<= 1000 ms",
            d_confirm <= 1000,
        ),
    ]
    report(f"memwarden revoke benchmark ({args.backend})", metrics, args.json_path)


def plant_tree(w: Warden, root: str, tenant: str, size: int, now: datetime) -> None:
    """An evidence memory and ``size`` memories drawn from it."""
    w.save(
        memory_id=root,
        kind="external_fact",
        summary="evidence",
        content=f"evidence {root}",
        source_url="https://src.example/evidence",
        scope={"tenant": tenant},
        caller=OPERATOR,
    )
    with w.transaction() as tx:
        for i in range(size):
            w.texts.put(tenant, f"{root}-d{i}", 1, None, "derived")
        tx.append(
            [
                MemorySaved(
                    memory_id=f"{root}-d{i}",
                    version=1,
                    kind="external_fact",
                    summary=f"derived {i}",
                    content_checksum=content_checksum("derived"),
                    content_length=7,
                    source_url="agent://summariser",
                    fetched_at=now.isoformat(),
                    expires_at=(now + timedelta(days=1)).isoformat(),
                    scope=Scope(tenant=tenant, project=f"p{i % 10}"),
                    derived_from=(
                        ParentRef(memory_id=root if i < size // 2 else f"{root}-d{i - size // 2}", version=1),
                    ),
                )
                for i in range(size)
            ]
        )


def chain_alone(size: int) -> float:
    """ms to encode ``size`` invalidations' payloads and chain them (the
    log's own encoder, preimage and hash), and nothing else."""
    started = time.perf_counter()
    prev = GENESIS_HASH
    for i in range(size):
        payload = canonical_json(
            {
                "caused_by": 1_000_001,
                "detail": "parent evidence-0: revoked",
                "memory_id": f"evidence-0-d{i}",
                "reason": "derived_from_unusable",
                "tenant": "t50",
                "version": 1,
            },
            floats=False,
        )
        stream = memory_stream("t50", f"evidence-0-d{i}")
        at = "2026-12-02T12:00:00.000000Z"
        preimage = preimage_bytes(
            1_000_002 + i, f"inv_{i:06d}", "memory.invalidated", stream, 2, at, at, "memwarden", 2, payload, prev
        )
        prev = chain_hash(prev, preimage)
    return (time.perf_counter() - started) * 1000


def create_floor_table(w: Warden) -> None:
    """``floor_events``: the events table's own definition under another
    name (its triggers guard UPDATE and DELETE only, so inserts cost the same)."""
    (ddl,) = w.store.conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone()
    w.store.conn.execute(ddl.replace("CREATE TABLE events", "CREATE TABLE floor_events", 1))


def write_floor(w: Warden, after_seq: int, root: str, floor_root: str, size: int) -> float:
    """What the cascade had to write, written by raw sqlite3 with everything
    computed beforehand: the revocation's and the invalidations' event rows
    (the bytes the log just took, under other ids) into ``floor_events``,
    and the other tree's projection rows taken out by one UPDATE, in one
    ``synchronous=FULL`` commit. No validation, encoding, hashing, lookups
    or cascade walk: the floor under the engine's commit, in ms."""
    conn = w.store.conn
    (base,) = conn.execute("SELECT coalesce(max(seq), 0) FROM floor_events").fetchone()
    found = conn.execute(
        f"SELECT {ROW_COLUMNS} FROM events WHERE seq >= ? AND type IN ('revocation.issued', 'memory.invalidated') "
        "ORDER BY seq",
        (after_seq,),
    )
    rows = []
    for n, (_, event_id, type_, stream, *envelope, payload, prev_hash, hash_) in enumerate(found):
        rows.append(
            (base + n + 1, f"floor:{event_id}", type_, f"floor:{stream}", *envelope)
            + (payload.replace(root, floor_root), prev_hash, hash_)
        )
    assert len(rows) == size + 1, len(rows)
    taken = canonical_json([[base + n + 2, f"{floor_root}-d{n}"] for n in range(size)], floats=False)
    started = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        f"INSERT INTO floor_events ({ROW_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        rows,
    )
    conn.execute("UPDATE memories SET status = 'revoked', reason = 'revoked' WHERE memory_id = ?", (floor_root,))
    conn.execute(
        "WITH j AS MATERIALIZED (SELECT value ->> 0 AS seq, value ->> 1 AS memory_id FROM json_each(?)) "
        "UPDATE memories SET status = 'invalidated', reason = 'derived_from_unusable', "
        "invalidation_reason = 'derived_from_unusable', invalidated_by = j.seq, last_seq = j.seq "
        "FROM j WHERE memories.memory_id = j.memory_id",
        (taken,),
    )
    (changed,) = conn.execute("SELECT changes()").fetchone()
    conn.execute("COMMIT")
    elapsed = (time.perf_counter() - started) * 1000
    assert changed == size, changed
    return elapsed


if __name__ == "__main__":
    main()
