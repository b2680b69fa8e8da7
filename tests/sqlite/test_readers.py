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


def _pool(path: Path, opened: list[sqlite3.Connection], size: int) -> ReaderPool:
    sqlite3.connect(path).close()

    def opener() -> sqlite3.Connection:
        opened.append(sqlite3.connect(path, isolation_level=None, check_same_thread=False))
        return opened[-1]

    return ReaderPool(str(path), opener, size=size)


def _holding(pool: ReaderPool, release: threading.Event) -> threading.Thread:
    """A thread inside a read transaction of ``pool`` until ``release``; started once it is."""
    inside = threading.Event()

    def hold() -> None:
        with pool.transaction():
            inside.set()
            release.wait(30)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert inside.wait(5)
    return thread


def test_the_pool_is_bounded_and_reuses_its_connections(tmp_path: Path) -> None:
    opened: list[sqlite3.Connection] = []
    pool = _pool(tmp_path / "p.db", opened, size=2)
    first, second = threading.Event(), threading.Event()
    holders = [_holding(pool, first), _holding(pool, second)]
    third: list[bool] = []
    waiter = threading.Thread(target=lambda: third.append(pool.transaction().__enter__() is not None))
    waiter.start()
    waiter.join(0.3)
    assert third == [] and len(opened) == 2  # the third waits for one of the two
    first.set()
    waiter.join(5)
    assert third == [True] and len(opened) == 2
    second.set()
    for h in holders:
        h.join(5)
    pool.close()


def test_a_read_inside_a_read_is_on_its_connection(tmp_path: Path) -> None:
    """A thread holds one connection at most: holding one while it waited
    for another, with every connection held so, it would wait for ever (the
    vector index's catch-up, under its lock, inside a search's read)."""
    opened: list[sqlite3.Connection] = []
    pool = _pool(tmp_path / "p.db", opened, size=1)
    seen: list[bool] = []

    def nested() -> None:
        with pool.transaction() as outer, pool.transaction() as inner:
            seen.append(inner is outer and inner.in_transaction)
        with pool.transaction() as again:  # the outer one ended: a transaction of its own
            seen.append(again.in_transaction)

    reader = threading.Thread(target=nested, daemon=True)
    reader.start()
    reader.join(30)  # bounds the test only: before, the inner read waited for the one connection for ever
    assert not reader.is_alive() and seen == [True, True] and len(opened) == 1
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
