"""The log gives its page cache's clean pages back after a large write and
now and then after small ones; the pages a transaction changes stay until
it commits."""

from __future__ import annotations

from memwarden.events import SQLiteEventLog
from memwarden.events._sqlite import RELEASE_AFTER_ROWS, RELEASE_EVERY

from ..conftest import saved


def releases(log: SQLiteEventLog) -> list[str]:
    seen: list[str] = []
    log.conn.set_trace_callback(lambda sql: seen.append(sql) if "shrink_memory" in sql else None)
    return seen


def test_a_large_commit_releases_the_cache_after_it_commits(fresh_log: SQLiteEventLog) -> None:
    statements: list[str] = []
    fresh_log.conn.set_trace_callback(statements.append)
    fresh_log.append([saved(i) for i in range(RELEASE_AFTER_ROWS)])
    assert statements[-2:] == ["COMMIT", "PRAGMA shrink_memory"]
    assert len(list(fresh_log.read())) == RELEASE_AFTER_ROWS


def test_small_commits_release_it_every_so_often(fresh_log: SQLiteEventLog) -> None:
    seen = releases(fresh_log)
    for i in range(RELEASE_EVERY - 1):
        fresh_log.append([saved(i)])
    assert seen == []
    fresh_log.append([saved(RELEASE_EVERY)])
    assert seen == ["PRAGMA shrink_memory"]


def test_a_rolled_back_write_releases_nothing_and_the_log_is_unchanged(fresh_log: SQLiteEventLog) -> None:
    seen = releases(fresh_log)
    try:
        with fresh_log.transaction() as tx:
            tx.append([saved(i) for i in range(RELEASE_AFTER_ROWS)])
            raise RuntimeError("rolled back")
    except RuntimeError:
        pass
    assert seen == [] and fresh_log.head().seq == 0


def test_a_release_tells_whoever_asked_and_a_library_asks_no_one(fresh_log: SQLiteEventLog) -> None:
    assert fresh_log.after_release == []  # the heap is the application's
    told: list[str] = []
    fresh_log.after_release.append(lambda: told.append("released"))
    fresh_log.append([saved(i) for i in range(RELEASE_AFTER_ROWS)])
    assert told == ["released"]


def test_the_servers_heap_trim_is_harmless_anywhere() -> None:
    from memwarden.engine.faces._cli_serve import trim_heap

    if trim_heap is not None:
        trim_heap()
        trim_heap()
