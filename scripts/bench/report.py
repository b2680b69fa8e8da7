"""Turn benchmark JSON files into the Markdown table of BENCHMARKS.md.

.venv/bin/python scripts/bench/report.py bench-results/*.json > BENCHMARKS.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


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


if __name__ == "__main__":
    main(sys.argv[1:])
