"""The planner on a store that grows from nothing: PostgreSQL keeps each
connection's generic plan of a prepared statement, made at its sixth run.
Made on a fresh store, that plan scans whole tables ever after, so the log
analyses the store as it doubles, and a small batch's lookup is planned at
each append. (This machine's server runs without autovacuum.)"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from memwarden.events import FrozenClock, PostgresEventLog

from ..conftest import saved


def _opened(url: str, clock: FrozenClock) -> PostgresEventLog:
    log = PostgresEventLog(url, clock=clock)
    # on a server with autovacuum on, it alone must not analyse mid-test
    log.conn.execute("ALTER TABLE events SET (autovacuum_enabled = false)")
    return log


@pytest.fixture
def pg_log(pg_url: str, clock: FrozenClock) -> Iterator[PostgresEventLog]:
    log = _opened(pg_url, clock)
    yield log
    log.close()


def _rows_planned_for(url: str) -> float:
    """What the planner's statistics hold of the events table (-1: never analysed)."""
    with psycopg.connect(url, autocommit=True) as conn:
        return float(conn.execute("SELECT reltuples FROM pg_class WHERE relname = 'events'").fetchone()[0])


def _append(log: PostgresEventLog, first: int, count: int, per_batch: int) -> None:
    for start in range(first, first + count, per_batch):
        log.append([saved(i, event_id=f"e{i}") for i in range(start, min(start + per_batch, first + count))])


def test_a_fresh_log_is_analysed_at_a_thousand_events_and_again_each_time_it_doubles(
    pg_log: PostgresEventLog, pg_url: str
) -> None:
    _append(pg_log, 0, 999, per_batch=111)
    assert _rows_planned_for(pg_url) == -1
    _append(pg_log, 999, 1, per_batch=1)
    assert _rows_planned_for(pg_url) == 1000
    _append(pg_log, 1000, 999, per_batch=333)
    assert _rows_planned_for(pg_url) == 1000  # not yet doubled
    _append(pg_log, 1999, 1, per_batch=1)
    assert _rows_planned_for(pg_url) == 2000


def test_a_process_opening_a_grown_log_analyses_when_it_has_doubled_from_there(pg_url: str, clock: FrozenClock) -> None:
    first = _opened(pg_url, clock)
    _append(first, 0, 1500, per_batch=500)  # analysed at 1,000
    first.close()
    assert _rows_planned_for(pg_url) == 1000
    later = _opened(pg_url, clock)
    try:
        _append(later, 1500, 1000, per_batch=500)  # 2,500: past 2x 1,000, but this process began at 1,500
        assert _rows_planned_for(pg_url) == 1000
        _append(later, 2500, 500, per_batch=500)  # 3,000: twice where it began
        assert _rows_planned_for(pg_url) == 3000
    finally:
        later.close()


def _prepared_lookups(log: PostgresEventLog) -> int:
    with log.snapshot():  # the writer's own connection: prepared statements are per session
        pass
    rows = log.conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
    return sum("string_to_array" in statement for (statement,) in rows)


def test_a_single_append_looks_up_with_a_fresh_plan_and_a_large_batch_with_a_prepared_one(
    pg_log: PostgresEventLog,
) -> None:
    _append(pg_log, 0, 20, per_batch=1)
    assert _prepared_lookups(pg_log) == 0  # twenty lookups of one id: none kept a plan
    _append(pg_log, 20, 8 * 100, per_batch=100)
    assert _prepared_lookups(pg_log) == 1
    # the log is right either way: every id seen again is a no-op at its seq
    again = pg_log.append([saved(3, event_id="e3"), saved(300, event_id="e300")])
    assert again == [4, 301]


def test_the_analysis_keeps_statistics_of_the_keys_not_of_the_payload_or_the_hashes(
    pg_log: PostgresEventLog, pg_url: str
) -> None:
    _append(pg_log, 0, 1000, per_batch=500)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        columns = {row[0] for row in conn.execute("SELECT attname FROM pg_stats WHERE tablename = 'events'")}
        analysed = {
            row[0] for row in conn.execute("SELECT relname FROM pg_stat_user_tables WHERE last_analyze IS NOT NULL")
        }
    assert {"seq", "event_id", "stream", "type"} <= columns
    assert not columns & {"payload", "prev_hash", "hash"}
    assert {"events", "log_head"} <= analysed
