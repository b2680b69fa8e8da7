"""The SQLite store: memwarden's embedded backend. One database file holds
the log (``memwarden.events.SQLiteEventLog``), the texts, and the usable
view the log's projections keep in the same transactions; the engine reads
the view through ``SQLiteView`` (``SQLView``'s questions in SQLite's
spelling) and writes through ``LogWrite``. ``Store`` in ``_port`` is the contract it keeps."""

from __future__ import annotations

import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from memwarden.events import (
    Clock,
    RecordedEvent,
    SQLiteEventLog,
    SQLiteOptions,
    StoreFailed,
    TextStore,
    WriteTransaction,
    get_logger,
    migrate_blobs,
    private_file,
    translated,
)
from memwarden.events.sqlite import sqlite_failure

from ._agent_page import AgentPage, AgentQuery, read_page
from ._asof import PointView
from ._errors import ProjectionDamaged
from ._fts_documents import stored_texts
from ._port import Evidence
from ._rules import AppendRules
from ._runner import CheckResult, Projector
from ._sql_outbox import Outbox, outbox_schema, upgrade_outbox
from ._sqlite_schema import create_backoff_table, create_keys_table, create_secrets_table
from ._sqlite_view import SQLiteView
from ._stats import StatsProjection
from ._usable import UsableProjection
from ._write import LogWrite

log = get_logger("memwarden")


Reactor = Callable[[LogWrite, Sequence[RecordedEvent]], None]


@translated
class SQLiteStore:
    """The log, the texts and the usable view in one SQLite database."""

    backend = "sqlite"

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Clock,
        options: SQLiteOptions | None = None,
    ) -> None:
        self.path = str(path)
        self.options = options = options or SQLiteOptions()
        self._claims: dict[str, threading.Lock] = {}
        self._erasure_pending = False
        self.projector = Projector()
        self.log = SQLiteEventLog(
            path,
            clock=clock,
            synchronous=options.synchronous,
            # the promises an import must keep as a live write does, before the fold
            subscribers=[AppendRules().check, self.projector.on_append],
            mmap_mb=options.mmap_mb,
            cache_mb=options.cache_mb,
        )
        self.conn = self.log.conn
        with self.log.transaction() as tx:
            self.texts = TextStore(tx.conn, where=self.path)
            self.log.subscribers.append(self.texts.on_append)  # erasure is final in the text store
            migrate_blobs(tx.conn, self.texts, self.log.legacy_tenants)
            self.projector.install(tx.conn)
            create_keys_table(tx.conn)
            create_secrets_table(tx.conn)
            create_backoff_table(tx.conn)
            for statement in outbox_schema():
                tx.conn.execute(statement)
            upgrade_outbox(tx.conn)
        try:
            behind = self.projector.position(self.conn) < self.log.head().seq
        except ProjectionDamaged as exc:
            # still open: the audit and `memwarden rebuild` (the repair)
            # need no view, and every read names the damage
            log.error("projection_damaged", problem=str(exc))
            behind = False
        if behind:
            # a copied database or a new projection: catch up before serving
            self.projector.catch_up(self.conn, lambda after: self.log.read(after_seq=after))

    def _driver_error(self, exc: Exception, operation: str) -> StoreFailed | None:
        return sqlite_failure(exc, self.__dict__.get("path"), operation)

    def close(self) -> None:
        self.log.close()

    # -- a copy while it is in use ---------------------------------------------

    def backup(self, target: Path) -> int:
        """Copy the store to ``target`` (a new file) with SQLite's online
        backup, in steps so that writers are held up for a step at most;
        the head the copy holds. A failure is an OSError naming it."""
        try:
            private_file(target)  # before SQLite writes a page (its journal takes the file's mode)
            src = sqlite3.connect(self.path)
            try:
                dst = sqlite3.connect(target)
                try:
                    src.backup(dst, pages=1024)
                    return int(dst.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])
                finally:
                    dst.close()
            finally:
                src.close()
        except sqlite3.Error as exc:
            raise OSError(str(exc)) from None

    # -- other processes on the same file --------------------------------------

    def claim(self, job: str) -> AbstractContextManager[bool]:
        """Hold ``job`` against the other threads of this process: several
        processes on one SQLite file each run their own jobs (their appends
        stay correct: expiry events are idempotent and a confirmed read-back
        is written once)."""
        return _claim(self._claims.setdefault(job, threading.Lock()))

    def wait_for_events(self, after_seq: int, timeout: float) -> int:
        """Wait (polling the file) for an event after ``after_seq``; the head."""
        deadline = time.monotonic() + timeout
        while True:
            head = self.log.head().seq
            if head > after_seq or time.monotonic() >= deadline:
                return head
            time.sleep(0.05)

    def on_revocation(self, callback: Callable[[str], None]) -> None:
        """Other processes' revocations reach a scheduler on its next tick
        (the pending read-backs), not through here: a file has no channel."""

    def react(self, reactor: Reactor) -> None:
        """Run ``reactor`` after every append, inside its transaction, to
        append what those events imply (the derivation cascade)."""

        def react(tx: WriteTransaction, records: Sequence[RecordedEvent]) -> None:
            reactor(LogWrite(tx, SQLiteView(tx.conn, self.projector), self.texts), records)

        self.log.reactors.append(react)

    # -- reading and writing --------------------------------------------------

    @contextmanager
    def reading(self, floor: int = 0) -> Iterator[SQLiteView]:
        """The view as of one committed state (inside this thread's write
        transaction: that one's), read beside any other write transaction
        rather than after it, on a reader of its own (``_sqlite_readers``):
        a key's check, a get or an explain never waits for a batch of
        10,000 to commit. One file has no replica: ``floor`` is the
        caller's to check."""
        with self.log.reading() as conn:
            yield SQLiteView(conn, self.projector)

    def agent_page(self, floor: int, query: AgentQuery, evidence: Evidence) -> AgentPage:
        """A page of the agent query in one snapshot (``_agent_page``), read
        beside any write transaction rather than after it: the page reads
        the view alone, never the log or the texts through the writer's
        connection, so it may take a reader of its own (``_sqlite_readers``)."""
        with self.log.reading() as conn:
            return read_page(SQLiteView(conn, self.projector), query, evidence)

    @contextmanager
    def writing(self) -> Iterator[LogWrite]:
        """A write transaction: ``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled
        back on any error. One that erased texts is followed by
        ``after_erasure``, whatever path it took."""
        with self.log.transaction() as tx:
            write = LogWrite(tx, SQLiteView(tx.conn, self.projector), self.texts)
            yield write
        if write.erased:
            write.erasure_cleared = self.after_erasure()

    @contextmanager
    def outbox(self) -> Iterator[Outbox]:
        """The sinks' outbox in a transaction of its own (one writer: the
        file's write lock is the claim). Committed without waiting for the
        disk (WAL's NORMAL): a delivery state lost to a power cut only means
        a notice delivered again under the same id, which at least once
        allows; the notice itself came with its event's full sync."""
        with self.log.lock:
            level = self.conn.execute("PRAGMA synchronous").fetchone()[0]
            self.conn.execute("PRAGMA synchronous=NORMAL")
            try:
                with self.log.transaction() as tx:
                    yield Outbox(tx.conn)
            finally:
                self.conn.execute(f"PRAGMA synchronous={int(level)}")

    @contextmanager
    def as_of(self, until_seq: int) -> Iterator[PointView]:
        """The view as it stood right after ``until_seq``: each memory's
        stream folded up to it, read through the indexes (no replay)."""
        yield PointView(self.log, self.reading, until_seq)

    # -- repair and checks ----------------------------------------------------

    def rebuild(self, *, progress: Callable[[int], None] | None = None) -> int:
        """Drop the view and build it again from the log, in one transaction."""
        with self.log.lock:
            return self.projector.rebuild(self.conn, self.log.read(), progress=progress)

    def check(self) -> CheckResult:
        """Rebuild into a temporary database and compare it with the live view."""
        live = self.conn
        with tempfile.TemporaryDirectory(prefix="memwarden-check-") as tmp, self.log.snapshot():
            head = self.log.head().seq
            conn = private_view(
                self.log.read(until_seq=head),
                path=str(Path(tmp) / "check.db"),
                text_source=lambda _c, *version: stored_texts(live, *version),
            )
            try:
                return self.projector.compare(live, conn)
            finally:
                conn.close()

    def view_rows(self, until_seq: int | None = None) -> dict[str, list[tuple[Any, ...]]]:
        """The usable view's rows, table by table, each in key order: the
        live view, or with ``until_seq`` the view a replay to that seq
        builds (its text index holds summaries only: a replay reads no
        stored text). What ``check`` compares, for callers comparing views."""
        if until_seq is None:
            with self.log.snapshot() as conn:
                return UsableProjection().digest_rows(conn)
        conn = private_view(self.log.read(until_seq=until_seq))
        try:
            return UsableProjection(text_source=None).digest_rows(conn)
        finally:
            conn.close()

    def file_problems(self) -> list[str]:
        """What SQLite's own check finds wrong with the file ([] if nothing);
        raises the driver's DatabaseError if it cannot even look."""
        return self.log.quick_check()

    def after_erasure(self) -> bool:
        """Erased text leaves the write-ahead log too (False: a reader kept
        the checkpoint from finishing; ``finish_erasures`` tries again)."""
        self._erasure_pending = not self.log.checkpoint()
        return not self._erasure_pending

    def finish_erasures(self) -> bool:
        """Finish an erasure whose bytes could not all leave the files yet
        (the scheduler asks); True when none is left."""
        return self.after_erasure() if self._erasure_pending else True


@contextmanager
def _claim(lock: threading.Lock) -> Iterator[bool]:
    held = lock.acquire(blocking=False)
    try:
        yield held
    finally:
        if held:
            lock.release()


def copy_store_file(source: str | Path, target: str | Path) -> None:
    """Copy the SQLite store in ``source`` into ``target`` (made private
    first) page by page with SQLite's backup API; ``source`` is only read.
    ``ValueError`` when ``source`` holds no memwarden log, ``OSError``
    naming what SQLite met otherwise. A plain connection to ``source``: its
    close leaves no ``-wal`` or ``-shm`` beside a backup (a read-only one
    would, being unable to remove them)."""
    try:
        src = sqlite3.connect(str(source))
        try:
            if src.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone() is None:
                raise ValueError(f"{source} holds no memwarden log: not a backup of a store")
            private_file(target)  # before SQLite writes a page
            dst = sqlite3.connect(str(target))
            try:
                src.backup(dst)
            finally:
                dst.close()
        finally:
            src.close()
    except sqlite3.Error as exc:
        raise OSError(f"{source}: {exc}") from None


def private_view(
    events: Iterable[RecordedEvent],
    *,
    path: str = ":memory:",
    text_source: Callable[..., Any] | None = None,
) -> sqlite3.Connection:
    """The view built from ``events`` alone in a database of its own (in
    memory unless ``path`` says where): as-of replays and the check of the
    live view build here, never touching the live one."""
    conn = sqlite3.connect(path, isolation_level=None)
    projector = Projector([UsableProjection(text_source=text_source), StatsProjection()])
    conn.execute("BEGIN")
    projector.build(conn, events)
    conn.execute("COMMIT")
    return conn
