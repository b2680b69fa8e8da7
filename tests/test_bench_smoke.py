"""Every benchmark in ``scripts/bench`` runs, at the size of ``--smoke``.

A benchmark that no longer starts (an API it calls changed under it) is
found here, not on the day its figures are wanted. ``--smoke`` sizes judge
nothing: what is checked is that each script ends well, prints its table
and writes its JSON in the shape ``scripts/bench/report.py`` reads. Each
runs in a process of its own, as a developer runs it, with its scratch
files under the test's own folder."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .backends import PostgresBackend

BENCH = Path(__file__).parent.parent / "scripts" / "bench"
# _common.py, _clustered.py (the recall corpus) and _save_floor.py (save.py's baselines) are helpers;
# report.py turns their JSON into tables (tested below)
NOT_BENCHES = {"_common.py", "_clustered.py", "_save_floor.py", "report.py"}
BENCHES = sorted(p.name for p in BENCH.glob("*.py") if p.name not in NOT_BENCHES)
KEYS = {"metric", "value", "unit", "baseline", "ratio", "target", "met"}
# what a benchmark needs beside the project, and how its run is pointed there
NEEDS_POSTGRES = {"postgres.py"}
NEEDS_REDIS = {"sinks.py"}
REDIS = os.environ.get("MEMWARDEN_TEST_REDIS", "redis://127.0.0.1:6379/9")  # as tests/_sinks.py's


def missing_or_skip(missing: str | None, what: str) -> None:
    """Skip with the reason where ``what`` is missing, except under
    ``CI=true``, where every benchmark must run (as the backends' tests)."""
    if missing is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true needs {what}: {missing}")
    pytest.skip(missing)


def postgres_missing() -> str | None:
    server = PostgresBackend()
    missing = server.available()
    server.close()
    return missing


def redis_missing() -> str | None:
    try:
        import redis
    except ImportError:
        return "redis-py is not installed (pip install 'memwarden[redis]')"
    client = redis.Redis.from_url(REDIS, socket_connect_timeout=2)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        return f"no Redis at {REDIS}: {exc}"
    finally:
        client.close()
    return None


def number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def test_every_benchmark_takes_the_shared_flags() -> None:
    # --smoke, --quick and --json come from _common.arguments: a script parsing its own would be
    # run here with flags it does not know; one that is no benchmark is named in NOT_BENCHES
    assert NOT_BENCHES <= {p.name for p in BENCH.glob("*.py")}
    own = [name for name in BENCHES if "arguments(" not in (BENCH / name).read_text(encoding="utf-8")]
    assert own == [], own


@dataclass
class Ran:
    done: subprocess.CompletedProcess[str]
    json_path: Path


def run(script: str, folder: Path) -> Ran:
    out = folder / "x.json"
    scratch = folder / "scratch"
    scratch.mkdir(parents=True)
    env = {
        **os.environ,
        "TMPDIR": str(scratch),  # the benchmarks' scratch stores, removed with the test's folder
        "MEMWARDEN_BENCH_POSTGRES": PostgresBackend().server,
        "MEMWARDEN_BENCH_REDIS": REDIS,
        "COLUMNS": "200",  # the table a line a row, so that its caption and metrics are found whole
    }
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--smoke", "--json", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=100,
    )
    return Ran(done, out)


@pytest.fixture(scope="module")
def smoke_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The benchmarks this session runs, started together, a few at a time:
    most of a smoke run is a process starting or waiting (on a server, a
    disk, a phase's end), so side by side they take a fraction of the time
    they take in turn. Those whose server is missing are not started (their
    test says why)."""
    chosen = [
        item.callspec.params["script"]
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec") and "script" in item.callspec.params
    ]
    missing = {"postgres": postgres_missing(), "redis": redis_missing()}
    startable = [
        s
        for s in chosen
        if not (s in NEEDS_POSTGRES and missing["postgres"]) and not (s in NEEDS_REDIS and missing["redis"])
    ]
    pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="bench-smoke")
    try:
        yield {s: pool.submit(run, s, tmp_path_factory.mktemp(s.removesuffix(".py"))) for s in startable}
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# a test waits for its benchmark, which may have waited for a worker behind earlier ones (each at
# most 100 s): past the suite's 120 s a test
@pytest.mark.timeout(300)
@pytest.mark.parametrize("script", BENCHES)
def test_benchmark_runs_at_smoke_size(script: str, smoke_runs: dict[str, Any]) -> None:
    if script in NEEDS_POSTGRES:
        missing_or_skip(postgres_missing(), "PostgreSQL")
    if script in NEEDS_REDIS:
        missing_or_skip(redis_missing(), "Redis")
    ran: Ran = smoke_runs[script].result()
    done = ran.done
    assert done.returncode == 0, f"{script} failed:\n{done.stderr[-4000:]}"
    assert "--smoke: tiny sizes, the figures judge nothing" in done.stdout, done.stdout
    rows = json.loads(ran.json_path.read_text(encoding="utf-8"))
    assert isinstance(rows, list) and rows, rows
    for row in rows:
        assert isinstance(row, dict) and set(row) == KEYS, row
        assert isinstance(row["metric"], str) and row["metric"], row
        assert number(row["value"]), row
        assert isinstance(row["unit"], str) and isinstance(row["target"], str), row
        assert row["baseline"] is None or number(row["baseline"]), row
        assert row["ratio"] is None or number(row["ratio"]), row
        assert isinstance(row["met"], bool), row
        assert row["metric"] in done.stdout, f"{row['metric']!r} is not in the table printed"


def test_report_turns_benchmark_json_into_tables(tmp_path: Path) -> None:
    rows = [
        {"metric": "query p99", "value": 0.5, "unit": "ms", "baseline": 0.25, "ratio": 2.0, "target": "<= 4x",
         "met": True},
        {"metric": "revoke: commit", "value": 300.0, "unit": "ms", "baseline": None, "ratio": None,
         "target": "<= 250 ms", "met": False},
    ]  # fmt: skip
    (tmp_path / "query.json").write_text(json.dumps(rows), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(BENCH / "report.py"), str(tmp_path / "query.json")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "## query" in done.stdout
    assert "| query p99 | 0.50 | ms | 0.25 | 2.000 | <= 4x | yes |" in done.stdout
    assert "| revoke: commit | 300.00 | ms |  |  | <= 250 ms | **no** |" in done.stdout

    before, after = tmp_path / "before", tmp_path / "after"
    for side, values in ((before, (1.0, 3.0)), (after, (0.5, 0.7))):
        side.mkdir()
        for run, value in enumerate(values):
            row = {**rows[0], "value": value, "met": value <= 1.0}
            (side / f"query-{run}.json").write_text(json.dumps([row]), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(BENCH / "report.py"), "--compare", str(before), str(after)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    # the medians of each side, and how many of the after side's runs met the target
    assert "| query | query p99 | 2.00 | 0.60 | ms | 2.000 | 2.000 | <= 4x | 2/2 |" in done.stdout
