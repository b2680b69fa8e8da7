"""Read connections of one SQLite file, beside its one write connection.

WAL lets readers and the writer work at once: a reader sees the last
commit before its first statement and is never blocked by a write
transaction. With one connection behind one lock, every read would wait
for every write, and a run of large batches would hold an agent's query.
Each read transaction now takes a connection of its own from a small pool;
the pool is bounded (a burst beyond it waits for a connection, not for the writer),
and its connections are read-only (``query_only``), so no write can take a
path that skips the log's lock.

A thread holds at most one of them: a read begun inside this thread's read
transaction is that transaction's (as a PostgreSQL snapshot is, in
``_postgres``). A thread that held one connection while it waited for
another could wait for ever: with every connection held by such threads,
none is ever given back (the vector index's catch-up reads the log inside
a search's view, under the index's lock, for which the other holders wait).

An in-memory database has no file another connection could open: it keeps
the one connection (``ReaderPool.shared`` is true) and its reads take the
log's lock, as before.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

READERS = 8  # connections that read at once; a ninth read waits for one of them


def in_memory(path: str) -> bool:
    return path in ("", ":memory:") or path.startswith("file::memory:") or "mode=memory" in path


class _Held(threading.local):
    """The connection of the read transaction this thread is inside, if any."""

    conn: sqlite3.Connection | None = None


class ReaderPool:
    """Read-only connections, opened on first need, at most ``size`` of them, one a thread."""

    def __init__(self, path: str, opener: Callable[[], sqlite3.Connection], *, size: int = READERS) -> None:
        self.shared = in_memory(path)
        self._opener = opener
        self._idle: list[sqlite3.Connection] = []
        self._open = 0
        self._size = size
        self._closed = False
        self._free = threading.Condition()
        self._held = _Held()

    def _take(self) -> sqlite3.Connection:
        with self._free:
            while True:
                if self._closed:
                    raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
                if self._idle:
                    return self._idle.pop()
                if self._open < self._size:
                    self._open += 1
                    break
                self._free.wait()
        try:
            conn = self._opener()
            conn.execute("PRAGMA query_only=ON")
        except BaseException:
            with self._free:
                self._open -= 1
                self._free.notify()
            raise
        return conn

    def _give(self, conn: sqlite3.Connection, healthy: bool) -> None:
        with self._free:
            if healthy and not self._closed:
                self._idle.append(conn)
                self._free.notify()
                return
            self._open -= 1
            self._free.notify()
        with suppress(sqlite3.Error):
            conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A read transaction on a connection of the pool: one committed state
        (inside this thread's own, that one: never a second connection)."""
        held = self._held.conn
        if held is not None:
            yield held
            return
        conn = self._take()
        try:
            conn.execute("BEGIN")
        except BaseException:
            self._give(conn, False)
            raise
        self._held.conn = conn
        try:
            yield conn
        finally:
            self._held.conn = None
            healthy = True
            try:
                if conn.in_transaction:
                    conn.execute("COMMIT")  # a read transaction: ends the snapshot
            except sqlite3.Error:
                healthy = False  # a connection in an unknown state is closed, not reused
            self._give(conn, healthy)

    def close(self) -> None:
        with self._free:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._free.notify_all()
        for conn in idle:
            with suppress(sqlite3.Error):
                conn.close()
