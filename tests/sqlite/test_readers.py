"""The SQLite log's read connections (``events/_sqlite_readers.py``): a read
beside a write transaction sees the last commit, never the write in progress;
the readers cannot write; an in-memory database keeps its one connection."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from memwarden.events import SQLiteEventLog
from memwarden.events._sqlite_readers import ReaderPool


def _count(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT count(*) FROM events").fetchone()[0]


def test_a_read_beside_a_write_sees_the_last_commit(tmp_path: Path) -> None:
    log = SQLiteEventLog(tmp_path / "r.db")
    try:
        inside, release, seen = threading.Event(), threading.Event(), []
        with log.transaction() as tx:
            tx.conn.execute(
                "INSERT INTO events (event_id, type, stream, stream_version, occurred_at, recorded_at, actor,"
                " schema_version, payload, prev_hash, hash) VALUES ('e', 't', 's', 1, 'x', 'x', 'a', 1, '{}', '', '')"
            )
            # this thread's own reads inside its transaction see its write
            with log.reading() as conn:
                assert _count(conn) == 1

            def other() -> None:
                inside.set()
                with log.reading() as conn:
                    seen.append(_count(conn))
                release.set()

            reader = threading.Thread(target=other)
            reader.start()
            assert release.wait(5), "a read waited for the write transaction"
            tx.conn.execute("ROLLBACK")  # nothing of it is kept
            tx.conn.execute("BEGIN IMMEDIATE")
        reader.join(5)
        assert seen == [0]
    finally:
        log.close()


def test_readers_cannot_write(tmp_path: Path) -> None:
    log = SQLiteEventLog(tmp_path / "r.db")
    try:
        with log.reading() as conn, pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM events")
    finally:
        log.close()


def test_the_pool_is_bounded_and_reuses_its_connections(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    sqlite3.connect(path).close()
    opened: list[sqlite3.Connection] = []

    def opener() -> sqlite3.Connection:
        opened.append(sqlite3.connect(path, isolation_level=None, check_same_thread=False))
        return opened[-1]

    pool = ReaderPool(str(path), opener, size=2)
    held = [pool.transaction() for _ in range(2)]
    for h in held:
        h.__enter__()
    third: list[bool] = []
    waiter = threading.Thread(target=lambda: third.append(pool.transaction().__enter__() is not None))
    waiter.start()
    waiter.join(0.3)
    assert third == [] and len(opened) == 2  # the third waits for one of the two
    held[0].__exit__(None, None, None)
    waiter.join(5)
    assert third == [True] and len(opened) == 2
    pool.close()


def test_an_in_memory_log_reads_on_its_one_connection() -> None:
    log = SQLiteEventLog(":memory:")
    try:
        with log.reading() as conn:
            assert conn is log.conn
    finally:
        log.close()


def test_no_read_of_any_face_waits_for_a_write_transaction(tmp_path: Path) -> None:
    """A key's check (every request), get, query, explain and the log's own
    reads answer while another thread holds a write transaction open (a
    batch committing), and see the state before it."""
    from memwarden.engine import OPERATOR, KeyStore, Warden

    from ..conftest import save_memory

    w = Warden(tmp_path / "m.db")
    keys = KeyStore(w)
    key = keys.create("agent", tenants=["acme"], caller=OPERATOR)[0]
    save_memory(w, "m1")
    inside, release = threading.Event(), threading.Event()

    def holding() -> None:
        with w.transaction():
            inside.set()
            release.wait(10)

    writer = threading.Thread(target=holding)
    writer.start()
    try:
        assert inside.wait(5)
        done: list[str] = []

        def reads() -> None:
            assert keys.authenticate(key) is not None
            assert w.get("m1", tenant="acme", caller=OPERATOR).usable
            assert [v.memory_id for v in w.query(tenant="acme", caller=OPERATOR)] == ["m1"]
            assert w.explain("m1", tenant="acme", caller=OPERATOR)["history"]
            assert w.log.head().seq == w.head_seq() > 0
            assert [e.type for e in w.log.read()] and w.log.seq_at("9999-01-01T00:00:00Z") == w.head_seq()
            done.append("all")

        reader = threading.Thread(target=reads)
        reader.start()
        reader.join(5)  # the writer still holds its transaction
        assert done == ["all"], "a read waited for the write transaction"
    finally:
        release.set()
        writer.join(10)
        w.close()
