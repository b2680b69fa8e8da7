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
every backend shares (``_append.prepare_batch``); this module is only
PostgreSQL's statements.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from ._append import Existing, prepare_batch
from ._canonical import GENESIS_HASH
from ._errors import LogDamaged, LogDiverged
from ._log_reads import LogReads
from ._models import Event
from ._recorded import (
    EMPTY_HEAD,
    ROW_COLUMNS,
    ChainReport,
    Head,
    LegacyTenants,
    RecordedEvent,
    Row,
    check_rows,
)
from ._texts import TextStore
from ._time import Clock, SystemClock

Subscriber = Callable[[psycopg.Connection, Sequence[RecordedEvent]], None]

# every commit that appends tells the processes LISTENing here its new head
NOTIFY_CHANNEL = "memwarden_log"

# bulk imports go through COPY from this many rows on
_COPY_FROM = 64

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS events (
        seq bigint PRIMARY KEY,
        event_id text NOT NULL UNIQUE,
        type text NOT NULL,
        stream text NOT NULL,
        stream_version bigint NOT NULL,
        occurred_at text NOT NULL,
        recorded_at text NOT NULL,
        actor text NOT NULL,
        schema_version integer NOT NULL,
        payload text NOT NULL,
        prev_hash text NOT NULL,
        hash text NOT NULL,
        UNIQUE (stream, stream_version)
    )""",
    "CREATE INDEX IF NOT EXISTS events_by_type ON events (type, seq)",
    # the one row every writer locks first; its seq is what was issued, so a
    # log whose last rows went missing is told from one that ends there
    """CREATE TABLE IF NOT EXISTS log_head (
        only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
        seq bigint NOT NULL,
        hash text NOT NULL,
        recorded_at text
    )""",
    f"INSERT INTO log_head (seq, hash, recorded_at) VALUES (0, '{GENESIS_HASH}', NULL) ON CONFLICT DO NOTHING",
    """CREATE OR REPLACE FUNCTION memwarden_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'memwarden: the event log is append-only; % refused', TG_OP
            USING ERRCODE = 'insufficient_privilege';
    END $$""",
    """CREATE OR REPLACE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
        FOR EACH ROW EXECUTE FUNCTION memwarden_append_only()""",
    """CREATE OR REPLACE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
        FOR EACH STATEMENT EXECUTE FUNCTION memwarden_append_only()""",
    """CREATE OR REPLACE FUNCTION memwarden_head_forward() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.seq < OLD.seq THEN
            RAISE EXCEPTION 'memwarden: the log head only moves forward (% to %)', OLD.seq, NEW.seq
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN NEW;
    END $$""",
    """CREATE OR REPLACE TRIGGER log_head_forward BEFORE UPDATE ON log_head
        FOR EACH ROW EXECUTE FUNCTION memwarden_head_forward()""",
    """CREATE OR REPLACE TRIGGER log_head_kept BEFORE DELETE OR TRUNCATE ON log_head
        FOR EACH STATEMENT EXECUTE FUNCTION memwarden_append_only()""",
)

_INSERT = f"INSERT INTO events ({ROW_COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
_MOVE_HEAD = "UPDATE log_head SET seq = %s, hash = %s, recorded_at = %s"


@functools.lru_cache(maxsize=1024)
def _qmark(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


class QmarkConnection:
    """A psycopg connection that takes the ``?`` marks of the SQL both
    backends share (the view's questions, the fold's set statements), so
    each is written once. A literal ``%`` survives; no shared statement
    holds a ``?`` of its own (PostgreSQL's jsonb ``?`` operators are never
    used through this)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.raw = conn

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        if sql.startswith("SELECT") and any(type(p) is str and "\x00" in p for p in parameters):
            # PostgreSQL's text holds no NUL, so nothing stored equals a value
            # with one (identifiers refuse control characters on the way in):
            # a lookup of one finds nothing, as on SQLite, instead of failing
            parameters = [p.replace("\x00", "\ufffe") if type(p) is str else p for p in parameters]
        return self.raw.execute(_qmark(sql), parameters)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]]) -> psycopg.Cursor[Any]:
        cursor = self.raw.cursor()
        cursor.executemany(_qmark(sql), parameters)
        return cursor


class PostgresTextStore(TextStore):
    """Each memory version's summary and content as ``bytea``: UTF-8 bytes
    as they were hashed. An erasure deletes the rows; the store's purge
    (``VACUUM FULL`` after it commits) rewrites the table files without
    them (README, "Erasure on PostgreSQL")."""

    # keyed in the view's collation ("C"): a join from memories walks this key
    SCHEMA = (
        """CREATE TABLE IF NOT EXISTS texts (
            tenant text COLLATE "C" NOT NULL, memory_id text COLLATE "C" NOT NULL, version bigint NOT NULL,
            summary bytea, content bytea,
            PRIMARY KEY (tenant, memory_id, version)
        )""",
    )
    CONTENT = "t.content"
    SUMMARY = "convert_from(t.summary, 'UTF8')"
    SUMMARY_BYTES = "t.summary"

    def __init__(self, conn: psycopg.Connection) -> None:
        super().__init__(QmarkConnection(conn))


def redacted(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    user = f"{parts.username}:***@" if parts.username else ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit((parts.scheme, f"{user}{host}{port}", parts.path, parts.query, parts.fragment))


class PostgresWriteTransaction:
    """A write transaction holding the log head's row lock: no other writer,
    on any host, appends until it commits."""

    def __init__(self, log: PostgresEventLog, conn: psycopg.Connection) -> None:
        self.log = log
        self.conn = conn
        self.recorded: list[RecordedEvent] = []
        row = conn.execute("SELECT seq, hash, recorded_at FROM log_head FOR UPDATE").fetchone()
        self._head = Head(*row) if row else EMPTY_HEAD

    @property
    def head(self) -> Head:
        return self._head

    def holds(self, event_id: str) -> bool:
        return self.conn.execute("SELECT 1 FROM events WHERE event_id = %s", (event_id,)).fetchone() is not None

    def append(self, events: Iterable[Event], expected_version: int | dict[str, int] | None = None) -> list[int]:
        batch = prepare_batch(
            events,
            head=self._head,
            clock=self.log.clock,
            find_existing=self._find_existing,
            stream_versions=self._stream_versions,
            expected_version=expected_version,
        )
        if batch.records:
            assert batch.head is not None
            self._write([r.row() for r in batch.records], batch.head)
            self._publish(batch.records)
        return batch.positions

    def append_recorded(self, records: Sequence[RecordedEvent]) -> int:
        """Write already-chained events (an import), keeping seq and hashes.

        Events the log already holds must be the very same (same hash);
        the first new one must link to the current head.
        """
        new: list[RecordedEvent] = []
        held = [r.seq for r in records if r.seq <= self._head.seq]
        hashes = dict(self.conn.execute("SELECT seq, hash FROM events WHERE seq = ANY(%s)", (held,))) if held else {}
        for record in records:
            if record.seq <= self._head.seq:
                if hashes.get(record.seq) != record.hash:
                    raise LogDiverged(record.seq, "the import disagrees with the event the log holds at this seq")
                continue
            expected_prev = new[-1].hash if new else self._head.hash
            expected_seq = (new[-1].seq if new else self._head.seq) + 1
            if record.seq != expected_seq or record.prev_hash != expected_prev:
                raise LogDiverged(record.seq, f"does not continue the log's head (seq {expected_seq - 1})")
            new.append(record)
        if new:
            try:
                self._write([r.row() for r in new], Head(new[-1].seq, new[-1].hash, new[-1].recorded_at))
            except psycopg.errors.UniqueViolation as exc:
                raise LogDamaged(f"the import repeats an event id or stream version: {exc}") from None
            self._publish(new, react=False)
        return len(new)

    def _write(self, rows: list[Row], head: Head) -> None:
        with self.conn.cursor() as cur:
            if len(rows) >= _COPY_FROM:
                with cur.copy(f"COPY events ({ROW_COLUMNS}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
            else:
                cur.executemany(_INSERT, rows)
            cur.execute(_MOVE_HEAD, (head.seq, head.hash, head.recorded_at))
            # delivered at the commit, never for a rollback
            cur.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, str(head.seq)))
        self._head = head  # before publishing: reactors append after it

    def _publish(self, records: list[RecordedEvent], *, react: bool = True) -> None:
        self.recorded.extend(records)
        for subscriber in self.log.subscribers:
            subscriber(self.conn, records)
        if react:
            for reactor in self.log.reactors:
                reactor(self, records)

    def _find_existing(self, event_ids: list[str]) -> dict[str, Existing]:
        rows = self.conn.execute(
            "SELECT event_id, seq, type, stream, payload FROM events WHERE event_id = ANY(%s)", (event_ids,)
        )
        return {event_id: (seq, type_, stream, payload) for event_id, seq, type_, stream, payload in rows}

    def _stream_versions(self, streams: list[str]) -> dict[str, int]:
        rows = self.conn.execute(
            "SELECT stream, max(stream_version) FROM events WHERE stream = ANY(%s) GROUP BY stream", (streams,)
        )
        return {stream: int(version) for stream, version in rows}


class PostgresEventLog(LogReads):
    """The append-only, hash-chained event log in one PostgreSQL database.

    ``subscribers`` run inside every write transaction after the events are
    inserted, so they commit or roll back together with the events.
    """

    MARK = "%s"

    def __init__(self, url: str, *, clock: Clock | None = None, subscribers: Sequence[Subscriber] = ()) -> None:
        self.url = url
        self.path = redacted(url)
        self.clock: Clock = clock or SystemClock()
        self.subscribers: list[Subscriber] = list(subscribers)
        self.reactors: list[Callable[[PostgresWriteTransaction, Sequence[RecordedEvent]], None]] = []
        self.conn = psycopg.connect(url, autocommit=True)
        self._lock = threading.RLock()
        with self._lock, self.conn.transaction():
            # one process creates the schema at a time (CREATE ... IF NOT
            # EXISTS is not safe against a concurrent CREATE)
            self.conn.execute("SELECT pg_advisory_xact_lock(hashtext('memwarden schema'))")
            for statement in SCHEMA:
                self.conn.execute(statement)
        self.legacy_tenants = LegacyTenants(self._legacy_streams)

    def _legacy_streams(self) -> list[tuple[str, str]]:
        """(stream, tenant) of each memory stream's first save written before schema 2."""
        with self._lock:
            rows = self.conn.execute(
                "SELECT DISTINCT ON (stream) stream, payload::jsonb #>> '{scope,tenant}' FROM events "
                "WHERE type = 'memory.saved' AND schema_version = 1 ORDER BY stream, seq"
            ).fetchall()
        return [(stream, tenant) for stream, tenant in rows if isinstance(tenant, str)]

    # -- writing -----------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[PostgresWriteTransaction]:
        """One transaction under the head lock; rolled back on any error."""
        with self._lock, self.conn.transaction():
            yield PostgresWriteTransaction(self, self.conn)

    @contextmanager
    def snapshot(self) -> Iterator[psycopg.Connection]:
        """A read transaction: several statements see one committed state."""
        with self._lock:
            if self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                yield self.conn  # already inside a write transaction
                return
            # one round trip to open it (not BEGIN, then SET TRANSACTION):
            # every read of the view pays it
            self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                yield self.conn
            finally:
                self.conn.execute("COMMIT")  # a failed one ends as a rollback

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
            issued = int(conn.execute("SELECT seq FROM log_head").fetchone()[0])
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
            for row, problem in check_rows(rows, prev_seq=prev.seq, prev_hash=prev.hash, prev_time=prev.recorded_at):
                if problem is not None:
                    first_bad = last.seq + 1 if problem.startswith("gap") else row[0]
                    return ChainReport(False, head.seq, last.hash, checked, first_bad, problem)
                checked += 1
                last = Head(row[0], row[11], row[6])
        if last.seq != end:
            return ChainReport(False, head.seq, last.hash, checked, last.seq + 1, f"gap: seq {last.seq + 1} is missing")
        if to_seq is None and issued > last.seq:
            return ChainReport(
                False,
                last.seq,
                last.hash,
                checked,
                last.seq + 1,
                f"truncated: {issued} events were appended but the log ends at seq {last.seq}",
            )
        return ChainReport(True, last.seq, last.hash, checked, None, None)

    def close(self) -> None:
        with self._lock:
            self.conn.close()
