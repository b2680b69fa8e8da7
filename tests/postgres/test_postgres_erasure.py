"""Erasure on PostgreSQL: the vacuum that takes erased texts out of the
table files waits for every transaction that could still see them."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
from memwarden.engine import OPERATOR, Warden

from ..conftest import save_memory

SECRET = "여권번호 M12345678 ERASEDMARKER"


def _table_files(url: str) -> bytes:
    with psycopg.connect(url, autocommit=True) as conn:
        (oid,) = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()
        conn.execute("CHECKPOINT")
        (data,) = conn.execute("SHOW data_directory").fetchone()
    folder = Path(data) / "base" / str(oid)
    return b"".join(p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file())


def test_the_vacuum_waits_for_an_older_snapshot_and_still_removes_the_text(pg_url: str) -> None:
    w = Warden(pg_url)
    try:
        save_memory(w, "pii", content=SECRET)
        save_memory(w, "other", content="nothing to hide")
        # an auditor's snapshot taken before the erasure can still read the
        # text: no vacuum may take it from under it, so erasure waits
        auditor = psycopg.connect(pg_url, autocommit=True)
        auditor.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        assert auditor.execute("SELECT count(*) FROM texts").fetchone()[0] == 2
        threading.Timer(1.0, lambda: auditor.execute("COMMIT")).start()
        started = time.monotonic()
        assert w.erase(memory_id="pii", reason="GDPR art. 17", caller=OPERATOR).erased == 1
        waited = time.monotonic() - started
        auditor.close()
        assert waited >= 0.9, f"the vacuum ran under a snapshot that could still see the text ({waited:.2f}s)"
        assert SECRET.encode() not in _table_files(pg_url)
        assert w.get("other", caller=OPERATOR).content == "nothing to hide"
    finally:
        w.close()


def test_past_its_bound_the_vacuum_runs_anyway_and_says_so(pg_url: str) -> None:
    from memwarden.events import SystemClock
    from memwarden.projections._postgres_store import PostgresStore
    from structlog.testing import capture_logs

    store = PostgresStore(pg_url, clock=SystemClock(), erasure_wait=0.2)
    auditor = psycopg.connect(pg_url, autocommit=True)
    try:
        auditor.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        auditor.execute("SELECT 1").fetchone()
        started = time.monotonic()
        with capture_logs() as logs:
            store.after_erasure()
        assert 0.2 <= time.monotonic() - started < 10
        assert [e["event"] for e in logs] == ["erasure_vacuum_early"]
    finally:
        auditor.close()
        store.close()
