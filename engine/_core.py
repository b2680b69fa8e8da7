"""The Warden's shared state: opening the database, the clock, consistent reads."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import structlog
from memwarden.events import DATABASE_ERRORS, Clock, SQLiteEventLog, SystemClock, TextStore, format_ts, migrate_blobs
from memwarden.events._sqlite import Synchronous
from memwarden.projections import ProjectionDamaged, Projector, rows_where

from ._access import EVERYONE, Access
from ._derivation import cascade
from ._errors import AmbiguousMemory, MemoryNotFound, StaleView
from ._fetchers import Fetchers
from ._limits import Limits
from ._policy import TtlPolicy

log = structlog.get_logger("memwarden")


class WardenCore:
    """What every part of the Warden shares: the log with its inline
    projections, the blob store, the clock and consistent reads."""

    def __init__(
        self,
        path: str | Path = "memwarden.db",
        *,
        clock: Clock | None = None,
        policy: TtlPolicy | None = None,
        fetchers: Fetchers | None = None,
        limits: Limits | None = None,
        synchronous: Synchronous = "FULL",
        mmap_mb: int = 1024,
    ) -> None:
        self.path = str(path)
        self.clock: Clock = clock or SystemClock()
        self.policy = policy or TtlPolicy()
        self.fetchers = fetchers or Fetchers()
        self.limits = limits or Limits()
        self.projector = Projector()
        # called with each revocation id after it commits (the scheduler's
        # immediate read-back hooks in here)
        self.revocation_listeners: list[Callable[[str], None]] = []
        self.log = SQLiteEventLog(
            path, clock=self.clock, synchronous=synchronous, subscribers=[self.projector.on_append], mmap_mb=mmap_mb
        )
        self.conn = self.log.conn
        self.log.reactors.append(cascade)
        with self.log.transaction() as tx:
            self.texts = TextStore(tx.conn)
            migrate_blobs(tx.conn, self.texts, self.log.legacy_tenants)
            self.projector.install(tx.conn)
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

    def close(self) -> None:
        self.log.close()

    def file_problems(self) -> list[str]:
        """What SQLite's own check finds wrong with the database file (the
        hash chain cannot see damage to the projections or the blobs)."""
        try:
            with self.log.lock:
                problems = self.log.quick_check()
        except DATABASE_ERRORS as exc:
            return [str(exc)]
        if problems:
            log.error("database_damaged", path=self.path, problems=problems[:10])
        return problems

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- time and freshness ---------------------------------------------------

    def now(self) -> str:
        return format_ts(self.clock.now())

    @contextmanager
    def reading(self, min_seq: int | None = None, wait: float = 2.0) -> Iterator[sqlite3.Connection]:
        """A consistent read of a view that has applied at least ``min_seq``."""
        deadline = time.monotonic() + wait
        while True:
            with self.log.snapshot() as conn:
                have = self.projector.position(conn)
                if min_seq is None or have >= min_seq:
                    yield conn
                    return
            if time.monotonic() >= deadline:
                raise StaleView(have, min_seq)
            time.sleep(0.02)

    def find_row(
        self, conn: sqlite3.Connection, memory_id: str, *, tenant: str | None = None, access: Access = EVERYONE
    ) -> dict[str, Any]:
        """The row of the memory a caller names: by id, in ``tenant`` when
        given, and only among the memories ``access`` allows (in the query
        itself). One the caller may not see is ``MemoryNotFound``, word for
        word as one that does not exist; an id held in more than one of the
        caller's tenants needs the tenant named."""
        if not isinstance(memory_id, str) or not memory_id:
            raise MemoryNotFound(str(memory_id))
        where, args = access.naming("memory_id", memory_id, tenant)
        found = rows_where(conn, where, args, limit=2)
        if not found:
            raise MemoryNotFound(memory_id)
        if len(found) > 1:
            raise AmbiguousMemory(memory_id)
        return found[0]

    # -- save -------------------------------------------------------------------

    def transaction(self) -> Any:
        """A write transaction for callers composing several appends."""
        return self.log.transaction()
