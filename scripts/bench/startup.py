"""How long a command of the ``memwarden`` command line takes, start to exit:
the median wall time of whole processes running ``memwarden --version``,
``memwarden get <id>`` and ``memwarden due`` on a small store (200
memories, a tenth of them due), against the interpreter's own start
(``python -c pass``) measured in the same run, the runs interleaved so that
the machine's drift hits every command alike.

    .venv/bin/python scripts/bench/startup.py [--quick] [--json PATH] [--repeat N] [--backend postgres]

Targets (absolute, on the reference machine, SQLite): ``--version`` within
150 ms, ``get`` and ``due`` within 250 ms each. The ratio is the command's
time over the interpreter's start: what memwarden adds, read on a machine
whose speed differs. On PostgreSQL the figures are reported, not judged.
"""

from __future__ import annotations

import sys
from pathlib import Path

# http.py in this folder would shadow the standard library's http package: look here last
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE] + [_HERE]

import os
import statistics
import subprocess
import time

from _common import Metric, arguments, fresh_store, report
from memwarden.engine import OPERATOR, Warden
from memwarden.events import FrozenClock

MEMORIES = 200
TARGETS_MS = {"version": 150.0, "get": 250.0, "due": 250.0}


def main() -> None:
    args = arguments(__doc__ or "")
    smoke = getattr(args, "smoke", False)  # a smoke run, where _common's arguments offer one
    runs = args.repeat or (1 if smoke else 5 if args.quick else 21)
    store = _small_store(fresh_store(args, "startup"))
    command = _memwarden()
    # no policy file or log level from the environment; and bytecode kept, as
    # an installed package has it: PYTHONDONTWRITEBYTECODE would time the
    # compiling of every module of memwarden's on every run
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWARDEN_") and k != "PYTHONDONTWRITEBYTECODE"}
    runs_of = {
        "baseline": [sys.executable, "-c", "pass"],
        "version": [*command, "--version"],
        "get": [*command, "--db", store, "get", "m7"],
        "due": [*command, "--db", store, "due"],
    }
    for name, argv in runs_of.items():  # each answers as it should, once, before any is timed
        _check(name, subprocess.run(argv, env=env, capture_output=True, text=True))
    took: dict[str, list[float]] = {name: [] for name in runs_of}
    for _ in range(runs):
        for name, argv in runs_of.items():
            took[name].append(_wall(argv, env))
    ms = {name: statistics.median(times) * 1000 for name, times in took.items()}
    judged = args.backend == "sqlite"
    labels = {
        "version": "memwarden --version",
        "get": f"memwarden get <id> ({MEMORIES} memories)",
        "due": f"memwarden due ({MEMORIES // 10} due)",
    }
    metrics = [
        Metric(
            labels[name],
            ms[name],
            "ms",
            ms["baseline"],
            ms[name] / ms["baseline"],
            f"<= {TARGETS_MS[name]:.0f} ms" if judged else "(info)",
            ms[name] <= TARGETS_MS[name] if judged else True,
        )
        for name in labels
    ]
    report(
        f"command line start to exit, median of {runs} ({args.backend}; baseline: python -c pass)",
        metrics,
        args.json_path,
    )


def _memwarden() -> list[str]:
    """The installed ``memwarden`` script beside this interpreter (what a
    user runs), or the module when there is none."""
    script = Path(sys.executable).with_name("memwarden")
    return [str(script)] if script.exists() else [sys.executable, "-m", "memwarden.engine.faces.cli"]


def _small_store(location: str) -> str:
    w = Warden(location, clock=FrozenClock("2026-01-05T09:00:00Z"))
    w.save_many(
        [
            {
                "memory_id": f"m{i}",
                "kind": "external_fact",
                "summary": f"요약 {i}",
                "content": f"내용 {i}",
                "source_url": f"https://src.example/{i}",
                "scope": {"tenant": "acme", "project": "p"},
                # a tenth long expired: due for re-verification now
                "expires_at": "2026-01-06T00:00:00Z" if i % 10 == 0 else "2999-01-01T00:00:00Z",
            }
            for i in range(MEMORIES)
        ],
        caller=OPERATOR,
    )
    w.close()
    return location


def _check(name: str, done: subprocess.CompletedProcess[str]) -> None:
    expected = {"baseline": "", "version": "version", "get": "m7", "due": "m0 "}[name]
    if done.returncode != 0 or expected not in done.stdout:
        raise SystemExit(f"{name}: exit {done.returncode}, stdout {done.stdout[:200]!r}, stderr {done.stderr[:500]!r}")


def _wall(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
