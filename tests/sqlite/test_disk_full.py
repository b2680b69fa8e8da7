"""Disk full: appends that fail part-way at the Nth write, for every N over a
range, under RLIMIT_FSIZE in a child process (forked from one that imported
memwarden once: thirty new interpreters cost half a minute of CPU)."""

from __future__ import annotations

import json
import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from memwarden.engine import OPERATOR, Warden

from .._forker import Forker
from ..conftest import save_memory

CHILD = textwrap.dedent(
    """
    import json, resource, signal, sqlite3, sys
    from memwarden.engine import OPERATOR, Warden, configure_logging
    configure_logging(level="ERROR")  # log lines to stderr, never mixed into the acks
    db, limit = sys.argv[1], int(sys.argv[2])
    w = Warden(db)                       # open before the limit: it may write the schema
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # writes past the limit fail with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    i = 0
    while True:
        try:
            result = w.save(memory_id=f"full-{i}", kind="external_fact", summary=f"요약 {i}",
                            content=f"내용 {i} " * 40, source_url="https://e", scope={"tenant": "acme"},
                            caller=OPERATOR)
        except Exception as exc:  # the failure the test is about
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)
            break
        print(json.dumps({"ack": result.seq, "id": result.memory_id}), flush=True)
        i += 1
    """
)


@pytest.fixture(scope="module")
def forker() -> Iterator[Forker]:
    with Forker("from memwarden.engine import OPERATOR, Warden, configure_logging") as started:
        yield started


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("full") / "base.db"
    w = Warden(db)
    for i in range(20):
        save_memory(w, f"seed{i}", ttl=None, kind="permission")
    w.store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    w.close()
    return db


@pytest.mark.parametrize("extra_pages", range(1, 31))
def test_appends_fail_cleanly_when_the_disk_fills(forker: Forker, base: Path, tmp_path: Path, extra_pages: int) -> None:
    db = tmp_path / "full.db"
    shutil.copy(base, db)
    limit = db.stat().st_size + extra_pages * 4096
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    done = forker.run(script, str(db), str(limit))
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert lines and "error" in lines[-1], (done.stdout[-500:], done.stderr[-2000:])
    assert lines[-1]["error"] == "StorageError" and "nothing was appended" in lines[-1]["message"], lines[-1]
    acked = [line["id"] for line in lines if "ack" in line]

    # space returns: nothing acknowledged is lost, nothing half-written shows
    w = Warden(db)
    report = w.log.verify_chain()
    assert report.ok, report
    assert report.head_seq == 20 + len(acked)
    for memory_id in acked:
        assert w.get(memory_id, caller=OPERATOR).usable
    assert w.check_projections(caller=OPERATOR).ok
    assert w.file_problems() == []
    save_memory(w, "after-space-returns")
    assert w.log.verify_chain().ok
    w.close()
