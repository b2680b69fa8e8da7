"""LangGraph's store interface over memwarden, beside LangGraph's own stores.

    .venv/bin/python scripts/bench/langgraph_store.py [--quick] [--json PATH] [--repeat N]

The same operations through ``BaseStore`` on the same items (100,000; 10,000
with --quick) in 100 namespaces of 10 users each, in one run, on one
machine: ``MemwardenStore`` in process (an agent key's Warden), LangGraph's
``SqliteStore`` (``langgraph-checkpoint-sqlite``, the ``bench`` extra) and
``InMemoryStore``. memwarden's own ``save`` and ``save_many`` with the same
fields are the floor the adapter is judged against.

Targets (issue #41):
* ``put`` and a batch of puts at no less than 0.8 of the rates memwarden's
  own save and batch reach (the adapter adds under 20%);
* ``get`` and a filtered ``search`` p99 within 1.5x ``SqliteStore``'s;
* expired and revoked items served: 0 (a fifth of the items are put with a
  TTL of one minute and the clock moves two on; one namespace is revoked).
"""

from __future__ import annotations

import random
import sqlite3
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

# scripts/bench/http.py would shadow the standard library's http package:
# look in this folder last, not first
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE] + [_HERE]
from _common import Metric, arguments, median_of, percentile, report, scratch_dir
from memwarden.engine import OPERATOR, Principal, Warden
from memwarden.events import FrozenClock

READS = 2000
AGENT = Principal("bench", "agent", tenants=("acme",))


def item(i: int) -> tuple[tuple[str, str], str, dict[str, Any], float | None]:
    """(namespace, key, value, ttl in minutes) of item ``i``: a fifth expire within a minute."""
    namespace = (f"p{i % 100}", f"u{(i // 100) % 10}")
    value = {"content": f"note {i} 회의록 요약", "n": i % 50, "kind_of": "note" if i % 2 else "fact"}
    return namespace, f"k{i}", value, 1.0 if i % 5 == 0 else None


def fields(i: int) -> dict[str, Any]:
    """What ``MemwardenStore`` saves for item ``i``, for memwarden's own save."""
    from memwarden.integrations._items import content_of, memory_id_of, summary_of

    namespace, key, value, ttl = item(i)
    return {
        "memory_id": memory_id_of(namespace, key),
        "kind": "store_item",
        "summary": summary_of(value, key),
        "content": content_of(value),
        "source_url": "langgraph:" + memory_id_of(namespace, key)[3:],
        "scope": {"tenant": "acme", "project": namespace[0], "user": namespace[1]},
        "ttl": timedelta(minutes=ttl) if ttl else None,
    }


def rate(count: int, fn: Callable[[], None]) -> float:
    started = time.perf_counter()
    fn()
    return count / (time.perf_counter() - started)


def p99_ms(fn: Callable[[int], Any], picks: list[int]) -> tuple[float, list[Any]]:
    samples, answers = [], []
    for i in picks:
        started = time.perf_counter()
        answers.append(fn(i))
        samples.append((time.perf_counter() - started) * 1000)
    return percentile(samples, 0.99), answers


def measure(which: str, folder: Path, n: int, singles: int) -> dict[str, float]:
    from langgraph.store.base import PutOp

    clock = FrozenClock("2026-01-05T09:00:00Z")
    warden = None
    if which == "memwarden":
        from memwarden.integrations.langgraph import MemwardenStore

        warden = Warden(folder / "mw.db", clock=clock)
        store: Any = MemwardenStore(warden.acting_as(AGENT), tenant="acme")
    elif which == "floor":
        warden = Warden(folder / "floor.db", clock=clock)
    elif which == "sqlite":
        from langgraph.store.sqlite import SqliteStore

        conn = sqlite3.connect(folder / "lg.db", check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        store = SqliteStore(conn)
        store.setup()
    else:
        from langgraph.store.memory import InMemoryStore

        store = InMemoryStore()
    out: dict[str, float] = {}
    offset = n  # the single puts take items past the bulk's
    if which == "floor":
        assert warden is not None
        out["put"] = rate(singles, lambda: [warden.save(**fields(offset + i), caller=AGENT) for i in range(singles)])
        out["batch"] = rate(
            n,
            lambda: [
                warden.save_many([fields(i) for i in range(start, min(start + 1000, n))], caller=AGENT)
                for start in range(0, n, 1000)
            ],
        )
        warden.close()
        return out

    def op(i: int) -> Any:
        namespace, key, value, ttl = item(i)
        return PutOp(namespace, key, value, ttl=ttl if store.supports_ttl else None)

    def put(i: int) -> None:
        namespace, key, value, ttl = item(i)
        store.put(namespace, key, value, ttl=ttl if store.supports_ttl else None)

    out["put"] = rate(singles, lambda: [put(offset + i) for i in range(singles)])
    out["batch"] = rate(
        n,
        lambda: [store.batch([op(i) for i in range(start, min(start + 1000, n))]) for start in range(0, n, 1000)],
    )
    if warden is not None:
        clock.advance("2m")  # the one-minute items are past their TTL
        warden.revoke({"tenant": "acme", "project": "p5"}, reason="bench", caller=OPERATOR)
    picks = random.Random(7).choices(range(n), k=READS)
    out["get_p99_ms"], got = p99_ms(lambda i: store.get(item(i)[0], item(i)[1]), picks)
    out["search_p99_ms"], found = p99_ms(
        lambda i: store.search(item(i)[0], filter={"n": {"$gte": 10}, "kind_of": "note"}, limit=10), picks
    )
    served = [x for x in got if x is not None] + [x for page in found for x in page]
    # what no answer may hold: an item past its TTL, or of the revoked namespace
    out["expired_served"] = sum(1 for x in served if int(x.key[1:]) % 5 == 0)
    out["revoked_served"] = sum(1 for x in served if x.namespace[0] == "p5")
    if warden is not None:
        warden.close()
    return out


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    n, singles = (10_000, 500) if args.quick else (100_000, 2000)
    runs = args.repeat or (1 if args.quick else 3)
    results: dict[str, list[dict[str, float]]] = {k: [] for k in ("memwarden", "floor", "sqlite", "memory")}
    for _ in range(runs):
        for which in results:  # alternating, run by run: each sees the same machine
            results[which].append(measure(which, scratch_dir(f"lgbench-{which}-"), n, singles))

    def med(which: str, key: str) -> float:
        values = iter([r[key] for r in results[which]])
        return median_of(len(results[which]), lambda: next(values))

    metrics = [
        Metric("put rate, MemwardenStore", med("memwarden", "put"), "puts/s", med("floor", "put"),
               med("memwarden", "put") / med("floor", "put"), ">= 0.8x memwarden's save",
               med("memwarden", "put") >= 0.8 * med("floor", "put")),
        Metric("batch put rate, MemwardenStore", med("memwarden", "batch"), "puts/s", med("floor", "batch"),
               med("memwarden", "batch") / med("floor", "batch"), ">= 0.8x memwarden's batch",
               med("memwarden", "batch") >= 0.8 * med("floor", "batch")),
        Metric("get p99, MemwardenStore", med("memwarden", "get_p99_ms"), "ms", med("sqlite", "get_p99_ms"),
               med("memwarden", "get_p99_ms") / med("sqlite", "get_p99_ms"), "<= 1.5x SqliteStore's",
               med("memwarden", "get_p99_ms") <= 1.5 * med("sqlite", "get_p99_ms")),
        Metric("filtered search p99, MemwardenStore", med("memwarden", "search_p99_ms"), "ms",
               med("sqlite", "search_p99_ms"), med("memwarden", "search_p99_ms") / med("sqlite", "search_p99_ms"),
               "<= 1.5x SqliteStore's", med("memwarden", "search_p99_ms") <= 1.5 * med("sqlite", "search_p99_ms")),
        Metric("expired items served, MemwardenStore", med("memwarden", "expired_served"), "items", None, None,
               "0", med("memwarden", "expired_served") == 0),
        Metric("revoked items served, MemwardenStore", med("memwarden", "revoked_served"), "items", None, None,
               "0", med("memwarden", "revoked_served") == 0),
        Metric("put rate, SqliteStore (info)", med("sqlite", "put"), "puts/s", None, None, "-", True),
        Metric("batch put rate, SqliteStore (info)", med("sqlite", "batch"), "puts/s", None, None, "-", True),
        Metric("put rate, InMemoryStore (info)", med("memory", "put"), "puts/s", None, None, "-", True),
        Metric("get p99, InMemoryStore (info)", med("memory", "get_p99_ms"), "ms", None, None, "-", True),
        Metric("expired items served, SqliteStore (info: no sweep ran)", med("sqlite", "expired_served"), "items",
               None, None, "-", True),
    ]  # fmt: skip
    report(f"LangGraph's BaseStore over memwarden ({n:,} items)", metrics, args.json_path)


if __name__ == "__main__":
    main()
