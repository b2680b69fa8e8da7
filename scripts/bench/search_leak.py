"""What another tenant's memories cost a tenant's text search (#58): tenant
A's search for a word its 20 memories hold, in a store where tenant B holds
nothing else and in one where B holds N memories with the same word,
searched alternately in one process. The text index keys each word by its
tenant, so B's memories add no work to A's search: without the keys, A's
search read B's posting lists (SQLite: 7.6 ms against 0.078 ms at 10,000).
And the same of another agent's memories in A (A's 20 are its agent
planner's) to a search by a key bound to planner: SQLite keys an agent's
words by (tenant, agent) too (1.41 ms against 0.054 ms at 10,000 without).

    .venv/bin/python scripts/bench/search_leak.py [--quick] [--smoke] [--json PATH] [--backend postgres]

Target: each search with the others' memories <= 1.5x of it without them.
"""

from __future__ import annotations

import sys
from pathlib import Path

# http.py in this folder would shadow the standard library's http package: look here last
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE] + [_HERE]

import statistics
import time
from typing import Any

from _common import Metric, arguments, fresh_store, report, sized
from memwarden.engine import OPERATOR, Principal, Warden

OWN = 20


PLANNER = Principal("bench", "agent", ("a",), "planner")


def memories(tenant: str, count: int, agent: str) -> list[dict[str, Any]]:
    return [
        {
            "memory_id": f"{tenant}{agent}{i}",
            "kind": "external_fact",
            "summary": f"note {i}",
            "content": f"zebra crossing {i} " + "filler words here " * 5,
            "source_url": f"https://example.org/{tenant}/{i}",
            "scope": {"tenant": tenant, "agent": agent},
            "ttl": "6h",
        }
        for i in range(count)
    ]


def store(location: str, others: int, tenant: str = "b", agent: str = "planner") -> Warden:
    w = Warden(location)
    items = memories("a", OWN, "planner") + memories(tenant, others, agent)
    for start in range(0, len(items), 1000):
        w.save_many(items[start : start + 1000], caller=OPERATOR)
    return w


def main() -> None:
    args = arguments(__doc__ or "")
    others = sized(args, full=50_000, quick=10_000, smoke=200)
    searches = sized(args, full=300, quick=200, smoke=5)
    runs = args.repeat or sized(args, full=5, quick=3, smoke=1)
    alone = store(fresh_store(args, "leak_alone"), 0)
    crowded = store(fresh_store(args, "leak_crowded"), others)
    agents = store(fresh_store(args, "leak_agents"), others, tenant="a", agent="other")

    def search(w: Warden, caller: Principal) -> float:
        took = []
        for _ in range(searches):
            started = time.perf_counter()
            found = w.search(tenant="a", query_text="zebra", mode="text", limit=50, caller=caller)
            took.append(time.perf_counter() - started)
        assert len(found) == OWN, len(found)
        return statistics.median(took)

    metrics = []
    for name, other, caller in (
        (f"tenant A's text search, {others:,} of tenant B's memories holding its word", crowded, OPERATOR),
        (f"agent-bound text search, {others:,} of another agent's memories in A holding its word", agents, PLANNER),
    ):
        times: dict[bool, list[float]] = {False: [], True: []}
        for run in range(runs):
            for with_others in (False, True) if run % 2 == 0 else (True, False):
                times[with_others].append(search(other if with_others else alone, caller))
        without, with_others = statistics.median(times[False]), statistics.median(times[True])
        ratio = with_others / without
        metrics.append(
            Metric(name, with_others * 1000, "ms", without * 1000, ratio, "<= 1.5x of without", ratio <= 1.5)
        )
    for w in (alone, crowded, agents):
        w.close()
    report(f"a search's work is its own tenant's ({args.backend})", metrics, args.json_path)


if __name__ == "__main__":
    main()
