"""Erasure on PostgreSQL: the vacuum that takes erased texts out of the
table files waits for every transaction that could still see them."""

from __future__ import annotations

import threading
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
        ending = threading.Event()

        def end_the_snapshot() -> None:
            ending.set()
            auditor.execute("COMMIT")

        threading.Timer(1.0, end_the_snapshot).start()  # the timer only paces the auditor
        assert w.erase(memory_id="pii", reason="GDPR art. 17", caller=OPERATOR).erased == 1
        assert ending.is_set(), "the erasure returned while a snapshot that could see the text was open"
        auditor.close()
        # and the vacuum that removed it ran after the snapshot: under it, the row's bytes would stay
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
        with capture_logs() as logs:
            assert store.after_erasure() is False  # vacuumed early, and said so
        assert [e["event"] for e in logs] == ["erasure_vacuum_early"]
        # it did not wait for the snapshot: that is still open
        assert auditor.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    finally:
        auditor.close()
        store.close()


def test_the_planner_keeps_no_sample_of_an_erased_text(pg_url: str) -> None:
    """pg_stats (readable by any role of the database) showed erased words
    among a column's most common values after memwarden's own ANALYZE."""
    w = Warden(pg_url)
    try:
        memories = [
            {
                "memory_id": f"v{i}",
                "kind": "external_fact",
                "summary": "patient zebradiagnosis confidential",
                "content": "diagnosis zebradiagnosis hivpositive marker",
                "source_url": "https://clinic.example/v",
                "scope": {"tenant": "t1", "user": "victim"},
                "ttl": "6h",
            }
            for i in range(300)
        ]
        w.save_many(memories, caller=OPERATOR)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ANALYZE texts, memories_search, memories")
            assert w.erase(user="victim", tenant="t1", reason="asked", caller=OPERATOR).erased == 300
            conn.execute("ANALYZE texts, memories_search, memories")
            sampled = conn.execute(
                "SELECT tablename, attname, most_common_vals::text, most_common_elems::text, histogram_bounds::text "
                "FROM pg_stats WHERE tablename IN ('texts', 'memories_search', 'memories')"
            ).fetchall()
        text = repr(sampled)
        assert "zebradiagnosis" not in text and "hivpositive" not in text and "sha256:" not in text, sampled
    finally:
        w.close()
