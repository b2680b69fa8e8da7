"""The log gives its page cache's clean pages back after a large write and
now and then after small ones; the pages a transaction changes stay until
it commits."""

from __future__ import annotations

import ctypes
import ctypes.util
from pathlib import Path

import pytest
from memwarden.engine.faces._own_process import malloc_trim, trim_heap
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


def rss_anon_kb() -> int:
    status = Path("/proc/self/status").read_text(encoding="ascii")
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("RssAnon:"))


def test_the_servers_heap_trim_says_whether_it_could() -> None:
    assert trim_heap() is (malloc_trim() is not None)


@pytest.mark.skipif(
    malloc_trim() is None or not Path("/proc/self/status").exists(), reason="glibc's malloc_trim and Linux's /proc"
)
def test_the_servers_heap_trim_gives_freed_pages_back_to_the_os() -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    block, count = 4096, 8192  # 32 MB in blocks under the mmap threshold: on the heap, as a page cache's
    blocks = [libc.malloc(block) for _ in range(count)]
    assert all(blocks)
    for b in blocks:
        ctypes.memset(b, 1, block)  # touched: resident
    above = libc.malloc(block)  # live, above them: the heap cannot shrink from its top
    ctypes.memset(above, 1, block)
    for b in blocks:
        libc.free(b)
    try:
        kept = rss_anon_kb()
        assert trim_heap()
        given_back = kept - rss_anon_kb()
    finally:
        libc.free(above)
    # most of the 32 MB freed in the middle of the heap is the OS's again
    assert given_back >= block * count // 1024 // 2, given_back
