"""Turn benchmark JSON files into the Markdown tables of BENCHMARKS.md.

.venv/bin/python scripts/bench/report.py bench-results/*.json > BENCHMARKS.md
.venv/bin/python scripts/bench/report.py --compare BEFORE_DIR AFTER_DIR

With ``--compare``, each directory holds several runs of each benchmark
(``NAME-ROUND.json``, as ``before_after.sh`` writes them): one table of
the medians of each side, metric by metric.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any


def main(paths: list[str]) -> None:
    print("# Benchmarks\n")
    print("Medians of several runs on the reference machine (2 cores); each line is one metric of one script in")
    print("`scripts/bench/`, against a baseline measured in the same run. Regenerate with the commands in README.md")
    print("and `scripts/bench/report.py`.\n")
    for path in paths:
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
        print(f"## {Path(path).stem}\n")
        print("| metric | value | unit | baseline | ratio | target | met |")
        print("|---|---:|---|---:|---:|---|---|")
        for r in rows:
            baseline = "" if r["baseline"] is None else f"{r['baseline']:,.2f}"
            ratio = "" if r["ratio"] is None else f"{r['ratio']:.3f}"
            met = "yes" if r["met"] else "**no**"
            print(f"| {r['metric']} | {r['value']:,.2f} | {r['unit']} | {baseline} | {ratio} | {r['target']} | {met} |")
        print()


def compare(before: Path, after: Path) -> None:
    runs: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    for side, folder in (("before", before), ("after", after)):
        for path in sorted(folder.glob("*.json")):
            bench = path.stem.rsplit("-", 1)[0]
            for r in json.loads(path.read_text(encoding="utf-8")):
                runs.setdefault((bench, r["metric"]), {}).setdefault(side, []).append(r)

    def median(rows: list[dict[str, Any]], key: str) -> str:
        values = [r[key] for r in rows if r[key] is not None]
        if not values:
            return ""
        return f"{statistics.median(values):,.3f}" if key == "ratio" else f"{statistics.median(values):,.2f}"

    print("| bench | metric | before | after | unit | ratio before | ratio after | target | met after |")
    print("|---|---|---:|---:|---|---:|---:|---|---|")
    for (bench, metric), sides in runs.items():
        b, a = sides.get("before", []), sides.get("after", [])
        first = (a or b)[0]
        met = f"{sum(1 for r in a if r['met'])}/{len(a)}"
        print(
            f"| {bench} | {metric} | {median(b, 'value')} | {median(a, 'value')} | {first['unit']} | "
            f"{median(b, 'ratio')} | {median(a, 'ratio')} | {first['target']} | {met} |"
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--compare"] and len(sys.argv) == 4:
        compare(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        main(sys.argv[1:])
