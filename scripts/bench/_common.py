"""Shared by the benchmarks: arguments, medians, the table and the JSON."""

from __future__ import annotations

import argparse
import atexit
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass
class Metric:
    metric: str
    value: float
    unit: str
    baseline: float | None
    ratio: float | None
    target: str
    met: bool


def arguments(description: str) -> argparse.Namespace:
    from memwarden.engine import configure_logging

    configure_logging(level="ERROR")
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="a small run, under a minute")
    parser.add_argument("--json", dest="json_path", type=Path, default=None, help="write results as JSON here")
    parser.add_argument("--repeat", type=int, default=None, help="runs per measurement (median is reported)")
    return parser.parse_args()


def scratch_dir(prefix: str) -> Path:
    """A temporary folder removed when the benchmark exits (the full runs
    leave gigabytes of databases behind otherwise)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def median_of(runs: int, fn: Callable[[], float]) -> float:
    """The median of ``runs`` measurements; the machines are noisy."""
    return statistics.median(fn() for _ in range(runs))


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def report(title: str, metrics: list[Metric], json_path: Path | None) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for column in ("metric", "value", "unit", "baseline", "ratio", "target", "met"):
        table.add_column(column, justify="right" if column in ("value", "baseline", "ratio") else "left")
    for m in metrics:
        table.add_row(
            m.metric,
            f"{m.value:,.2f}",
            m.unit,
            "-" if m.baseline is None else f"{m.baseline:,.2f}",
            "-" if m.ratio is None else f"{m.ratio:.3f}",
            m.target,
            "yes" if m.met else "NO",
        )
    Console().print(table)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps([asdict(m) for m in metrics], indent=2) + "\n", encoding="utf-8")
        print(f"wrote {json_path}", file=sys.stderr)
