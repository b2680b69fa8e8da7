"""The Warden's shared state: opening the database, the clock, consistent reads."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import structlog
from memwarden.events import Clock, LegacyTenants, SQLiteEventLog, SystemClock, TextStore, format_ts
from memwarden.events._sqlite import Synchronous
from memwarden.projections import SELECT_MEMORIES, ProjectionDamaged, Projector, row_dict

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
        found = conn.execute(f"{SELECT_MEMORIES} WHERE {where} LIMIT 2", args).fetchall()
        if not found:
            raise MemoryNotFound(memory_id)
        if len(found) > 1:
            raise AmbiguousMemory(memory_id)
        return row_dict(found[0])

    # -- save -------------------------------------------------------------------

    def transaction(self) -> Any:
        """A write transaction for callers composing several appends."""
        return self.log.transaction()


def migrate_blobs(conn: sqlite3.Connection, texts: TextStore, tenants: LegacyTenants) -> None:
    """A database from before per-memory texts kept contents shared by
    checksum (``blobs``) and summaries in the hashed payloads: give every
    saved version its own texts, none to an erased memory, and drop the
    shared table. The log is not touched."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'blobs'").fetchone() is None:
        return
    erased = {stream for (stream,) in conn.execute("SELECT DISTINCT stream FROM events WHERE type = 'memory.erased'")}
    saves = conn.execute(
        "SELECT stream, payload FROM events WHERE type = 'memory.saved' AND schema_version = 1 ORDER BY seq"
    ).fetchall()
    moved = 0
    for stream, payload in saves:
        if stream in erased:
            continue
        p = json.loads(payload)
        tenant = tenants(stream) or p["scope"]["tenant"]
        blob = conn.execute("SELECT CAST(content AS BLOB) FROM blobs WHERE checksum = ?", (p["content_checksum"],))
        data = blob.fetchone()
        content = None
        if data is not None and data[0] is not None:
            content = bytes(data[0]).decode("utf-8", "replace")
        texts.put(tenant, p["memory_id"], p["version"], p.get("summary"), content)
        moved += 1
    conn.execute("DROP TABLE blobs")
    log.warning("texts_migrated", versions=moved, note="per-memory texts replace the shared blob table")
