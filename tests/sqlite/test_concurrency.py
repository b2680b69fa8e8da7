"""Real OS processes appending at once, and a writer killed with SIGKILL."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from memwarden.events import SQLiteEventLog

WRITER = textwrap.dedent(
    """
    import sys
    from memwarden.events import SQLiteEventLog
    sys.path.insert(0, {tests!r})
    from conftest_writer import event
    log = SQLiteEventLog({db!r})
    name, count, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    for start in range(0, count, batch):
        seqs = log.append([event(name, i) for i in range(start, min(start + batch, count))])
        # acknowledged: print before going on, so a kill can be checked against it
        print(" ".join(map(str, seqs)), flush=True)
    """
)


def _script(tmp_path: Path, db: Path) -> Path:
    helper = tmp_path / "conftest_writer.py"
    helper.write_text(
        textwrap.dedent(
            """
        from memwarden.events import MemorySaved, Scope, content_checksum
        def event(name, i):
            return MemorySaved(
                event_id=f"{name}-{i}", memory_id=f"{name}-{i}", version=1, kind="k", summary=f"{name} {i} 요약",
                content_checksum=content_checksum(str(i)), content_length=1, source_url="https://x",
                fetched_at="2026-01-05T09:00:00Z", scope=Scope(tenant="t"))
        """
        )
    )
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(tests=str(tmp_path), db=str(db)))
    return script


def test_four_processes_appending_at_once(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    SQLiteEventLog(db).close()
    script = _script(tmp_path, db)
    procs = [
        subprocess.Popen([sys.executable, str(script), f"w{n}", "2000", "10"], stdout=subprocess.PIPE, text=True)
        for n in range(4)
    ]
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0
        assert len(out.split()) == 2000
    log = SQLiteEventLog(db)
    seqs = [e.seq for e in log.read()]
    assert seqs == list(range(1, 8001))
    report = log.verify_chain()
    assert report.ok and report.head_seq == 8000
    assert len({e.event_id for e in log.read()}) == 8000


def test_sigkill_at_random_points_loses_nothing_acknowledged(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    SQLiteEventLog(db).close()
    script = _script(tmp_path, db)
    rng = random.Random(20261129)
    acknowledged: set[int] = set()
    batch_of: dict[str, int] = {}
    for round_ in range(20):
        batch_of[f"r{round_}"] = rng.choice([1, 7, 50])
        proc = subprocess.Popen(
            [sys.executable, str(script), f"r{round_}", "100000", str(batch_of[f"r{round_}"])],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        # wait until it is appending, then kill it at a random moment
        first = proc.stdout.readline()
        acknowledged.update(int(s) for s in first.split())
        time.sleep(rng.uniform(0.0, 0.25))
        os.kill(proc.pid, signal.SIGKILL)
        rest, _ = proc.communicate()
        for line in rest.splitlines():
            if line.strip():
                acknowledged.update(int(s) for s in line.split())
        assert proc.returncode == -signal.SIGKILL

        log = SQLiteEventLog(db)
        report = log.verify_chain()
        assert report.ok, report
        present = [e.seq for e in log.read()]
        assert present == list(range(1, len(present) + 1))
        assert acknowledged <= set(present)
        # all-or-nothing: every round's events form whole batches
        by_round: dict[str, int] = {}
        for e in log.read():
            name = e.event_id.rsplit("-", 1)[0]
            by_round[name] = by_round.get(name, 0) + 1
        for name, count in by_round.items():
            assert count % batch_of[name] == 0, (name, count, batch_of[name])
        log.close()
    assert len(acknowledged) > 20
