"""Revocations reaching the sinks: from commit to a Redis sink and a webhook
sink confirmed, beside memwarden's own read-back in the same run.

    .venv/bin/python scripts/bench/sinks.py [--quick] [--json PATH] [--backend postgres]

Each run saves a tenant of 10,000 memories (--quick: 1,000; --smoke: 100), fills a real
Redis (127.0.0.1:6379, or MEMWARDEN_BENCH_REDIS) with them as agents' hot
cache and hands their ids to a webhook receiver on loopback (the tests'
``sink_receiver``: every request verified with ``standardwebhooks``), then
revokes the tenant. After the commit, memwarden's own read-back (every
agent read path) and the sinks' delivery and read-back run side by side, as
the scheduler runs them; each is timed from the commit. p50 and p99 over
the runs (5; --quick 3). Target (issue 42): both sinks confirmed within
2x memwarden's own read-back plus one delivery round trip (the slower
sink's ping). Then the agents' side: the p99 of single saves and of agent
queries on a store with the two sinks configured, against the same on a
store with none; target within 1.5x.
"""

from __future__ import annotations

import sys
from pathlib import Path

# scripts/bench/http.py would shadow the standard library's http package:
# look in this folder last, not first
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE] + [_HERE]
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the tests' webhook receiver

import os
import secrets
import statistics
import threading
import time
from typing import Any

from _common import Metric, arguments, fresh_store, percentile, report, sized
from memwarden.engine import (
    MAX_BATCH,
    OPERATOR,
    AddressPolicy,
    Fetchers,
    Scheduler,
    SinkWorker,
    Warden,
    sinks_from_table,
)

from tests.sink_receiver import Receiver, new_secret

REDIS = os.environ.get("MEMWARDEN_BENCH_REDIS", "redis://127.0.0.1:6379/9")


def save_tenant(w: Warden, tenant: str, n: int) -> list[str]:
    ids = [f"{tenant}-m{i:06d}" for i in range(n)]
    for start in range(0, n, MAX_BATCH):
        w.save_many(
            [
                dict(
                    memory_id=m,
                    kind="external_fact",
                    summary=f"요약 {m} summary",
                    content=f"memory {m} 서울 지사 기록",
                    source_url=f"https://src.example/{m}",
                    scope={"tenant": tenant, "project": "p1"},
                )
                for m in ids[start : start + MAX_BATCH]
            ],
            caller=OPERATOR,
        )
    return ids


def one_run(w: Warden, rcv: Receiver, tenant: str, n: int) -> dict[str, float]:
    ids = save_tenant(w, tenant, n)
    assert w.fill_cache("cache", tenant=tenant, limit=n, caller=OPERATOR)["put"] == n
    rcv.hold(tenant, ids)
    jobs = Scheduler(w)
    started = time.perf_counter()
    result = w.revoke({"tenant": tenant}, reason="bench", caller=OPERATOR)
    committed = time.perf_counter()
    own: dict[str, Any] = {}

    def own_readback() -> None:
        own["record"] = jobs.read_back(result.revocation_id, caller=OPERATOR)
        own["ms"] = (time.perf_counter() - committed) * 1000

    thread = threading.Thread(target=own_readback)
    thread.start()
    worker = SinkWorker(w)
    states = worker.settle(result.revocation_id, wait=60)
    sinks_ms = (time.perf_counter() - committed) * 1000
    worker.close()
    thread.join()
    jobs.stop()
    assert own["record"]["readback_status"] == "confirmed", own
    by_sink = {s["sink"]: s for s in states}
    assert all(s["status"] == "confirmed" and s["covered"] == n for s in states), states
    assert not rcv.held[tenant]
    return {
        "commit": (committed - started) * 1000,
        "own": own["ms"],
        "sinks": sinks_ms,
        # each sink's own figure: from the commit's recorded time to its confirmation
        "redis": by_sink["cache"]["latency_ms"],
        "webhook": by_sink["index"]["latency_ms"],
    }


def agent_p99(w: Warden, tenant: str, rounds: int) -> tuple[float, float]:
    """p99 (ms) of single saves, then of agent queries, in ``tenant``."""
    saves, queries = [], []
    for i in range(rounds):
        t = time.perf_counter()
        w.save(
            memory_id=f"agent-{i}",
            kind="external_fact",
            summary=f"agent note {i}",
            content=f"note {i}",
            source_url=f"https://src.example/agent-{i}",
            scope={"tenant": tenant, "project": "p1"},
            caller=OPERATOR,
        )
        saves.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        w.query(tenant=tenant, limit=20, caller=OPERATOR)
        queries.append((time.perf_counter() - t) * 1000)
    return percentile(saves, 0.99), percentile(queries, 0.99)


def main() -> None:
    args = arguments(__doc__ or "")
    n = sized(args, full=10_000, quick=1_000, smoke=100)
    runs = args.repeat or sized(args, full=5, quick=3, smoke=1)
    rounds = sized(args, full=1000, quick=200, smoke=20)
    secret = new_secret()
    env = f"MEMWARDEN_BENCH_SINK_SECRET_{secrets.token_hex(4)}"
    os.environ[env] = secret
    rcv = Receiver(secret)
    prefix = f"mwbench:{secrets.token_hex(4)}:"
    table = {
        "cache": {"kind": "redis", "url": REDIS, "prefix": prefix},
        "index": {"kind": "webhook", "url": rcv.url, "probe_url": rcv.probe_url, "secret_env": env, "timeout": 60},
    }
    loopback = Fetchers(addresses=AddressPolicy.of(["127.0.0.1/32"]))
    w = Warden(fresh_store(args, "sinks"), sinks=sinks_from_table(table), fetchers=loopback)
    try:
        rtt = max(w.test_sink(name, caller=OPERATOR)["round_trip_ms"] or 0.0 for name in ("cache", "index"))
        print(f"{runs} runs of {n:,} covered memories ...", file=sys.stderr)
        results = [one_run(w, rcv, f"t{k}", n) for k in range(runs)]
        print(f"agents' p99 over {rounds} saves and queries, with and without sinks ...", file=sys.stderr)
        with_sinks = agent_p99(w, "agents", rounds)
    finally:
        w.close()
        rcv.stop()
        import redis

        client = redis.Redis.from_url(REDIS)
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        if keys:
            client.delete(*keys)
    bare = Warden(fresh_store(args, "sinks-none"))
    try:
        for k in range(runs):  # a store of the same size, its tenants revoked as the runs did
            save_tenant(bare, f"t{k}", n)
            bare.revoke({"tenant": f"t{k}"}, reason="bench", caller=OPERATOR)
        without = agent_p99(bare, "agents", rounds)
    finally:
        bare.close()

    def col(name: str) -> list[float]:
        return [r[name] for r in results]

    metrics: list[Metric] = []
    for label, q in (("p50", 0.5), ("p99", 0.99)):
        own = percentile(col("own"), q) if label == "p99" else statistics.median(col("own"))
        sinks = percentile(col("sinks"), q) if label == "p99" else statistics.median(col("sinks"))
        limit = 2 * own + rtt
        metrics.append(
            Metric(
                f"revoke {n:,}: both sinks confirmed after commit, {label}",
                sinks,
                "ms",
                own,
                sinks / own,
                f"<= 2x own read-back + RTT ({limit:,.0f} ms)",
                sinks <= limit,
            )
        )
    for name, label in (("own", "memwarden's own read-back"), ("redis", "redis sink"), ("webhook", "webhook sink")):
        metrics.append(
            Metric(
                f"revoke {n:,}: {label} confirmed, p50", statistics.median(col(name)), "ms", None, None, "info", True
            )
        )
    metrics.append(
        Metric(f"revoke {n:,}: commit, p50", statistics.median(col("commit")), "ms", None, None, "info", True)
    )
    metrics.append(Metric("one delivery round trip (slower sink's ping)", rtt, "ms", None, None, "info", True))
    for i, what in enumerate(("save", "query")):
        metrics.append(
            Metric(
                f"agent {what} p99 with two sinks",
                with_sinks[i],
                "ms",
                without[i],
                with_sinks[i] / without[i],
                "<= 1.5x without sinks",
                with_sinks[i] <= 1.5 * without[i],
            )
        )
    report(f"sinks ({args.backend})", metrics, args.json_path)


if __name__ == "__main__":
    main()
