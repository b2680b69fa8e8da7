"""What a PostgreSQL write transaction sends: the batch's lookup, its rows
(one statement for one row, a streamed COPY for many, executemany between)
and the head's move with its NOTIFY. ``_postgres.PostgresEventLog`` opens
the transaction and holds its lock; this module is what runs inside it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import psycopg
from psycopg.copy import LibpqWriter

from ._append import Existing, PublishingWrite, check_imported, prepare_batch
from ._errors import LogDamaged
from ._models import Event
from ._recorded import ROW_COLUMNS, ROW_WIDTH, Head, RecordedEvent, Row, imported_tail
from ._time import Clock

# every commit that appends tells the processes LISTENing here its new head
NOTIFY_CHANNEL = "memwarden_log"

# bulk imports go through COPY from this many rows on
_COPY_FROM = 64
# a streamed COPY reaches the server every this many bytes
_STREAM_FLUSH = 64 * 1024

_COPY = f"COPY events ({ROW_COLUMNS}) FROM STDIN"
_VALUES = ", ".join(["%s"] * ROW_WIDTH)
_INSERT = f"INSERT INTO events ({ROW_COLUMNS}) VALUES ({_VALUES})"
# the head moves and the processes LISTENing hear of it (pg_notify is
# delivered at the commit, never for a rollback)
_MOVE_HEAD = f"UPDATE log_head SET seq = %s, hash = %s, recorded_at = %s RETURNING pg_notify('{NOTIFY_CHANNEL}', %s)"
_INSERT_ONE = f"WITH inserted AS (INSERT INTO events ({ROW_COLUMNS}) VALUES ({_VALUES})) " + _MOVE_HEAD
# which of a batch's event ids the log holds, and each of its streams' last
# version, in one round trip (rows of the second kind have no event_id). A
# stream's last version is one step down the (stream, stream_version)
# index, not a max over the stream's events: a batch saving one id again
# and again appends once per item, and each append's lookup stays cheap
LOOKUP = (
    "SELECT event_id, seq, type, stream, payload FROM events WHERE event_id = ANY(string_to_array(%s, chr(31))) "
    "UNION ALL SELECT NULL, last.stream_version, NULL, s.stream, NULL "
    "FROM unnest(string_to_array(%s, chr(31))) AS s(stream) CROSS JOIN LATERAL "
    "(SELECT stream_version FROM events WHERE events.stream = s.stream "
    "ORDER BY stream_version DESC LIMIT 1) AS last"
)
_ID_SEPARATOR = "\x1f"
# a lookup of up to this many ids is planned at each call, never prepared
_PLANNED_EACH_TIME = 16


def id_array(values: Sequence[str]) -> str:
    """Identifiers as one text for ``string_to_array(%s, chr(31))``.

    psycopg dumps a list element by element in Python, many times the cost
    of one string on the append path's lookup.
    Identifiers hold no control character, so the separator splits exactly.
    """
    joined = _ID_SEPARATOR.join(values)
    if joined.count(_ID_SEPARATOR) != max(len(values) - 1, 0):
        raise ValueError("an identifier holds a control character (U+001F)")
    return joined


def look_up(conn: psycopg.Connection, event_ids: Sequence[str], streams: Sequence[str]) -> psycopg.Cursor[Any]:
    """Send ``LOOKUP`` for a batch's ids and streams (in a pipeline: the
    rows come at its sync).

    A small batch's lookup is planned afresh each time. A prepared one keeps
    the generic plan PostgreSQL makes at its sixth run, and on a fresh store
    that plan was made while the log was a page long: it scans the whole
    events table on every append ever after, so a single append grows
    slower with the log until an ANALYZE replans it. A large batch's lookup stays
    prepared: planning a thousand ids costs more than the scan it avoids.
    """
    prepare = None if len(event_ids) > _PLANNED_EACH_TIME else False
    return conn.execute(LOOKUP, (id_array(event_ids), id_array(streams)), prepare=prepare)


def _moved(head: Head) -> tuple[object, ...]:
    return (head.seq, head.hash, head.recorded_at, str(head.seq))


class _CopyStream:
    """Chained records sent to ``COPY events`` one by one, the COPY opened
    by the first (after the batch's lookup, which needs the connection)."""

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor
        self._opened: AbstractContextManager[psycopg.Copy] | None = None
        self._copy: psycopg.Copy | None = None

    def send(self, record: RecordedEvent) -> None:
        if self._copy is None:
            # psycopg holds up to 1 MB before flushing: a batch would reach
            # the server only at its end, and nothing would overlap
            writer = LibpqWriter(self._cursor, flush_threshold=_STREAM_FLUSH)
            self._opened = self._cursor.copy(_COPY, writer=writer)
            self._copy = self._opened.__enter__()
        self._copy.write_row(record.row())

    def __enter__(self) -> _CopyStream:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._opened is not None:
            self._opened.__exit__(*exc_info)  # an error propagating ends the COPY as failed


# runs in every write transaction after its events are written, on its connection
Subscriber = Callable[[psycopg.Connection, Sequence[RecordedEvent]], None]
# runs after the subscribers and may append what the new events imply
Reactor = Callable[["PostgresWriteTransaction", Sequence[RecordedEvent]], None]


class Publishing(Protocol):
    """What a transaction needs of the log that opened it (``PostgresEventLog``),
    named here so that this module need not import the log back."""

    clock: Clock
    subscribers: list[Subscriber]
    reactors: list[Reactor]


class PostgresWriteTransaction(PublishingWrite):
    """A write transaction holding the log head's row lock: no other writer,
    on any host, appends until it commits."""

    def __init__(self, log: Publishing, conn: psycopg.Connection, head: Head) -> None:
        self.log = log
        self.conn = conn
        self.recorded: list[RecordedEvent] = []
        self._head = head
        # the lookup of the batch the transaction was opened for, read with its lock
        self.prefetched: tuple[list[str], list[str], list[tuple[Any, ...]]] | None = None
        # a single row's write held back to be sent with the COMMIT
        self.defer_single = False
        self.deferred: tuple[str, tuple[Any, ...]] | None = None

    @property
    def head(self) -> Head:
        return self._head

    def holds(self, event_id: str) -> bool:
        return self.conn.execute("SELECT 1 FROM events WHERE event_id = %s", (event_id,)).fetchone() is not None

    def held(self, event_ids: Sequence[str]) -> set[str]:
        """Those of ``event_ids`` the log holds, as this transaction sees it: one round trip."""
        rows = self.conn.execute("SELECT event_id FROM events WHERE event_id = ANY(%s)", (list(event_ids),))
        return {row[0] for row in rows}

    def append(self, events: Iterable[Event], expected_version: int | dict[str, int] | None = None) -> list[int]:
        events = list(events)
        # a big batch goes to COPY row by row as it is chained: the server
        # inserts the first rows while Python hashes the next; an error
        # aborts the COPY, and the transaction with it
        streamed = len(events) >= _COPY_FROM
        with self.conn.cursor() as cur, _CopyStream(cur) as stream:
            batch = prepare_batch(
                events,
                head=self._head,
                clock=self.log.clock,
                lookup=self._lookup,
                expected_version=expected_version,
                emit=stream.send if streamed else None,
            )
        if batch.records:
            assert batch.head is not None
            if streamed:
                self._move_head(batch.head)
            else:
                self._write([r.row() for r in batch.records], batch.head)
        if batch.records:
            self._publish(batch.records)
        return batch.positions

    def append_recorded(self, records: Sequence[RecordedEvent]) -> int:
        """Write already-chained events (an import), keeping seq and hashes.

        Events the log already holds must be the very same (same hash);
        the first new one must link to the current head.
        """

        def held(seqs: list[int]) -> dict[int, str]:
            return dict(self.conn.execute("SELECT seq, hash FROM events WHERE seq = ANY(%s)", (seqs,))) if seqs else {}

        new = imported_tail(records, self._head, held)
        check_imported(new, self.log.clock)
        if new:
            try:
                self._write([r.row() for r in new], Head(new[-1].seq, new[-1].hash, new[-1].recorded_at))
            except psycopg.errors.UniqueViolation as exc:
                raise LogDamaged(f"the import repeats an event id or stream version: {exc}") from None
            self._publish(new, react=False)
        return len(new)

    def _write(self, rows: list[Row], head: Head) -> None:
        with self.conn.cursor() as cur:
            if len(rows) == 1:
                # a single save's write is one round trip: the row, the head, the notice
                if self.defer_single and self.deferred is None:
                    self.deferred = (_INSERT_ONE, (*rows[0], *_moved(head)))
                else:
                    cur.execute(_INSERT_ONE, (*rows[0], *_moved(head)))
                self._head = head
                return
            if len(rows) >= _COPY_FROM:
                with cur.copy(_COPY) as copy:
                    for row in rows:
                        copy.write_row(row)
            else:
                cur.executemany(_INSERT, rows)
        self._move_head(head)

    def _move_head(self, head: Head) -> None:
        self.conn.execute(_MOVE_HEAD, _moved(head))
        self._head = head  # before publishing: reactors append after it

    def _lookup(self, event_ids: list[str], streams: list[str]) -> tuple[dict[str, Existing], dict[str, int]]:
        existing: dict[str, Existing] = {}
        versions: dict[str, int] = {}
        prefetched, self.prefetched = self.prefetched, None
        if prefetched is not None and prefetched[:2] == (event_ids, streams):
            rows: Iterable[tuple[Any, ...]] = prefetched[2]
        else:
            rows = look_up(self.conn, event_ids, streams)
        for event_id, seq, type_, stream, payload in rows:
            if event_id is None:
                versions[stream] = int(seq)
            else:
                existing[event_id] = (seq, type_, stream, payload)
        return existing, versions
