"""The Warden's shared state: opening the database, the clock, consistent reads."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import structlog
from memwarden.events import BlobStore, Clock, SQLiteEventLog, SystemClock, format_ts
from memwarden.events._sqlite import Synchronous
from memwarden.projections import ProjectionDamaged, Projector

from ._derivation import cascade
from ._errors import StaleView
from ._fetchers import Fetchers
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
        synchronous: Synchronous = "FULL",
        mmap_mb: int = 1024,
    ) -> None:
        self.path = str(path)
        self.clock: Clock = clock or SystemClock()
        self.policy = policy or TtlPolicy()
        self.fetchers = fetchers or Fetchers()
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
            self.projector.install(tx.conn)
            self.blobs = BlobStore(tx.conn)
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
                rows = self.conn.execute("PRAGMA quick_check").fetchall()
        except sqlite3.DatabaseError as exc:
            return [str(exc)]
        problems = [r[0] for r in rows if r[0] != "ok"]
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

    def _policy_version(self, conn: sqlite3.Connection, policy: str) -> int:
        row = conn.execute("SELECT version FROM policies WHERE policy = ?", (policy,)).fetchone()
        return row[0] if row else 1

    # -- save -------------------------------------------------------------------

    def transaction(self) -> Any:
        """A write transaction for callers composing several appends."""
        return self.log.transaction()
