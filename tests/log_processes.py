"""Real OS processes appending to one log at once, and a writer killed with
SIGKILL at random points: the checks every log backend must pass, written
once (``tests/sqlite/test_concurrency.py`` and
``tests/postgres/test_postgres_log.py`` run them)."""

from __future__ import annotations

import os
import random
import signal
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._forker import Forker

WRITER = textwrap.dedent(
    """
    import sys
    from memwarden.events import {log_class}
    sys.path.insert(0, {tests!r})
    from conftest_writer import event
    log = {log_class}({target!r})
    name, count, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    for start in range(0, count, batch):
        seqs = log.append([event(name, i) for i in range(start, min(start + batch, count))])
        # acknowledged: print before going on, so a kill can be checked against it
        print(" ".join(map(str, seqs)), flush=True)
    """
)

HELPER = textwrap.dedent(
    """
    from memwarden.events import MemorySaved, Scope, content_checksum
    def event(name, i):
        return MemorySaved(
            event_id=f"{name}-{i}", memory_id=f"{name}-{i}", version=1, kind="k", summary=f"{name} {i} 요약",
            content_checksum=content_checksum(str(i)), content_length=1, source_url="https://x",
            fetched_at="2026-01-05T09:00:00Z", scope=Scope(tenant="t"))
    """
)

OpenLog = Callable[[], Any]


def preloaded(log_class: str) -> str:
    """What a writer imports, done once in the process its writers are forked from."""
    driver = "import psycopg, psycopg_pool\n" if log_class == "PostgresEventLog" else ""
    return f"{driver}from memwarden.events import {log_class}, MemorySaved, Scope, content_checksum"


def writer_script(tmp_path: Path, target: str, log_class: str) -> Path:
    """A process appending ``count`` events in batches to the log at
    ``target``, printing each batch's seqs once it is acknowledged."""
    (tmp_path / "conftest_writer.py").write_text(HELPER, encoding="utf-8")
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(tests=str(tmp_path), target=target, log_class=log_class), encoding="utf-8")
    return script


def four_writers_at_once(tmp_path: Path, target: str, log_class: str, open_log: OpenLog) -> None:
    """Four processes, 2,000 appends each: seq 1..8000, gapless, the chain valid."""
    open_log().close()
    script = writer_script(tmp_path, target, log_class)
    with Forker(preloaded(log_class)) as forker:
        procs = [forker.popen(script, f"w{n}", "2000", "10") for n in range(4)]
        for proc in procs:
            out, _ = proc.communicate()
            assert proc.returncode == 0
            assert len(out.split()) == 2000
    log = open_log()
    try:
        assert [e.seq for e in log.read()] == list(range(1, 8001))
        report = log.verify_chain()
        assert report.ok and report.head_seq == 8000
        assert len({e.event_id for e in log.read()}) == 8000
    finally:
        log.close()


def writers_killed_at_random(tmp_path: Path, target: str, log_class: str, open_log: OpenLog) -> None:
    """Twenty writers, each killed with SIGKILL at a random moment: no
    acknowledged batch is lost and no partial one is left."""
    open_log().close()
    script = writer_script(tmp_path, target, log_class)
    rng = random.Random(20261129)
    acknowledged: set[int] = set()
    batch_of: dict[str, int] = {}
    with Forker(preloaded(log_class)) as forker:
        for round_ in range(20):
            batch_of[f"r{round_}"] = rng.choice([1, 7, 50])
            proc = forker.popen(script, f"r{round_}", "100000", str(batch_of[f"r{round_}"]))
            # wait until it is appending, then kill it at a random moment
            acknowledged.update(int(s) for s in proc.stdout.readline().split())
            time.sleep(rng.uniform(0.0, 0.25))  # paces where the kill lands: every moment must be survived
            os.kill(proc.pid, signal.SIGKILL)
            rest, _ = proc.communicate()
            for line in rest.splitlines():
                acknowledged.update(int(s) for s in line.split())
            assert proc.returncode == -signal.SIGKILL
            log = open_log()
            try:
                report = log.verify_chain()
                assert report.ok, report
                present = [e.seq for e in log.read()]
                assert present == list(range(1, len(present) + 1))
                assert acknowledged <= set(present)
                # all or nothing: every round's events form whole batches
                by_round: dict[str, int] = {}
                for e in log.read():
                    name = e.event_id.rsplit("-", 1)[0]
                    by_round[name] = by_round.get(name, 0) + 1
                for name, count in by_round.items():
                    assert count % batch_of[name] == 0, (name, count, batch_of[name])
            finally:
                log.close()
    assert len(acknowledged) > 20
