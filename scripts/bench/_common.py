"""Shared by the benchmarks: arguments, medians, the table and the JSON."""

from __future__ import annotations

import argparse
import atexit
import json
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class Metric:
    metric: str
    value: float
    unit: str
    baseline: float | None
    ratio: float | None
    target: str
    met: bool


def arguments(description: str, extra: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    """The shared flags, and a benchmark's own (``extra`` adds them)."""
    from memwarden.engine import configure_logging

    configure_logging(level="ERROR")
    parser = argparse.ArgumentParser(description=description)
    if extra is not None:
        extra(parser)
    parser.add_argument("--quick", action="store_true", help="a small run, under a minute")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a tiny run, seconds: every code path once, for CI; its figures judge nothing",
    )
    parser.add_argument("--json", dest="json_path", type=Path, default=None, help="write results as JSON here")
    parser.add_argument("--repeat", type=int, default=None, help="runs per measurement (median is reported)")
    parser.add_argument(
        "--backend",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="the store measured: the embedded SQLite default, or PostgreSQL at --server",
    )
    parser.add_argument(
        "--server",
        default=os.environ.get("MEMWARDEN_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432"),
        help="the PostgreSQL server for --backend postgres (each figure gets a database of its own, dropped at exit)",
    )
    args = parser.parse_args()
    global _smoke
    _smoke = args.smoke
    return args


_smoke = False


def sized(args: argparse.Namespace, *, full: T, quick: T, smoke: T) -> T:
    """The size of a run: ``smoke`` with --smoke, ``quick`` with --quick."""
    if args.smoke:
        return smoke
    return quick if args.quick else full


def repeats(args: argparse.Namespace, default: int) -> int:
    """Runs per measurement: --repeat, one for --smoke, else ``default``."""
    return args.repeat or (1 if args.smoke else default)


class Databases:
    """Fresh PostgreSQL databases on one server, dropped when the benchmark exits."""

    def __init__(self, server: str) -> None:
        import psycopg

        self.server = server.rstrip("/")
        self.admin = psycopg.connect(f"{self.server}/postgres", autocommit=True)
        self.made: list[str] = []
        atexit.register(self.drop_all)

    def fresh(self, label: str) -> str:
        name = f"memwarden_bench_{label}_{secrets.token_hex(4)}"
        self.admin.execute(f'CREATE DATABASE "{name}"')
        self.made.append(name)
        return f"{self.server}/{name}"

    def drop_all(self) -> None:
        """Every database made, dropped together: each DROP DATABASE waits
        for a checkpoint of the server, and drops at once share them. (Plain
        threads: this runs at exit, when concurrent.futures takes no more work.)"""
        import threading

        import psycopg

        def drop(names: list[str]) -> None:
            with psycopg.connect(f"{self.server}/postgres", autocommit=True) as conn:
                for name in names:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

        made, self.made = self.made, []
        droppers = [threading.Thread(target=drop, args=(made[k::8],)) for k in range(min(8, len(made)))]
        for t in droppers:
            t.start()
        for t in droppers:
            t.join()
        self.admin.close()


_databases: Databases | None = None


def fresh_store(args: argparse.Namespace, label: str) -> str:
    """Where a benchmark's store goes: a file in a scratch folder, or a
    database of its own on ``--server`` for ``--backend postgres``."""
    global _databases
    if args.backend == "sqlite":
        return str(scratch_dir(f"memwarden-{label}-") / f"{label}.db")
    if _databases is None:
        _databases = Databases(args.server)
    return _databases.fresh(label)


class RawConnection:
    """The baseline's own connection to a store, taking the same ``?``
    statements on either backend (raw sqlite3, or raw psycopg)."""

    def __init__(self, location: str) -> None:
        if location.startswith("postgresql://"):
            import psycopg
            from memwarden.events import QmarkConnection

            self._conn: Any = QmarkConnection(psycopg.connect(location, autocommit=True))
        else:
            import sqlite3

            self._conn = sqlite3.connect(location, isolation_level=None)

    def execute(self, sql: str, parameters: tuple[Any, ...] = ()) -> Any:
        return self._conn.execute(sql, parameters)


def scratch_dir(prefix: str) -> Path:
    """A temporary folder removed when the benchmark exits (the full runs
    leave gigabytes of databases behind otherwise)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def median_of(runs: int, fn: Callable[[], float]) -> float:
    """The median of ``runs`` measurements; the machines are noisy."""
    return statistics.median(fn() for _ in range(runs))


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def report(title: str, metrics: list[Metric], json_path: Path | None) -> None:
    from rich.console import Console
    from rich.table import Table

    # a smoke run's sizes are too small for its targets to mean anything: the table says so
    table = Table(title=title, caption="--smoke: tiny sizes, the figures judge nothing" if _smoke else None)
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
