"""A batch repeating one id against a batch of distinct ids (issue #38).

    .venv/bin/python scripts/bench/batch_same_id.py [--quick] [--json PATH] [--backend sqlite|postgres]

Both batches hold the same items (~100-byte Korean and English texts) in
one tenant; one gives every item the same memory_id (a new version each),
the other a distinct id each. A plain repeat (no evidence, no event id, no
policy to adopt) reads the version the batch itself leaves, so the whole
batch is appended together as the distinct one is (before #38 each repeat
appended what was pending and re-read every remaining item's row, and a
stream's last version was a max over the stream: quadratic, 10,000 items
about 34 s on SQLite). Baseline: the distinct-id batch, measured in the
same process, on a fresh store each, alternating. Medians of 3 runs
(--repeat). 1,000 items a batch, the most one holds (200 with --smoke).

Target: the same-id batch takes at most 2x the distinct-id one (ratio of
seconds) — linear, and the per-item cost of a repeat close to a new id's.
The linearity itself is the second row: twice the items, at most ~2.5x the
time.
"""

from __future__ import annotations

import sys
from pathlib import Path

# scripts/bench/http.py would shadow the standard library's http package:
# look in this folder last, not first
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE] + [_HERE]

import itertools
import statistics
import time
from typing import Any

from _common import Metric, arguments, fresh_store, repeats, report, sized
from memwarden.engine import MAX_BATCH, OPERATOR, Warden
from memwarden.events import FrozenClock


def items(n: int, *, same: bool) -> list[dict[str, Any]]:
    return [
        {
            "memory_id": "same" if same else f"m{i}",
            "kind": "external_fact",
            "summary": f"서울 지사 요약 {i} summary",
            "content": f"회의록 {i}: quarterly numbers reviewed",
            "source_url": "https://example.org/docs/same",
            "scope": {"tenant": "t1"},
            "ttl": "6h",
        }
        for i in range(n)
    ]


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    size = sized(args, full=MAX_BATCH, quick=MAX_BATCH, smoke=200)  # the most a batch holds
    runs = repeats(args, 3)
    counter = itertools.count()

    def batch(n: int, *, same: bool) -> float:
        w = Warden(fresh_store(args, f"batch{next(counter)}"), clock=FrozenClock("2026-01-05T09:00:00Z"))
        try:
            given = items(n, same=same)
            started = time.perf_counter()
            w.save_many(given, caller=OPERATOR)
            return time.perf_counter() - started
        finally:
            w.close()

    same, distinct, half = [], [], []
    for _ in range(runs):  # alternating, so both see the same machine
        same.append(batch(size, same=True))
        distinct.append(batch(size, same=False))
        half.append(batch(size // 2, same=True))
    s, d, h = (statistics.median(xs) for xs in (same, distinct, half))
    metrics = [
        Metric(f"batch of {size:,} repeating one id vs distinct ids", s, "s", d, s / d, "<= 2x", s / d <= 2.0),
        Metric(
            f"same-id batch of {size:,} vs of {size // 2:,} (linear: ~2x)", s, "s", h, s / h, "<= 2.5x", s / h <= 2.5
        ),
    ]
    report(f"batches repeating one id ({args.backend})", metrics, args.json_path)


if __name__ == "__main__":
    main()
