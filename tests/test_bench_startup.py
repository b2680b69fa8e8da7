"""scripts/bench/startup.py runs and writes its figures in the benchmarks'
shape (the speed itself is judged by the benchmark, never here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "scripts" / "bench" / "startup.py"


def test_the_startup_benchmark_writes_one_row_per_command(tmp_path: Path) -> None:
    out = tmp_path / "startup.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWARDEN_")}
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--repeat", "1", "--json", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text(encoding="utf-8"))
    assert [r["metric"].split(" (")[0] for r in rows] == ["memwarden --version", "memwarden get <id>", "memwarden due"]
    assert [r["target"] for r in rows] == ["<= 150 ms", "<= 250 ms", "<= 250 ms"]
    for row in rows:
        assert set(row) == {"metric", "value", "unit", "baseline", "ratio", "target", "met"}
        assert row["unit"] == "ms" and row["value"] > 0 and row["baseline"] > 0
        assert abs(row["ratio"] - row["value"] / row["baseline"]) < 1e-9
        assert row["met"] == (row["value"] <= float(row["target"].split()[1]))
