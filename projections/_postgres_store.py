"""The PostgreSQL store (``--db postgresql://...``; ``pip install
'memwarden[postgres]'``): the log (``memwarden.events.PostgresEventLog``),
the texts and the usable view in one database, which any number of
``memwarden`` processes share. The view is written in the transaction of
the events it folds (every writer holds the log head's row lock), so every
node reads a view exactly as fresh as the log it has committed.

An as-of view and the check's rebuild are built from the log alone in a
private in-memory SQLite database (``private_view``), as on SQLite: they
never touch the shared view, and a replay answers the same on both backends.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from memwarden.events import Clock, RecordedEvent, StoreFailed, get_logger, translated
from memwarden.events.postgres import PostgresEventLog, PostgresTextStore, QmarkConnection, postgres_failure
from memwarden.events.sqlite import sqlite_failure

from ._agent_page import AgentPage, AgentQuery, holds_derived, read_page
from ._asof import PointView
from ._port import Evidence
from ._postgres_usable import (
    C_TEXT,
    INDEXES,
    RETIRED_INDEXES,
    PostgresProjector,
    concurrently,
    events_after,
    index_names,
    stored_texts,
)
from ._postgres_view import OPENING, PostgresView
from ._postgres_watch import Claims, LogWatcher, Replica
from ._rules import AppendRules
from ._runner import CheckResult, Projector
from ._sql_outbox import Outbox, outbox_schema, upgrade_outbox
from ._sqlite_store import private_view
from ._usable import UsableProjection
from ._write import LogWrite

Reactor = Callable[[LogWrite, Sequence[RecordedEvent]], None]

log = get_logger("memwarden")

# whether every transaction that could still see a row deleted before xid
# ``mark`` has ended: none older runs anywhere on the server, and no
# snapshot in this database reaches back before it
_ERASURE_VISIBLE_TO_NONE = """SELECT pg_snapshot_xmin(pg_current_snapshot()) > %s::xid8
    AND NOT EXISTS (
        SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
        AND backend_xmin IS NOT NULL AND age(backend_xmin) >= age(mod(%s::xid8::text::bigint, 4294967296)::text::xid)
    )"""

KEYS_SCHEMA = f"""CREATE TABLE IF NOT EXISTS api_keys (
    key_id {C_TEXT} PRIMARY KEY, key_hash text NOT NULL, role text NOT NULL, tenants text NOT NULL,
    agent text, created_at {C_TEXT} NOT NULL, revoked_at text
)"""


# the server's secrets (``SideTables.server_secret``): one row each, shared by every node
SECRETS_SCHEMA = f"""CREATE TABLE IF NOT EXISTS server_secrets (
    name {C_TEXT} PRIMARY KEY, secret text NOT NULL, created_at text NOT NULL
)"""


BACKOFF_SCHEMA = f"""CREATE TABLE IF NOT EXISTS host_backoff (
    host {C_TEXT} PRIMARY KEY, failures bigint NOT NULL, until double precision NOT NULL
)"""

# one row while an erasure's bytes may still be in the table files: the next
# erasure, or any node's scheduler, vacuums again
PURGE_SCHEMA = """CREATE TABLE IF NOT EXISTS erasure_purge (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row), since text NOT NULL
)"""


def _index_work(conn: Any) -> tuple[dict[str, bool | None], list[str]]:
    """What ``PostgresStore._build_indexes`` has to do, in one statement:
    each of ``INDEXES`` whose table exists and which is missing (None) or
    invalid (False), and each of ``RETIRED_INDEXES`` still there."""
    names = [index_names(statement) for statement in INDEXES] + [(index, "") for index in RETIRED_INDEXES]
    rows = conn.execute(
        "SELECT i, t, to_regclass(nullif(t, '')) IS NOT NULL, "
        "(SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(i)) "
        "FROM unnest(%s::text[], %s::text[]) AS u(i, t)",
        ([i for i, _ in names], [t for _, t in names]),
    ).fetchall()
    to_build = {index: valid for index, table, has_table, valid in rows if table and has_table and not valid}
    retired = [index for index, table, _, valid in rows if not table and valid is not None]
    return to_build, retired


def _none_sees(conn: Any, mark: str) -> bool:
    """Whether no transaction that could see rows deleted before xid ``mark`` is left."""
    return bool(conn.execute(_ERASURE_VISIBLE_TO_NONE, (mark, mark)).fetchone()[0])


def _purge(conn: Any, mark: str, database: str) -> bool:
    """``VACUUM FULL`` of the tables erased texts were in; True when no
    transaction older than ``mark`` could keep their bytes, else the mark
    is kept for ``finish_erasures``."""
    cleared = _none_sees(conn, mark)
    for table in ("texts", "vectors", "memories_search"):
        conn.execute(f"VACUUM FULL {table}")
    if cleared:
        conn.execute("DELETE FROM erasure_purge WHERE since::xid8 <= %s::xid8", (mark,))
    else:
        log.warning("erasure_vacuum_early", database=database)
        conn.execute(
            "INSERT INTO erasure_purge (since) VALUES (%s) ON CONFLICT (only_row) DO UPDATE SET since = excluded.since",
            (mark,),
        )
    return cleared


@translated
class PostgresStore:
    """The log, the texts and the usable view in one PostgreSQL database."""

    backend = "postgresql"

    def __init__(
        self,
        url: str,
        *,
        clock: Clock,
        read_url: str | None = None,
        replica_wait: float = 0.5,
        erasure_wait: float = 30.0,
    ) -> None:
        self.erasure_wait = erasure_wait
        self.log = PostgresEventLog(url, clock=clock)
        self.replica = Replica(read_url, replica_wait) if read_url else None
        self.path = self.log.path  # the URL without its password
        self.watcher = LogWatcher(url)
        self.claims = Claims(url)
        self.projector = PostgresProjector(events_after(self.log.read))
        rules = AppendRules()  # the promises an import must keep as a live write does, before the fold
        self.log.subscribers.append(lambda conn, events: rules.check(QmarkConnection(conn), events))
        self.log.subscribers.append(lambda conn, events: self.projector.on_append(QmarkConnection(conn), events))
        self._build_indexes()
        with self.log.transaction() as tx:
            # under the head lock: one process at a time creates or catches up
            self.texts = PostgresTextStore(tx.conn, where=self.path)
            self.log.reopened.append(self.texts.rebind)
            view = QmarkConnection(tx.conn)
            self.projector.install(view)
            view.execute(KEYS_SCHEMA)
            view.execute(SECRETS_SCHEMA)
            view.execute(BACKOFF_SCHEMA)
            view.execute(PURGE_SCHEMA)
            for statement in outbox_schema(C_TEXT, "double precision", "bigint"):
                view.execute(statement)
            upgrade_outbox(view, "bigint")
            if self.projector.position(view) < tx.head.seq:
                # a new projection, or a log imported behind memwarden's back:
                # folding the last event catches up on every one before it
                last = self.log.read(after_seq=tx.head.seq - 1, until_seq=tx.head.seq)
                self.projector.on_append(view, list(last))
        # erasure is final in the text store, on every path that appends one
        self.log.subscribers.append(lambda conn, events: self.texts.on_append(conn, events))

    def _build_indexes(self) -> None:
        """Build the indexes this version adds to a view that already holds
        rows with ``CREATE INDEX CONCURRENTLY``, before the install takes the
        head lock, so the processes still on the older version go on
        appending meanwhile (under the lock, the covering index kept every
        writer of every node waiting for seconds at 1M). One process builds, under
        a claim; one opening beside it finds the index's name taken and
        leaves it to the builder. An index a dead build left invalid is
        dropped and built again by the next process to hold the claim; an
        index this version no longer reads goes once its replacements are
        valid. A new database has no table yet: the install creates the
        indexes with the tables."""
        statements = {index_names(statement)[0]: statement for statement in INDEXES}
        with self.log.side_connection() as conn:
            if _index_work(conn) == ({}, []):
                return
            with self.claims.claim("memwarden index build") as mine:
                if not mine:
                    return
                to_build, retired = _index_work(conn)
                for index, valid in to_build.items():
                    if valid is False:  # a dead build's: it takes writes and answers nothing
                        conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index}")
                    started = time.monotonic()
                    log.info("index_building", index=index)
                    conn.execute(concurrently(statements[index]))
                    log.info("index_built", index=index, seconds=round(time.monotonic() - started, 3))
                for index in retired:
                    conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index}")

    def _driver_error(self, exc: Exception, operation: str) -> StoreFailed | None:
        # the as-of views and the check's rebuild are private SQLite databases
        return postgres_failure(exc, self.__dict__.get("path"), operation) or sqlite_failure(
            exc, "a private view", operation
        )

    def close(self) -> None:
        if self.replica is not None:
            self.replica.close()
        self.watcher.close()
        self.claims.close()
        self.log.close()

    # -- many processes on one database ---------------------------------------

    def claim(self, job: str) -> AbstractContextManager[bool]:
        """Hold ``job`` against every other process on this database (True),
        or learn that one holds it (False); released on exit or when this
        process dies."""
        return self.claims.claim(job)

    def wait_for_events(self, after_seq: int, timeout: float) -> int:
        """Wait (LISTEN, with a poll behind it) for an event after ``after_seq``; the head."""
        return self.watcher.wait(after_seq, timeout)

    def on_revocation(self, callback: Callable[[str], None]) -> None:
        """Call ``callback`` with each revocation committed by any process."""
        self.watcher.on_revocation(callback)

    def react(self, reactor: Reactor) -> None:
        """Run ``reactor`` after every append, inside its transaction."""

        def react(tx: Any, records: Sequence[RecordedEvent]) -> None:
            reactor(self._write(tx), records)

        self.log.reactors.append(react)

    @contextmanager
    def outbox(self) -> Iterator[Outbox]:
        """The sinks' outbox in a transaction of its own on a side connection:
        a delivery's claim never holds the log's head lock, so saves go on,
        and two nodes never take one notice (``Outbox.take_head``)."""
        with self.log.side_connection() as conn, conn.transaction():
            yield Outbox(QmarkConnection(conn), PostgresView.ROW_LOCK)

    def _write(self, tx: Any) -> LogWrite:
        return LogWrite(tx, PostgresView(QmarkConnection(tx.conn), self.projector), self.texts)

    # -- reading and writing --------------------------------------------------

    @contextmanager
    def reading(self, floor: int = 0) -> Iterator[PostgresView]:
        """The view as of one committed state (inside a write transaction:
        that one's). With a replica: read there if it has applied at least
        ``floor`` and every revocation the primary has committed (waiting
        up to ``replica_wait``), else from the primary."""
        if self.replica is not None and not self._in_transaction():
            need = max(floor, self._last_revocation())
            with self.replica.snapshot(need, self.projector) as conn:
                if conn is not None:
                    yield PostgresView(QmarkConnection(conn), self.projector)
                    return
        with self.log.opened_snapshot(OPENING) as (conn, opened):
            yield PostgresView(QmarkConnection(conn), self.projector, opened)

    def agent_page(self, floor: int, query: AgentQuery, evidence: Evidence) -> AgentPage:
        """A page of the agent query: in one statement (``agent_page_at_once``)
        when this thread holds no transaction or snapshot and no replica is
        configured; read again in a snapshot when a row of it needs its
        evidence, which one statement does not read. A replica's reads take
        the snapshot path, where its floor rule lives (``reading``)."""
        if self.replica is None and not self.log.inside():
            with self.log.side_connection() as conn:
                page = PostgresView(QmarkConnection(conn), self.projector).agent_page_at_once(query)
            if not holds_derived(page.rows):
                return page
        with self.reading(floor) as view:
            return read_page(view, query, evidence)

    def _in_transaction(self) -> bool:
        return self.log.writing()

    def _last_revocation(self) -> int:
        """The seq of the last revocation committed on the primary: every
        read's floor. A replica that has not replayed it could still serve
        what it took out, so no read goes there until it has."""
        with self.log.snapshot() as conn:
            row = conn.execute("SELECT coalesce(max(seq), 0) FROM revocations").fetchone()
            assert row is not None  # an aggregate answers one row
            return int(row[0])

    @contextmanager
    def writing(self) -> Iterator[LogWrite]:
        """A write transaction holding the log head's row lock, rolled back
        on any error. One that erased texts is followed by ``after_erasure``,
        whatever path it took."""
        with self.log.transaction() as tx:
            write = self._write(tx)
            yield write
        if write.erased:
            write.erasure_cleared = self.after_erasure()

    @contextmanager
    def as_of(self, until_seq: int) -> Iterator[PointView]:
        """The view as it stood right after ``until_seq``: each memory's
        stream folded up to it, read through the indexes (no replay)."""
        yield PointView(self.log, lambda: self.reading(until_seq), until_seq)

    # -- repair and checks ----------------------------------------------------

    def rebuild(self, *, progress: Callable[[int], None] | None = None) -> int:
        """Drop the view and build it again from the log, in one transaction
        under the head lock: readers see the old view until it commits."""
        with self.log.transaction() as tx:
            return self.projector.replace(QmarkConnection(tx.conn), self.log.read(), progress=progress)

    def check(self) -> CheckResult:
        """Rebuild into a private database and compare it with the live view."""
        with tempfile.TemporaryDirectory(prefix="memwarden-check-") as tmp, self.log.snapshot() as raw:
            live = QmarkConnection(raw)
            head = self.log.head_in(raw).seq
            conn = private_view(
                self.log.read(until_seq=head),
                path=str(Path(tmp) / "check.db"),
                text_source=lambda _c, *version: stored_texts(live, *version),
            )
            try:
                return self.projector.compare(live, conn, rebuilt_by=Projector())
            finally:
                conn.close()

    def view_rows(self, until_seq: int | None = None) -> dict[str, list[tuple[Any, ...]]]:
        """The usable view's rows, table by table, each in key order (see
        ``SQLiteStore.view_rows``)."""
        if until_seq is None:
            with self.log.snapshot() as raw:
                return self.projector.projections[0].digest_rows(QmarkConnection(raw))
        conn = private_view(self.log.read(until_seq=until_seq))
        try:
            return UsableProjection(text_source=None).digest_rows(conn)
        finally:
            conn.close()

    def file_problems(self) -> list[str]:
        """PostgreSQL checks its own pages (with data checksums where the
        cluster has them): nothing for memwarden to add."""
        self.log.ping()
        return []

    def after_erasure(self) -> bool:
        """Erased texts leave the table files: ``VACUUM FULL`` writes the
        texts and the text index anew without the deleted rows (a plain
        VACUUM would leave their bytes in the pages' free space).

        A vacuum keeps every deleted row that a running transaction might
        still see: one older than the erasure anywhere on the server (xids
        are the cluster's), or a snapshot in this database. So it waits, up
        to ``erasure_wait`` seconds, for those to end; past that it vacuums
        anyway, warns, answers False and leaves a mark: the bytes those
        transactions could see stay in the files until ``finish_erasures``
        (the scheduler's) or the next erasure vacuums again.
        """
        # on a connection of its own: the wait holds no lock of this process,
        # so its other writes go on (the vacuum itself locks the two tables)
        with self.log.side_connection() as conn:
            # an xid newer than the erasure's: the transactions to outlive are the older ones
            xact = conn.execute("SELECT pg_current_xact_id()::text").fetchone()
            assert xact is not None  # a function's call answers one row
            (mark,) = xact
            deadline = time.monotonic() + self.erasure_wait
            while not _none_sees(conn, mark):
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.01)
            return _purge(conn, mark, self.path)

    def finish_erasures(self) -> bool:
        """Vacuum again after an erasure whose bytes could not all leave the
        files (a transaction older than it was still running), once none
        runs: any node's scheduler asks, and nothing waits. True when no
        erasure is left unfinished."""
        with self.log.side_connection() as conn:
            row = conn.execute("SELECT since FROM erasure_purge").fetchone()
            if row is None:
                return True
            if not _none_sees(conn, row[0]):
                return False
            return _purge(conn, row[0], self.path)
