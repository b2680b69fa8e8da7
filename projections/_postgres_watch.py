"""What many processes on one PostgreSQL database tell each other.

Every write transaction NOTIFYs ``memwarden_log`` with the new head's seq;
PostgreSQL delivers it at the commit, to every process LISTENing. A
``LogWatcher`` listens on a connection of its own: it wakes long-polls
waiting for new events and hands each new revocation to the callbacks (a
scheduler's read-back), on whichever node it was issued. A notification
can be lost (a dropped connection, a restart), so the watcher also looks
at the log head every ``poll`` seconds: a missed one costs that delay,
never the event.

Scheduler jobs are claimed with session advisory locks (``Claims``): a job
one process holds is skipped by the others, and when that process dies its
connection closes and PostgreSQL releases the lock at once, so the next
node to look takes the job over.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from memwarden.events import QmarkConnection, get_logger
from memwarden.events.postgres import NOTIFY_CHANNEL as CHANNEL

log = get_logger("memwarden")


class LogWatcher:
    """Follows the log head of one database from a connection of its own."""

    def __init__(self, url: str, *, poll: float = 0.5) -> None:
        self.url = url
        self.poll = poll
        self.head = 0
        self._seen = 0  # the last seq whose revocations were handed out
        self._changed = threading.Condition()
        self._callbacks: list[Callable[[str], None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def start(self) -> None:
        with self._start_lock:
            if self._thread is not None:
                return
            conn = psycopg.connect(self.url, autocommit=True)
            conn.execute(f"LISTEN {CHANNEL}")
            self.head = self._seen = self._head(conn)
            self._thread = threading.Thread(target=self._run, args=(conn,), name="memwarden-watch", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            try:  # wakes the thread now, not at its next poll
                with psycopg.connect(self.url, autocommit=True, connect_timeout=2) as conn:
                    conn.execute(f"NOTIFY {CHANNEL}")
            except psycopg.Error:
                pass
            self._thread.join(timeout=self.poll * 4)

    def on_revocation(self, callback: Callable[[str], None]) -> None:
        """Call ``callback`` with the id of every revocation committed from now on, by any process."""
        self._callbacks.append(callback)
        self.start()

    def wait(self, after_seq: int, timeout: float) -> int:
        """Block until the log holds an event after ``after_seq`` or ``timeout``
        seconds pass; the head as last seen."""
        self.start()
        with self._changed:
            self._changed.wait_for(lambda: self.head > after_seq or self._stop.is_set(), timeout=timeout)
            return self.head

    # -- the thread -------------------------------------------------------------

    @staticmethod
    def _head(conn: psycopg.Connection[Any]) -> int:
        return int(conn.execute("SELECT seq FROM log_head").fetchone()[0])  # type: ignore[index]

    def _run(self, conn: psycopg.Connection[Any]) -> None:
        try:
            while not self._stop.is_set():
                try:
                    # wakes at a notification, or after poll seconds without one
                    for _ in conn.notifies(timeout=self.poll, stop_after=1):
                        pass
                    self._look(conn)
                except psycopg.OperationalError as exc:
                    log.warning("log_watch_reconnecting", problem=str(exc).strip().splitlines()[0])
                    conn = self._reconnect(conn)
        finally:
            conn.close()

    def _reconnect(self, old: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
        old.close()
        while not self._stop.wait(self.poll):
            try:
                conn = psycopg.connect(self.url, autocommit=True)
                conn.execute(f"LISTEN {CHANNEL}")
                return conn
            except psycopg.OperationalError:
                continue
        return psycopg.connect(self.url, autocommit=True)

    def _look(self, conn: psycopg.Connection[Any]) -> None:
        head = self._head(conn)
        if head <= self.head:
            return
        revocations = conn.execute(
            "SELECT payload::jsonb ->> 'revocation_id' FROM events "
            "WHERE type = 'revocation.issued' AND seq > %s AND seq <= %s ORDER BY seq",
            (self._seen, head),
        ).fetchall()
        self._seen = head
        with self._changed:
            self.head = head
            self._changed.notify_all()
        for (revocation_id,) in revocations:
            for callback in list(self._callbacks):
                try:
                    callback(revocation_id)
                except Exception:  # a listener's failure must not stop the watch
                    log.exception("revocation_listener_failed", revocation_id=revocation_id)


class Claims:
    """Session advisory locks on a connection of their own: one process at
    a time holds a named job."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    @contextmanager
    def claim(self, job: str) -> Iterator[bool]:
        with self._lock:
            if self._conn is None or self._conn.closed:
                self._conn = psycopg.connect(self.url, autocommit=True)
            held = bool(
                self._conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (job,)).fetchone()[0]  # type: ignore[index]
            )
        try:
            yield held
        finally:
            if held:
                with self._lock:
                    assert self._conn is not None
                    self._conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (job,))

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()


class Replica:
    """A streaming replica to read from, on a connection of its own."""

    def __init__(self, url: str, wait: float) -> None:
        self.url = url
        self.wait = wait
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.RLock()

    @contextmanager
    def snapshot(self, floor: int, projector: Any) -> Iterator[psycopg.Connection[Any] | None]:
        """A read transaction on the replica once its view has applied
        ``floor`` (polled up to ``wait`` seconds); None if it has not, or
        cannot be reached: the caller reads the primary instead."""
        deadline = time.monotonic() + self.wait
        with self._lock:
            conn = self._ready(floor, projector, deadline)
            if conn is None:
                yield None
                return
            try:
                yield conn  # the caller's reads, in the transaction _ready opened
            finally:
                conn.execute("COMMIT")

    def _ready(self, floor: int, projector: Any, deadline: float) -> psycopg.Connection[Any] | None:
        while True:
            try:
                conn = self._connected()
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                if projector.position(QmarkConnection(conn)) >= floor:
                    return conn
                conn.execute("ROLLBACK")
            except psycopg.OperationalError as exc:
                log.warning("replica_unreachable", problem=str(exc).strip().splitlines()[0])
                self._drop()
                return None
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.01)

    def _connected(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=3)
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def close(self) -> None:
        with self._lock:
            self._drop()
