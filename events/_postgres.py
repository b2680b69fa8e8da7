"""The event log in PostgreSQL (``pip install 'memwarden[postgres]'``).

Any number of processes on any number of hosts append to one log. Every
write transaction first takes the one row of ``log_head`` ``FOR UPDATE``:
writers queue there, so a seq is the head plus one (gapless by
construction, never a sequence's cached gaps), each event links to the
hash before it, and the head row moves in the same commit as the events.
The events table refuses UPDATE, DELETE and TRUNCATE (triggers; where a
separate role appends, grant it INSERT and SELECT only). Payloads are
``text``: byte for byte what was hashed.

The preparation of a batch (ids, stream versions, the chain) is the one
every backend shares (``_append.prepare_batch``); this module opens the
transactions and reads, ``_postgres_write`` is what a write sends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from ._errors import StorageError, StoreFailed
from ._log_reads import LogReads
from ._models import Event
from ._postgres_driver import postgres_failure
from ._postgres_schema import PlannerStatistics, install_schema
from ._postgres_write import PostgresWriteTransaction, Reactor, Subscriber, look_up
from ._recorded import (
    EMPTY_HEAD,
    ChainReport,
    Head,
    chain_end,
    check_rows,
)
from ._time import Clock, SystemClock
from ._translated import translated
from ._upcasting import LegacyTenants
from ._urls import redacted

_HEAD_FOR_UPDATE = "SELECT seq, hash, recorded_at FROM log_head FOR UPDATE"
_BEGIN_LOCKED = f"BEGIN; {_HEAD_FOR_UPDATE}"


_T = TypeVar("_T")


class _ThreadState(threading.local):
    """What this thread is inside of: a write transaction, a snapshot."""

    writing = False
    reading: psycopg.Connection | None = None


@translated
class PostgresEventLog(LogReads):
    """The append-only, hash-chained event log in one PostgreSQL database.

    ``subscribers`` run inside every write transaction after the events are
    inserted, so they commit or roll back together with the events.
    """

    MARK = "%s"

    def __init__(
        self,
        url: str,
        *,
        clock: Clock | None = None,
        subscribers: Sequence[Subscriber] = (),
        readers: int = 4,
    ) -> None:
        self.url = url
        self.path = redacted(url)
        self.clock: Clock = clock or SystemClock()
        self.subscribers: list[Subscriber] = list(subscribers)
        self.reactors: list[Reactor] = []
        # writes go through one connection under one lock; reads take a
        # connection of the pool, so they never wait for a write (a long
        # revocation, a rebuild) and a server's threads read side by side
        self.conn = psycopg.connect(url, autocommit=True)
        self._closed = False
        # told the new write connection when the server's was lost (the texts hold it)
        self.reopened: list[Callable[[psycopg.Connection], None]] = []
        self._lock = threading.RLock()
        self._thread = _ThreadState()
        self.statistics = PlannerStatistics()
        self._readers = ConnectionPool(
            url, min_size=0, max_size=max(readers, 1), kwargs={"autocommit": True}, num_workers=1, open=False
        )
        with self._lock:
            install_schema(self.conn)
        self.legacy_tenants = LegacyTenants(self._legacy_streams)

    def _driver_error(self, exc: Exception, operation: str) -> StoreFailed | None:
        # before the URL is redacted, no URL: its password must not be printed
        return postgres_failure(exc, self.__dict__.get("path"), operation)

    def _writer(self) -> psycopg.Connection:
        """The write connection (under the lock). One the server dropped (a
        restart, a failover, ``pg_terminate_backend``) is opened again here,
        so writes come back with the database: the write that met the loss
        was refused as unavailable, the next one runs. Only when no write
        transaction is open on it: a loss inside one is that one's failure."""
        if (self.conn.closed or self.conn.broken) and not self._closed:
            self.conn = psycopg.connect(self.url, autocommit=True)
            for told in self.reopened:
                told(self.conn)
        return self.conn

    def ping(self) -> None:
        """One round trip on the write connection (opened again if it was lost)."""
        with self._lock:
            self._writer().execute("SELECT 1")

    def _legacy_streams(self) -> list[tuple[str, str]]:
        """(stream, tenant) of each memory stream's first save written before schema 2."""
        with self._lock:
            rows = (
                self._writer()
                .execute(
                    "SELECT DISTINCT ON (stream) stream, payload::jsonb #>> '{scope,tenant}' FROM events "
                    "WHERE type = 'memory.saved' AND schema_version = 1 ORDER BY stream, seq"
                )
                .fetchall()
            )
        return [(stream, tenant) for stream, tenant in rows if isinstance(tenant, str)]

    # -- writing -----------------------------------------------------------

    def append(self, events: Iterable[Event], expected_version: int | dict[str, int] | None = None) -> list[int]:
        """Append atomically; returns the seq of every event (the original
        seq for an event already in the log). The batch is looked up in
        the round trip that opens the transaction and takes the lock; a
        single event's row then travels with the COMMIT where nothing
        subscribes to the log: two round trips, where a raw one-row commit
        makes three."""
        events = list(events)
        with self.transaction(looking_up=events) as tx:
            # nothing runs after this append in its transaction: where no
            # subscriber or reactor would read it either, one row's write
            # may wait for the commit and travel with it
            tx.defer_single = not self.subscribers and not self.reactors
            return tx.append(events, expected_version)

    @contextmanager
    def transaction(self, *, looking_up: Sequence[Event] = ()) -> Iterator[PostgresWriteTransaction]:
        """One transaction under the head lock; rolled back on any error.

        It opens and takes the lock in one round trip, which every single
        save pays (psycopg's ``transaction()`` would send BEGIN alone);
        ``looking_up`` names the events it is for, looked up in that trip.
        """
        with self._lock:
            self._writer()
            self._thread.writing = True
            try:
                if looking_up and all(isinstance(e, Event) for e in looking_up):
                    tx = self._begin_looking_up(looking_up)
                else:
                    cursor = self.conn.execute(_BEGIN_LOCKED)
                    cursor.nextset()  # past BEGIN's result, to the head row
                    row = cursor.fetchone()
                    tx = PostgresWriteTransaction(self, self.conn, Head(*row) if row else EMPTY_HEAD)
                yield tx
            except BaseException:
                self._end("ROLLBACK")
                raise
            finally:
                self._thread.writing = False
            if self.conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
                # a statement failed and its error was swallowed: COMMIT would
                # quietly roll back, and the caller would believe it appended
                self._end("ROLLBACK")
                raise StorageError(self.path, RuntimeError("a statement of its transaction failed"))
            try:
                if tx.deferred is not None:
                    # a log-only single append: its row, the head's move and
                    # the commit in one round trip
                    with self.conn.pipeline():
                        self.conn.execute(*tx.deferred)
                        self.conn.execute("COMMIT")
                else:
                    self.conn.execute("COMMIT")
            except BaseException:
                self._end("ROLLBACK")
                raise
            self.statistics.after_append(self.conn, tx.head.seq - len(tx.recorded), tx.head.seq)

    def writing(self) -> bool:
        """Whether this thread is inside a write transaction (its reads see it)."""
        return self._thread.writing

    def inside(self) -> bool:
        """Whether this thread is inside a write transaction or a snapshot
        (a read of its own would not see that state)."""
        return self._thread.writing or self._thread.reading is not None

    def _begin_looking_up(self, events: Sequence[Event]) -> PostgresWriteTransaction:
        # pipelined: the statements run in order, the lookup after the lock
        # is held, and their results come back together
        ids = [e.event_id for e in events]
        streams = list(dict.fromkeys(e.stream for e in events))
        with self.conn.pipeline():
            self.conn.execute("BEGIN")
            head = self.conn.execute(_HEAD_FOR_UPDATE)
            found = look_up(self.conn, ids, streams)
        row = head.fetchone()  # the pipeline's one sync, at its end, brought both
        rows = found.fetchall()
        tx = PostgresWriteTransaction(self, self.conn, Head(*row) if row else EMPTY_HEAD)
        tx.prefetched = (ids, streams, rows)
        return tx

    def _end(self, statement: str) -> None:
        if not self.conn.closed and self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            self.conn.execute(statement)

    @contextmanager
    def snapshot(self) -> Iterator[psycopg.Connection]:
        """A read transaction: several statements see one committed state.

        Inside this thread's write transaction it is that transaction (its
        own writes in view); inside another snapshot, that snapshot.
        """
        with self.opened_snapshot() as (conn, _):
            yield conn

    @contextmanager
    def opened_snapshot(
        self, opening: Sequence[str] = ()
    ) -> Iterator[tuple[psycopg.Connection, list[list[tuple[Any, ...]]] | None]]:
        """``snapshot``, with the rows of each ``opening`` statement (no
        parameters) read in its first round trip. The rows are None when the
        snapshot is one already open (a write transaction, an enclosing
        snapshot): the caller reads there itself."""
        state = self._thread
        if state.writing:
            with self._lock:
                yield self.conn, None
            return
        if state.reading is not None:
            yield state.reading, None
            return

        def opened(conn: psycopg.Connection) -> list[list[tuple[Any, ...]]]:
            # one round trip to open it and run what every read of the view
            # asks first (its position, the policies), as one simple query:
            # not BEGIN, SET TRANSACTION, then each statement on its own
            cursor = conn.execute("; ".join(("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", *opening)))
            results: list[list[tuple[Any, ...]]] = []
            while cursor.nextset():  # the first result is BEGIN's
                results.append(cursor.fetchall())
            return results

        with self._live_reader(opened) as (conn, results):
            state.reading = conn
            try:
                yield conn, results
            finally:
                state.reading = None
                if not conn.closed:
                    conn.execute("COMMIT")  # a failed one ends as a rollback

    @contextmanager
    def _live_reader(self, first: Callable[[psycopg.Connection], _T]) -> Iterator[tuple[psycopg.Connection, _T]]:
        """A connection of the read pool with what ``first`` read on it. A
        connection the server closed while it sat in the pool (a restart,
        ``pg_terminate_backend``) fails its first statement, and the ones
        idle beside it were dropped with it: those are let go and ``first``
        tries once more, before anything was read."""
        for last_try in (False, True):
            with self._reader() as conn:
                try:
                    answer = first(conn)
                except psycopg.OperationalError:
                    if last_try or not conn.broken:
                        raise
                    lost = True
                else:
                    lost = False
                    yield conn, answer
                    return
            if lost:
                self._readers.check()

    def _reader(self) -> AbstractContextManager[psycopg.Connection]:
        if self._readers.closed:
            self._readers.open()  # on the first read: a writer-only process opens none
        return self._readers.connection()

    def side_connection(self) -> AbstractContextManager[psycopg.Connection]:
        """A connection of the read pool (autocommit), outside any
        transaction: for work that must not hold the write lock while it
        waits (erasure's vacuum), and for a read made of one statement,
        which is its own snapshot."""
        return self._reader()

    def _fetch(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        state = self._thread
        if state.writing:
            with self._lock:
                return self.conn.execute(self._sql(sql), params).fetchall()
        if state.reading is not None:
            return state.reading.execute(self._sql(sql), params).fetchall()
        with self._live_reader(lambda conn: conn.execute(self._sql(sql), params).fetchall()) as (_, rows):
            return rows

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    # -- auditing ----------------------------------------------------------

    def verify_chain(self, from_seq: int = 1, to_seq: int | None = None) -> ChainReport:
        """Recompute every hash and link from ``from_seq`` to ``to_seq`` with
        the shared check (``check_rows``), in one consistent snapshot; rows
        missing from the end are told by the head row, which still counts them."""
        from_seq = max(from_seq, 1)
        with self.snapshot() as conn:
            head = self.head_in(conn)
            head_row = conn.execute("SELECT seq FROM log_head").fetchone()
            assert head_row is not None  # the schema writes log_head's one row
            issued = int(head_row[0])
            end = head.seq if to_seq is None else min(to_seq, head.seq)
            if from_seq == 1:
                prev = EMPTY_HEAD
            else:
                row = conn.execute(
                    "SELECT seq, hash, recorded_at FROM events WHERE seq = %s", (from_seq - 1,)
                ).fetchone()
                if row is None:
                    return ChainReport(
                        False, head.seq, EMPTY_HEAD.hash, 0, from_seq - 1, f"gap: seq {from_seq - 1} is missing"
                    )
                prev = Head(*row)
            checked, last = 0, prev
            rows = self.rows(from_seq - 1, end)  # on this snapshot: the same connection, under the same lock
            for row, damage in check_rows(rows, prev_seq=prev.seq, prev_hash=prev.hash, prev_time=prev.recorded_at):
                if damage is not None:
                    return ChainReport(False, head.seq, last.hash, checked, damage.first_bad, damage.problem)
                checked += 1
                last = Head(row[0], row[11], row[6])
        return chain_end(head.seq, last, checked, end=end, issued=issued, whole=to_seq is None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self.conn.close()
        self._readers.close()
