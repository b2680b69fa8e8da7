"""Running projections: inline with appends, catching up, rebuilding.

Every projection keeps a tracking row (the last seq it applied). The row is
written in the same transaction as the projection rows it covers and only
ever moves forward, so a crash can leave a projection behind but never
ahead of, or disagreeing with, what it claims to have applied.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from memwarden.events import ROW_COLUMNS, RecordedEvent, canonical_json, event_from_row, legacy_tenants

from ._errors import ProjectionDamaged
from ._rows import Connection, on_sqlite
from ._selector import Revocation
from ._sqlite_schema import create_tracking_table
from ._stats import StatsProjection
from ._usable import UsableProjection

BATCH = 1000
# each projection's position: read by every read of the view
TRACKED = "SELECT name, seq FROM projection_tracking"
Progress = Callable[[int], None]


@functools.lru_cache(maxsize=8)
def _track_sql(count: int) -> str:
    """The tracking upsert for ``count`` projections. Only forward: a stale
    writer can never move a checkpoint back."""
    rows = ", ".join(["(?, ?)"] * count)
    return (
        f"INSERT INTO projection_tracking (name, seq) VALUES {rows} "
        "ON CONFLICT(name) DO UPDATE SET seq = excluded.seq WHERE projection_tracking.seq < excluded.seq"
    )


# the events after one seq up to another, read in the transaction of ``conn``
Backlog = Callable[[Connection, int, int], Iterable[RecordedEvent]]
# A build streams: it needs a page cache for the rows a batch touches, not
# one that grows with the view. The same bound at every log size keeps a
# rebuild's memory flat, for little speed.
BUILD_CACHE_MB = 24


class Projection(Protocol):
    """One of a store's read models, kept by the log's transactions."""

    # read-only, so that a projection's literal tuple of tables satisfies them
    @property
    def name(self) -> str: ...
    @property
    def tables(self) -> tuple[str, ...]: ...

    def create(self, conn: Connection, *, indexes: bool = True) -> None: ...
    def create_indexes(self, conn: Connection) -> None: ...
    def drop(self, conn: Connection) -> None: ...
    def apply(self, conn: Connection, events: Sequence[RecordedEvent], *, bulk: bool = False) -> None: ...
    def finish_bulk(self, conn: Connection) -> None: ...
    def digest_rows(self, conn: Connection) -> dict[str, list[tuple[Any, ...]]]: ...


def default_projections() -> list[Projection]:
    return [UsableProjection(), StatsProjection()]


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    live_seq: int
    rebuilt_seq: int
    digests: dict[str, tuple[str, str]]
    first_difference: str | None = None
    memory_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "live_seq": self.live_seq,
            "rebuilt_seq": self.rebuilt_seq,
            "digests": {k: {"live": a, "rebuilt": b} for k, (a, b) in self.digests.items()},
            "first_difference": self.first_difference,
            "memory_id": self.memory_id,
        }


class Projector:
    """Applies a fixed, ordered set of projections to one database (SQLite's
    by default: a backend's projector overrides what it does its own way,
    the tracking table and the settings of a bulk build)."""

    def __init__(self, projections: Sequence[Projection] | None = None, *, backlog: Backlog | None = None) -> None:
        self.projections = list(projections) if projections is not None else default_projections()
        self.backlog: Backlog = backlog or _events_in

    def create_tracking(self, conn: Connection) -> None:
        create_tracking_table(on_sqlite(conn))

    def bulk(self, conn: Connection) -> AbstractContextManager[None]:
        """The connection's settings while a build streams through the log."""
        return bounded_cache(conn)

    def dropping(self, conn: Connection) -> AbstractContextManager[None]:
        """The connection's settings while a rebuild drops the old view.

        SQLite: the old view's pages are not zeroed as they are freed
        (secure_delete=ON would write every one, seconds of a large rebuild).
        They hold only what the new view holds again: erased text was zeroed
        when it was erased. Dropping reads every page it frees, so it runs
        under the build's bounded cache too."""
        return _dropping(conn)

    def install(self, conn: Connection) -> None:
        """Create the tables; a projection whose tables are of an older
        layout is dropped and set back to seq 0, to be rebuilt from the log."""
        self.create_tracking(conn)
        for projection in self.projections:
            outdated = getattr(projection, "outdated", None)
            if outdated is not None and outdated(conn):
                projection.drop(conn)
                conn.execute("DELETE FROM projection_tracking WHERE name = ?", (projection.name,))
            projection.create(conn)

    def positions(self, conn: Connection) -> dict[str, int]:
        return self.positions_of(conn.execute(TRACKED).fetchall())

    def positions_of(self, tracked_rows: Iterable[tuple[Any, ...]]) -> dict[str, int]:
        """Each projection's seq, from the rows ``TRACKED`` selected."""
        tracked = dict(tracked_rows)
        positions = {p.name: tracked.get(p.name, 0) for p in self.projections}
        for name, seq in positions.items():
            if type(seq) is not int:
                raise ProjectionDamaged(f"projection_tracking {name}", f"seq is {seq!r}, not a number")
        return positions

    def position(self, conn: Connection) -> int:
        """The seq every projection has applied (the view's freshness)."""
        return self.position_of(conn.execute(TRACKED).fetchall())

    def position_of(self, tracked_rows: Iterable[tuple[Any, ...]]) -> int:
        """``position``, from the rows ``TRACKED`` selected."""
        return min(self.positions_of(tracked_rows).values(), default=0)

    def revocations(self, conn: Connection, tenant: str | None = None) -> list[Revocation]:
        """Every revocation (or those that may cover ``tenant``), oldest
        first: the usable projection's, parsed once for the store."""
        usable = next(p for p in self.projections if isinstance(p, UsableProjection))
        return usable.revocations.load(conn, tenant)

    def revocation_shares(self, conn: Connection, tenants: Iterable[str]) -> dict[str, list[Revocation]]:
        """``revocations`` of each of ``tenants``, read together."""
        usable = next(p for p in self.projections if isinstance(p, UsableProjection))
        return usable.revocations.load_shares(conn, tenants)

    def track(self, conn: Connection, name: str, seq: int) -> None:
        self.track_all(conn, [(name, seq)])

    def track_all(self, conn: Connection, positions: Sequence[tuple[str, int]]) -> None:
        """Move each named projection forward to its seq, in one statement
        (on a server, one round trip for every projection an append moved)."""
        if positions:
            conn.execute(_track_sql(len(positions)), [v for pair in positions for v in pair])

    # -- inline ------------------------------------------------------------

    def on_append(self, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        """The log's subscriber: runs inside the append's transaction."""
        if not events:
            return
        positions = self.positions(conn)
        moved: list[tuple[str, int]] = []
        for projection in self.projections:
            at = positions[projection.name]
            if at < events[0].seq - 1:
                # behind (a new projection, a copied database): catch up
                # from the events table first, in this same transaction
                for batch in _batches(self.backlog(conn, at, events[0].seq - 1)):
                    projection.apply(conn, batch)
                at = events[0].seq - 1
            fresh = [e for e in events if e.seq > at]
            if fresh:
                projection.apply(conn, fresh)
                moved.append((projection.name, fresh[-1].seq))
        self.track_all(conn, moved)

    # -- catch-up and rebuild ---------------------------------------------

    def catch_up(self, conn: Connection, source: Callable[[int], Iterable[RecordedEvent]]) -> int:
        """Bring every projection in ``conn`` up to the end of ``source``.

        ``source(after_seq)`` yields events; the projection may live in a
        different database from the log. One transaction per batch.
        """
        applied = 0
        for projection in self.projections:
            start = self.positions(conn)[projection.name]
            for batch in _batches(source(start)):
                conn.execute("BEGIN IMMEDIATE")
                try:
                    # re-read: another process may have moved it meanwhile
                    at = self.positions(conn)[projection.name]
                    fresh = [e for e in batch if e.seq > at]
                    if fresh:
                        projection.apply(conn, fresh)
                        self.track(conn, projection.name, fresh[-1].seq)
                        applied += len(fresh)
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
        return applied

    def build(
        self,
        conn: Connection,
        events: Iterable[RecordedEvent],
        *,
        progress: Progress | None = None,
    ) -> int:
        """Fill empty projection tables from ``events`` (no transaction
        handling: the caller owns it). Indexes and the text index are made
        once at the end, which is what keeps a rebuild fast."""
        self.create_tracking(conn)
        for projection in self.projections:
            projection.create(conn, indexes=False)
        last = 0
        count = 0
        with self.bulk(conn):
            for batch in _batches(events):
                for projection in self.projections:
                    projection.apply(conn, batch, bulk=True)
                last = batch[-1].seq
                count += len(batch)
                if progress is not None:
                    progress(len(batch))
            for projection in self.projections:
                projection.finish_bulk(conn)
            if last:
                self.track_all(conn, [(p.name, last) for p in self.projections])
        return count

    def rebuild(self, conn: Connection, events: Iterable[RecordedEvent], *, progress: Progress | None = None) -> int:
        """Drop and rebuild every projection in one transaction: readers see
        the old view until the new one commits whole."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            count = self.replace(conn, events, progress=progress)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return count

    def replace(self, conn: Connection, events: Iterable[RecordedEvent], *, progress: Progress | None = None) -> int:
        """Drop every projection and build it again, in the caller's transaction."""
        self.create_tracking(conn)
        with self.dropping(conn):
            for projection in self.projections:
                projection.drop(conn)
                conn.execute("DELETE FROM projection_tracking WHERE name = ?", (projection.name,))
        return self.build(conn, events, progress=progress)

    # -- comparing ---------------------------------------------------------

    def digest(self, conn: Connection) -> dict[str, str]:
        out: dict[str, str] = {}
        for projection in self.projections:
            for table, rows in projection.digest_rows(conn).items():
                h = hashlib.sha256()
                for row in rows:
                    # a blob where text belongs (a hand-edited file) is a
                    # difference to report, not an error to raise
                    h.update(
                        canonical_json([{"blob": v.hex()} if type(v) is bytes else v for v in row]).encode("utf-8")
                    )
                    h.update(b"\n")
                out[table] = h.hexdigest()
        return out

    def compare(self, live: Connection, rebuilt: Connection, rebuilt_by: Projector | None = None) -> CheckResult:
        """Compare the live view with one rebuilt from the log; ``rebuilt_by``
        is the rebuilt one's projector where it is another backend's (the
        same projections, by name, in its own tables)."""
        other = rebuilt_by or self
        a, b = self.digest(live), other.digest(rebuilt)
        digests = {k: (a[k], b.get(k, "")) for k in a}
        live_seq, rebuilt_seq = self.position(live), other.position(rebuilt)
        for projection, twin in zip(self.projections, other.projections, strict=True):
            rows_a, rows_b = projection.digest_rows(live), twin.digest_rows(rebuilt)
            for table in rows_a:
                if a[table] != b.get(table):
                    key = _first_difference(rows_a[table], rows_b[table])
                    return CheckResult(False, live_seq, rebuilt_seq, digests, table, key)
        return CheckResult(
            live_seq == rebuilt_seq,
            live_seq,
            rebuilt_seq,
            digests,
            None if live_seq == rebuilt_seq else "projection_tracking",
        )


@contextmanager
def pragma(conn: Connection, name: str, value: str | int) -> Iterator[None]:
    """A connection setting changed for a while, then given back."""
    row = conn.execute(f"PRAGMA {name}").fetchone()  # None where it does not apply (mmap of :memory:)
    conn.execute(f"PRAGMA {name}={value}")
    try:
        yield
    finally:
        if row is not None:
            conn.execute(f"PRAGMA {name}={row[0]}")


@contextmanager
def _dropping(conn: Connection) -> Iterator[None]:
    with bounded_cache(conn), pragma(conn, "secure_delete", "FAST"):
        yield


@contextmanager
def bounded_cache(conn: Connection, mb: int = BUILD_CACHE_MB) -> Iterator[None]:
    """The connection's page cache held to ``mb`` for a while, and no memory
    map: a build reads every page once, and a map would keep each one it
    touched resident (in the process's RSS) for no gain."""
    with pragma(conn, "cache_size", -mb * 1024), pragma(conn, "mmap_size", 0):
        yield


def _first_difference(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> str | None:
    by_key_a = {row[0]: row for row in a}
    by_key_b = {row[0]: row for row in b}
    for key in sorted(set(by_key_a) | set(by_key_b), key=str):
        if by_key_a.get(key) != by_key_b.get(key):
            return str(key)
    return None


def _batches(events: Iterable[RecordedEvent], size: int = BATCH) -> Iterator[list[RecordedEvent]]:
    batch: list[RecordedEvent] = []
    for event in events:
        batch.append(event)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _events_in(conn: Connection, after: int, until: int) -> Iterator[RecordedEvent]:
    tenants = legacy_tenants(on_sqlite(conn))
    while after < until:
        rows = conn.execute(
            f"SELECT {ROW_COLUMNS} FROM events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT {BATCH}",
            (after, until),
        ).fetchall()
        if not rows:
            return
        for row in rows:
            yield event_from_row(row, tenants)
        after = rows[-1][0]
