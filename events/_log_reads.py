"""What every log backend shares, written once: appending through the
backend's own transaction, importing a chained log, and every read.

A backend gives its connection (``conn``, used under ``_lock``), its
``transaction()``, the tenants of its pre-schema-2 streams, and the
parameter mark of its driver (``?`` for sqlite3, ``%s`` for psycopg); the
statements here are written with ``?`` and the mark is put in on the way
to the driver."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from ._errors import StoreFailed
from ._recorded import EMPTY_HEAD, ROW_COLUMNS, Head, RecordedEvent, Row, event_from_row
from ._streams import memory_stream
from ._translated import translated
from ._upcasting import LegacyTenants

if TYPE_CHECKING:
    from ._models import Event

PAGE = 5000
# What a memory's fold reads besides its own stream. Spelled with literals,
# not marks: SQLite uses a partial index only for the very expression it was
# made with (events_context), so these reads come from an index, not a scan.
CONTEXT_TYPES = ("policy.version_changed", "revocation.issued")
CONTEXT_WHERE = "type IN ('policy.version_changed', 'revocation.issued')"
_NO_END = 2**63 - 1  # the largest seq either backend stores


def marks(values: Sequence[object]) -> str:
    """``?,?,?``: one mark per value of an IN list."""
    return ",".join("?" * len(values))


@translated
class LogReads(ABC):
    conn: Any
    _lock: threading.RLock
    legacy_tenants: LegacyTenants
    MARK = "?"

    @abstractmethod
    def _driver_error(self, exc: Exception, operation: str) -> StoreFailed | None:
        """The engine's error for a driver's ``exc`` leaving ``operation``
        (None: not a database failure), as ``_translated`` asks."""

    @abstractmethod
    def transaction(self) -> AbstractContextManager[Any]:
        """One write transaction under the backend's write lock."""

    def _sql(self, sql: str) -> str:
        return sql if self.MARK == "?" else sql.replace("?", self.MARK)

    def _read_conn(self) -> AbstractContextManager[Any]:
        """The connection a read of the log runs on: the write connection
        under the lock, unless the backend reads beside its writer."""
        return self._write_conn_locked()

    @contextmanager
    def _write_conn_locked(self) -> Iterator[Any]:
        with self._lock:
            yield self.conn

    def _fetch(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        with self._read_conn() as conn:
            return conn.execute(self._sql(sql), params).fetchall()

    # -- writing -----------------------------------------------------------

    def append(self, events: Iterable[Event], expected_version: int | dict[str, int] | None = None) -> list[int]:
        """Append atomically; returns the seq of every event (the original
        seq for an event already in the log)."""
        with self.transaction() as tx:
            return tx.append(events, expected_version)

    def import_records(self, records: Iterable[RecordedEvent], *, chunk: int = 5000) -> int:
        """Append pre-chained events in one transaction (all or nothing)."""
        written = 0
        with self.transaction() as tx:
            buffer: list[RecordedEvent] = []
            for record in records:
                buffer.append(record)
                if len(buffer) >= chunk:
                    written += tx.append_recorded(buffer)
                    buffer = []
            written += tx.append_recorded(buffer)
        return written

    # -- reading -----------------------------------------------------------

    def head_in(self, conn: Any) -> Head:
        """The last event's seq and hash, as ``conn`` (a snapshot, a transaction) sees it."""
        row = conn.execute("SELECT seq, hash, recorded_at FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        return Head(*row) if row else EMPTY_HEAD

    def head(self) -> Head:
        with self._read_conn() as conn:
            return self.head_in(conn)

    def rows(
        self,
        after_seq: int = 0,
        until_seq: int | None = None,
        where: str = "",
        params: Sequence[object] = (),
        *,
        by_seq: bool = True,
    ) -> Iterator[Row]:
        """Raw rows in seq order, fetched a page at a time (flat memory).
        ``by_seq=False`` keeps the seq range out of the index choice, for a
        ``where`` whose own index finds few rows (a handful of streams):
        PostgreSQL otherwise also walked the primary key over the whole
        range and intersected the two."""
        last = after_seq
        # a plain range, never "(? < 0 OR seq <= ?)": PostgreSQL's generic
        # plan for that form scanned and sorted the whole table per page
        limit = until_seq if until_seq is not None else _NO_END
        extra = f" AND ({where})" if where else ""
        seq = "seq" if by_seq else "(seq + 0)"
        sql = f"SELECT {ROW_COLUMNS} FROM events WHERE {seq} > ? AND {seq} <= ?{extra} ORDER BY seq LIMIT {PAGE}"
        while True:
            page = self._fetch(sql, (last, limit, *params))
            if not page:
                return
            yield from page
            last = page[-1][0]
            if len(page) < PAGE:
                return

    def read(
        self,
        after_seq: int = 0,
        until_seq: int | None = None,
        until_time: str | None = None,
        *,
        types: Sequence[str] | None = None,
        streams: Sequence[str] | None = None,
    ) -> Iterator[RecordedEvent]:
        """Stream events with ``after_seq < seq <= until_seq`` and
        ``recorded_at <= until_time``, upcast to the current schema."""
        if until_time is not None:
            cut = self.seq_at(until_time)
            until_seq = cut if until_seq is None else min(until_seq, cut)
        clauses: list[str] = []
        params: list[object] = []
        if types:
            clauses.append(f"type IN ({marks(types)})")
            params.extend(types)
        if streams is not None:
            clauses.append(f"stream IN ({marks(streams)})")
            params.extend(streams)
        for row in self.rows(after_seq, until_seq, " AND ".join(clauses), params):
            yield event_from_row(row, self.legacy_tenants)

    def context_events(self, until_seq: int | None = None) -> Iterator[RecordedEvent]:
        """Every revocation and policy change up to ``until_seq``, in seq order."""
        for row in self.rows(0, until_seq, CONTEXT_WHERE):
            yield event_from_row(row, self.legacy_tenants)

    def memories_events(
        self, keys: Sequence[tuple[str, str]], *, until_seq: int | None = None
    ) -> Iterator[RecordedEvent]:
        """The events of the memories ``keys`` (tenant, memory_id) name, in
        seq order: their streams, and the bare-id streams of before schema 2."""
        wanted = set(keys)
        streams = [memory_stream(t, m) for t, m in sorted(wanted)] + sorted({m for _, m in wanted})
        for row in self.rows(0, until_seq, f"stream IN ({marks(streams)})", streams, by_seq=False):
            event = event_from_row(row, self.legacy_tenants)
            if (event.payload.get("tenant"), event.payload.get("memory_id")) in wanted:
                yield event

    def memory_events(
        self, tenant: str, memory_id: str, *, until_seq: int | None = None, types: Sequence[str] | None = None
    ) -> Iterator[RecordedEvent]:
        """The events of memory (tenant, memory_id), in seq order: its stream,
        and the bare-id stream it had before schema 2 if it is that old."""
        for event in self.read(until_seq=until_seq, types=types, streams=[memory_stream(tenant, memory_id), memory_id]):
            if event.payload.get("tenant") == tenant:
                yield event

    def seq_at(self, when: str) -> int:
        """The last seq recorded at or before ``when`` (canonical text).

        recorded_at never decreases along seq, so this is a binary search
        on the primary key rather than an index on time.
        """
        sql = self._sql("SELECT recorded_at FROM events WHERE seq = ?")
        with self._read_conn() as conn:
            lo, hi = 0, self.head_in(conn).seq
            while lo < hi:
                mid = (lo + hi + 1) // 2
                row = conn.execute(sql, (mid,)).fetchone()
                if row is not None and row[0] <= when:
                    lo = mid
                else:
                    hi = mid - 1
            return lo

    def get(self, seq: int) -> RecordedEvent | None:
        found = self._fetch(f"SELECT {ROW_COLUMNS} FROM events WHERE seq = ?", (seq,))
        return event_from_row(found[0], self.legacy_tenants) if found else None

    def by_event_id(self, event_id: str) -> RecordedEvent | None:
        """The event appended under ``event_id`` (in a write transaction: as it sees the log)."""
        found = self._fetch(f"SELECT {ROW_COLUMNS} FROM events WHERE event_id = ?", (event_id,))
        return event_from_row(found[0], self.legacy_tenants) if found else None

    def tail(self, n: int) -> list[RecordedEvent]:
        rows = self._fetch(f"SELECT {ROW_COLUMNS} FROM events ORDER BY seq DESC LIMIT ?", (max(n, 0),))
        return [event_from_row(r, self.legacy_tenants) for r in reversed(rows)]

    def count(self) -> int:
        return int(self._fetch("SELECT count(*) FROM events")[0][0])
