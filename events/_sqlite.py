"""The default log: one SQLite file, WAL, hash-chained, append-only."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from ._append import Existing, PublishingWrite, check_imported, prepare_batch
from ._errors import LogDamaged, StorageError, StoreFailed
from ._log_reads import LogReads
from ._recorded import (
    ROW_COLUMNS,
    ROW_WIDTH,
    ChainReport,
    Head,
    RecordedEvent,
    imported_tail,
)
from ._sqlite_chain import verify_chain
from ._sqlite_connect import Synchronous, connect, sqlite_failure, storage_failure
from ._sqlite_readers import ReaderPool
from ._time import Clock, SystemClock
from ._upcasting import LegacyTenants

if TYPE_CHECKING:
    from ._models import Event
from ._translated import translated

Subscriber = Callable[[sqlite3.Connection, Sequence[RecordedEvent]], None]

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    stream TEXT NOT NULL,
    stream_version INTEGER NOT NULL,
    occurred_at TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    actor TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    payload TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    UNIQUE (stream, stream_version)
);
-- the few revocations and policy changes, found without a scan by every
-- fold of one memory (explain, the view as of a past seq)
CREATE INDEX IF NOT EXISTS events_context ON events (seq)
    WHERE type IN ('policy.version_changed', 'revocation.issued');
CREATE TRIGGER IF NOT EXISTS events_refuse_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'memwarden: the event log is append-only; UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS events_refuse_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'memwarden: the event log is append-only; DELETE refused'); END;
"""

_INSERT = f"INSERT INTO events ({ROW_COLUMNS}) VALUES ({', '.join('?' * ROW_WIDTH)})"

# when a write transaction's pages are given back (``_release_pages``): after
# one that changed this many rows (a batch, a sweep, a cascade), and after
# every this many commits of any size
RELEASE_AFTER_ROWS = 1000
RELEASE_EVERY = 256


def legacy_tenants(conn: sqlite3.Connection, lock: threading.RLock | None = None) -> LegacyTenants:
    """The tenants of memory streams written before schema 2, read from
    ``conn``'s events (the first save of each such stream)."""

    def load() -> list[tuple[str, str]]:
        # a bare column beside min(): SQLite takes it from the row with the
        # smallest seq, the stream's first save
        sql = (
            "SELECT stream, json_extract(payload, '$.scope.tenant'), min(seq) FROM events "
            "WHERE type = 'memory.saved' AND schema_version = 1 GROUP BY stream"
        )
        if lock is None:
            rows = conn.execute(sql).fetchall()
        else:
            with lock:
                rows = conn.execute(sql).fetchall()
        return [(stream, tenant) for stream, tenant, _ in rows if isinstance(tenant, str)]

    return LegacyTenants(load)


class WriteTransaction(PublishingWrite):
    """A write transaction holding the database's write lock.

    Reads through ``conn`` see a state no other writer can change until
    commit, so checks made here (is this scope revoked?) hold for the
    events appended here.
    """

    def __init__(self, log: SQLiteEventLog, conn: sqlite3.Connection) -> None:
        self.log = log
        self.conn = conn
        self.recorded: list[RecordedEvent] = []
        self._head = log.head_in(conn)

    @property
    def head(self) -> Head:
        return self._head

    def holds(self, event_id: str) -> bool:
        """Whether the log, as this transaction sees it, has an event ``event_id``."""
        return self.conn.execute("SELECT 1 FROM events WHERE event_id = ?", (event_id,)).fetchone() is not None

    def held(self, event_ids: Sequence[str]) -> set[str]:
        """Those of ``event_ids`` the log holds, as this transaction sees it."""
        return set(self._find_existing(list(event_ids)))

    def append(self, events: Iterable[Event], expected_version: int | dict[str, int] | None = None) -> list[int]:
        return self._append(events, expected_version)[0]

    def _append(
        self, events: Iterable[Event], expected_version: int | dict[str, int] | None
    ) -> tuple[list[int], list[RecordedEvent]]:
        batch = prepare_batch(
            events,
            head=self._head,
            clock=self.log.clock,
            lookup=self._lookup,
            expected_version=expected_version,
        )
        if batch.records:
            self.conn.executemany(
                _INSERT,
                [r.row() for r in batch.records],
            )
            assert batch.head is not None
            self._head = batch.head  # before publishing: reactors append after it
            self._publish(batch.records)
        return batch.positions, batch.records

    def append_recorded(self, records: Sequence[RecordedEvent]) -> int:
        """Write already-chained events (an import), keeping seq and hashes.

        Events the log already holds must be the very same (same hash);
        the first new one must link to the current head.
        """

        def held(seqs: list[int]) -> dict[int, str]:
            found: dict[int, str] = {}
            for start in range(0, len(seqs), 500):  # within SQLite's bound on parameters
                chunk = seqs[start : start + 500]
                marks = ", ".join("?" * len(chunk))
                found.update(self.conn.execute(f"SELECT seq, hash FROM events WHERE seq IN ({marks})", chunk))
            return found

        new = imported_tail(records, self._head, held)
        check_imported(new, self.log.clock)
        if new:
            try:
                self.conn.executemany(_INSERT, [r.row() for r in new])
            except sqlite3.IntegrityError as exc:
                raise LogDamaged(f"the import repeats an event id or stream version: {exc}") from None
            self._publish(new, react=False)
            self._head = Head(new[-1].seq, new[-1].hash, new[-1].recorded_at)
        return len(new)

    def _lookup(self, event_ids: list[str], streams: list[str]) -> tuple[dict[str, Existing], dict[str, int]]:
        return self._find_existing(event_ids), self._stream_versions(streams)

    def _find_existing(self, event_ids: list[str]) -> dict[str, Existing]:
        found: dict[str, Existing] = {}
        for start in range(0, len(event_ids), 500):
            chunk = event_ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for event_id, seq, type_, stream, payload in self.conn.execute(
                f"SELECT event_id, seq, type, stream, payload FROM events WHERE event_id IN ({marks})",
                chunk,
            ):
                found[event_id] = (seq, type_, stream, payload)
        return found

    def _stream_versions(self, streams: list[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        for start in range(0, len(streams), 500):
            chunk = streams[start : start + 500]
            # one step down the (stream, stream_version) index a stream, not
            # a max over its events (which a batch repeating one id made
            # quadratic: one append an item, each scanning the stream)
            found.update(
                (stream, version)
                for stream, version in self.conn.execute(
                    "SELECT s.value, (SELECT stream_version FROM events WHERE stream = s.value "
                    "ORDER BY stream_version DESC LIMIT 1) FROM json_each(?) AS s",
                    (json.dumps(chunk),),
                )
                if version is not None
            )
        return found


@translated
class SQLiteEventLog(LogReads):
    """The append-only, hash-chained event log in one SQLite database.

    ``subscribers`` run inside every write transaction after the events are
    inserted (memwarden's inline projections), so they commit or roll back
    together with the events.
    """

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        clock: Clock | None = None,
        synchronous: Synchronous = "FULL",
        busy_timeout: float = 60.0,
        subscribers: Sequence[Subscriber] = (),
        mmap_mb: int = 1024,
        cache_mb: int = 64,
    ) -> None:
        self.path = str(path)
        self.clock: Clock = clock or SystemClock()
        self.subscribers: list[Subscriber] = list(subscribers)
        # called after the subscribers with (transaction, new events); may append
        self.reactors: list[Callable[[WriteTransaction, Sequence[RecordedEvent]], None]] = []
        self.conn = connect(
            path, synchronous=synchronous, busy_timeout=busy_timeout, mmap_mb=mmap_mb, cache_mb=cache_mb
        )
        self._lock = threading.RLock()
        self._commits = 0
        # called after the page cache is given back: none in a library, whose
        # process's heap is its application's; a server entry point may
        # return the freed heap to the OS (``faces/_cli_serve``)
        self.after_release: list[Callable[[], object]] = []
        self._readers = ReaderPool(
            self.path,
            lambda: connect(
                path, synchronous=synchronous, busy_timeout=busy_timeout, mmap_mb=mmap_mb, cache_mb=cache_mb
            ),
        )
        self.legacy_tenants = legacy_tenants(self.conn, self._lock)
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in SCHEMA.split(";\n"):
                    if statement.strip():
                        self.conn.execute(statement)
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise

    # -- writing -----------------------------------------------------------

    def _driver_error(self, exc: Exception, operation: str) -> StoreFailed | None:
        return sqlite_failure(exc, self.__dict__.get("path"), operation)

    @contextmanager
    def transaction(self) -> Iterator[WriteTransaction]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``; rolls back on any error."""
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                tx = WriteTransaction(self, self.conn)
                changes = self.conn.total_changes
                yield tx
                self.conn.execute("COMMIT")
            except BaseException as exc:
                if self.conn.in_transaction:
                    # after an I/O error SQLite may already have rolled back
                    with suppress(sqlite3.Error):
                        self.conn.execute("ROLLBACK")
                # a store call inside the transaction (the texts') has named
                # the driver's error already: a full disk is told by its cause
                failure = exc.__cause__ if isinstance(exc, StoreFailed) else exc
                if isinstance(failure, sqlite3.OperationalError) and storage_failure(failure):
                    raise StorageError(self.path, failure) from failure
                raise
            # committed: nothing after this may report the write as failed
            with suppress(sqlite3.Error):
                self._release_pages(self.conn.total_changes - changes)

    def _release_pages(self, changed: int) -> None:
        """Give back the page cache's clean pages after a large write, and
        now and then after small ones. A transaction's changed pages need
        the cache until it commits (``cache_mb`` bounds them); after that
        they are copies of what the file holds, and reads come through the
        memory map. Kept, they would fill the cache's bound for good, and a
        long-lived process's private memory with them.
        The next transactions read the pages they need again."""
        self._commits += 1
        if changed >= RELEASE_AFTER_ROWS or self._commits % RELEASE_EVERY == 0:
            self.conn.execute("PRAGMA shrink_memory")
            for released in self.after_release:
                released()

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: several statements see one committed state."""
        with self._lock:
            if self.conn.in_transaction:
                yield self.conn  # already inside a write transaction
                return
            self.conn.execute("BEGIN")
            try:
                yield self.conn
            finally:
                self.conn.execute("COMMIT")

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """A read transaction that does not wait for writers: on a connection
        of its own (``_sqlite_readers``); inside this thread's own write
        transaction or read transaction, that one's."""
        if self._readers.shared:
            with self.snapshot() as conn:
                yield conn
            return
        # held by this thread (reentrant) or by nobody: a write transaction
        # open on the connection is then this thread's own
        if self._lock.acquire(blocking=False):
            try:
                if self.conn.in_transaction:
                    yield self.conn
                    return
            finally:
                self._lock.release()
        with self._readers.transaction() as conn:
            yield conn

    def _read_conn(self) -> AbstractContextManager[sqlite3.Connection]:
        # the log's reads go beside a write transaction too: an explain, the
        # console's memory page or an export reading the log never waits for
        # a batch's commit (the rows are append-only: a page read on a reader
        # is the page the writer would have read)
        return self.reading()

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    def quick_check(self) -> list[str]:
        """What SQLite's own check finds wrong with the file ([] if nothing);
        raises the driver's DatabaseError if it cannot even look."""
        with self._lock:
            rows = self.conn.execute("PRAGMA quick_check").fetchall()
        return [r[0] for r in rows if r[0] != "ok"]

    def checkpoint(self) -> bool:
        """Move the write-ahead log into the database file and truncate it,
        so that what was overwritten (erased text) leaves the WAL. False
        when a reader's snapshot kept it from finishing (the next one does)."""
        with self._lock:
            row = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return row is None or row[0] == 0

    # -- auditing ----------------------------------------------------------

    def verify_chain(self, from_seq: int = 1, to_seq: int | None = None, *, workers: int | None = None) -> ChainReport:
        """Recompute every hash and link from ``from_seq`` to ``to_seq``.

        Reports the first bad seq and what is wrong with it: a hash that
        does not match the content, a prev_hash that does not link, a gap,
        a reordering, or rows missing from the end. A long range is split
        across processes (hashing is the cost).
        """
        return verify_chain(self, from_seq, to_seq, workers=workers)

    def close(self) -> None:
        self._readers.close()
        with self._lock:
            self.conn.close()
