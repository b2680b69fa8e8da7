"""``verify_chain`` for the SQLite log: a long range split across processes.

Each process checks its range with ``check_rows``, the one definition of
damage, which hashes each row with the append's own preimage
(``row_hash``); the links between the ranges are checked here.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from ._recorded import EMPTY_HEAD, ROW_COLUMNS, ChainReport, Head, Row, chain_end, check_rows


class ChainedFile(Protocol):
    """What the check needs of the SQLite log (which passes itself)."""

    path: str
    conn: sqlite3.Connection

    @property
    def lock(self) -> threading.RLock: ...
    def snapshot(self) -> AbstractContextManager[sqlite3.Connection]: ...
    def head_in(self, conn: sqlite3.Connection) -> Head: ...


# the pool holds audit verify's target (>= 300,000 events/s over 1M); below
# this a second process costs more than it saves
PARALLEL_FROM = 200_000
PAGE = 5000

Fetch = Callable[[str, tuple[Any, ...]], list[Any]]


@dataclass(frozen=True)
class RangeResult:
    checked: int
    last: Head
    first: tuple[int, str, str] | None  # (seq, prev_hash, recorded_at) of the range's first row
    first_bad: int | None = None
    problem: str | None = None


def check_range(rows: Iterator[Row], after: int, prev: Head | None) -> RangeResult:
    """Check rows ``after < seq`` with ``check_rows``; with ``prev`` None the
    first link is left to the caller, who knows the hash of the range before."""
    checked = 0
    last = prev or Head(after, "", None)
    first: tuple[int, str, str] | None = None
    for row, damage in check_rows(
        rows, prev_seq=after, prev_hash=prev.hash if prev else None, prev_time=prev.recorded_at if prev else None
    ):
        if first is None:
            first = (row[0], row[10], row[6])
        if damage is not None:
            return RangeResult(checked, last, first, damage.first_bad, damage.problem)
        checked += 1
        last = Head(row[0], row[11], row[6])
    return RangeResult(checked, last, first)


def _full_rows(fetch: Fetch, after: int, until: int) -> Iterator[Row]:
    last = after
    while last < until:
        page = fetch(
            f"SELECT {ROW_COLUMNS} FROM events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT {PAGE}", (last, until)
        )
        if not page:
            return
        yield from page
        last = page[-1][0]


def verify_range(path: str, after: int, until: int) -> RangeResult:
    """A worker process's share of ``verify_chain``."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    try:
        rows = _full_rows(lambda sql, params: conn.execute(sql, params).fetchall(), after, until)
        return check_range(rows, after, None)
    finally:
        conn.close()


def verify_chain(
    log: ChainedFile, from_seq: int = 1, to_seq: int | None = None, *, workers: int | None = None
) -> ChainReport:
    """``SQLiteEventLog.verify_chain``: the ranges are checked in parallel;
    the links between them are checked here."""

    def locked(sql: str, params: tuple[Any, ...]) -> list[Any]:
        with log.lock:
            return log.conn.execute(sql, params).fetchall()

    from_seq = max(from_seq, 1)
    with log.snapshot() as conn:  # the head and the issued count, seen together
        head = log.head_in(conn)
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
        issued = row[0] if row else 0
    end = head.seq if to_seq is None else min(to_seq, head.seq)
    with log.lock:
        if from_seq == 1:
            prev = EMPTY_HEAD
        else:
            row = log.conn.execute(
                "SELECT seq, hash, recorded_at FROM events WHERE seq = ?", (from_seq - 1,)
            ).fetchone()
            if row is None:
                return ChainReport(
                    False, head.seq, EMPTY_HEAD.hash, 0, from_seq - 1, f"gap: seq {from_seq - 1} is missing"
                )
            prev = Head(*row)
    span = max(end - from_seq + 1, 0)
    if workers is None:
        workers = min(os.cpu_count() or 1, 8) if span >= PARALLEL_FROM and log.path != ":memory:" else 1
    if threading.active_count() > 1 or log.path == ":memory:":
        # workers are forked (spawn would re-run the caller's __main__);
        # forking a threaded process is not safe, so verify in-process
        workers = 1
    bounds = [from_seq - 1 + span * k // workers for k in range(workers + 1)]
    parts: list[RangeResult] = []
    futures = []
    pool = None
    if workers > 1:
        # imported by a verification that forks, not by every store that opens
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(max_workers=workers - 1, mp_context=multiprocessing.get_context("fork"))
        futures = [pool.submit(verify_range, log.path, bounds[k], bounds[k + 1]) for k in range(1, workers)]
    try:
        parts.append(check_range(_full_rows(locked, bounds[0], bounds[1]), bounds[0], prev))
        parts.extend(f.result() for f in futures)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    checked = 0
    last = prev

    def broken(seq: int, problem: str) -> ChainReport:
        # reads ``last`` and ``checked`` as they are when a seam fails
        return ChainReport(False, head.seq, last.hash, checked, seq, problem)

    for k, part in enumerate(parts):
        if k > 0 and part.first is not None:
            first_seq, first_prev, first_time = part.first
            if last.seq != bounds[k]:
                return broken(
                    last.seq + 1, f"gap: seq {last.seq + 1} is missing (seq {first_seq} follows seq {last.seq})"
                )
            # the part's own finding at its first row comes first, as in one pass
            own_first = first_seq != bounds[k] + 1 or (part.problem is not None and part.first_bad == first_seq)
            if not own_first and first_prev != last.hash:
                return broken(first_seq, f"broken link: prev_hash does not match the hash of seq {last.seq}")
            if last.recorded_at is not None and first_time < last.recorded_at:
                return broken(first_seq, f"reordering: recorded_at {first_time} is earlier than seq {last.seq}'s")
        if part.problem is not None:
            return ChainReport(
                False,
                head.seq,
                part.last.hash if part.checked else last.hash,
                checked + part.checked,
                part.first_bad,
                part.problem,
            )
        checked += part.checked
        if part.checked:
            last = part.last
    return chain_end(head.seq, last, checked, end=end, issued=issued, whole=to_seq is None)
