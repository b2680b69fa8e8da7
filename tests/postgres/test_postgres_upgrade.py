"""A store made by an older version, opened by this one: the indexes this
version adds are built with ``CREATE INDEX CONCURRENTLY`` before the
install takes the head lock, so the processes still on the older version
go on appending while they build; one process builds, an index a dead
build left invalid is built again, and an index no longer read goes once
its replacement is valid."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from memwarden.engine import OPERATOR, StoreUnavailable, Warden
from memwarden.projections._postgres_watch import Claims

from ..conftest import Cli
from .statements import recorded_statements

COVERING = "memories_usable_view"
NARROW = "memories_usable_by_project"


def _older_store(url: str, memories: int = 50) -> None:
    """A store as the version before the covering index left it."""
    w = Warden(url)
    w.save_many(
        [
            {
                "memory_id": f"m{i}",
                "kind": "external_fact",
                "summary": f"요약 {i}",
                "content": f"서울 지사 기록 {i}",
                "source_url": f"https://src.example/{i}",
                "scope": {"tenant": "t1", "project": f"p{i % 3}"},
                "ttl": "1d",
            }
            for i in range(memories)
        ],
        caller=OPERATOR,
    )
    w.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP INDEX {COVERING}")
        conn.execute(f"CREATE INDEX {NARROW} ON memories (tenant, project, last_seq) WHERE status = 'usable'")


def _indexes(url: str) -> dict[str, tuple[bool, str]]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname, i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid "
            "WHERE t.relname = 'memories'"
        ).fetchall()
    return {name: (valid, definition) for name, valid, definition in rows}


def _leave_a_dead_build(url: str) -> None:
    """What a build killed halfway leaves: the name taken, the index invalid."""
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            conn.execute(f"CREATE UNIQUE INDEX CONCURRENTLY {COVERING} ON memories (tenant)")
        except psycopg.errors.UniqueViolation:
            pass
    assert _indexes(url)[COVERING][0] is False


def test_an_older_store_gets_the_covering_index_built_concurrently_outside_the_head_lock(pg_url: str) -> None:
    _older_store(pg_url)
    head_free: list[bool] = []

    with recorded_statements(this_thread=False) as seen:
        recording = psycopg.Connection.execute

        def probing(self: psycopg.Connection, query: Any, params: Any = None, **kwargs: Any) -> Any:
            if "CREATE INDEX CONCURRENTLY" in str(query) and COVERING in str(query):
                # another node's writer, as the build starts: it gets the head row at once
                with psycopg.connect(pg_url) as other:
                    row = recording(other, "SELECT seq FROM log_head FOR UPDATE NOWAIT").fetchone()
                    head_free.append(row is not None)
            return recording(self, query, params, **kwargs)

        psycopg.Connection.execute = probing  # type: ignore[method-assign]
        w = Warden(pg_url)
    builds = [(sql, status) for sql, _, status in seen if COVERING in sql and "CREATE INDEX" in sql]
    assert builds and "CONCURRENTLY" in builds[0][0]
    assert builds[0][1] == psycopg.pq.TransactionStatus.IDLE  # no transaction: no lock held beside it
    assert head_free == [True]
    indexes = _indexes(pg_url)
    assert indexes[COVERING][0] and "INCLUDE" in indexes[COVERING][1]
    assert NARROW not in indexes
    assert [v.memory_id for v in w.query(tenant="t1", project="p1", limit=3, caller=OPERATOR)] == ["m49", "m46", "m43"]
    w.close()


def test_an_index_a_dead_build_left_invalid_is_built_again(pg_url: str) -> None:
    _older_store(pg_url)
    _leave_a_dead_build(pg_url)
    Warden(pg_url).close()
    valid, definition = _indexes(pg_url)[COVERING]
    assert valid and "INCLUDE" in definition and "UNIQUE" not in definition


def test_while_another_process_holds_the_build_this_one_leaves_it_alone(pg_url: str) -> None:
    """The process holding the claim builds; one opening beside it builds
    nothing concurrently (its install creates what is still missing, as
    before) and drops nothing."""
    _older_store(pg_url)
    other = Claims(pg_url)
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with other.claim("memwarden index build") as mine:
            assert mine
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    try:
        with recorded_statements(this_thread=False) as seen:
            Warden(pg_url).close()
    finally:
        release.set()
        holder.join()
        other.close()
    assert not [sql for sql, *_ in seen if "CONCURRENTLY" in sql]
    assert _indexes(pg_url)[COVERING][0]
    assert NARROW in _indexes(pg_url)  # the builder drops it, once its replacement is valid
    Warden(pg_url).close()  # the next process to hold the claim
    assert NARROW not in _indexes(pg_url)


def test_a_store_of_this_version_opens_without_building_or_claiming_anything(pg_url: str) -> None:
    Warden(pg_url).close()
    with recorded_statements(this_thread=False) as seen:
        Warden(pg_url).close()
    assert not [sql for sql, *_ in seen if "CONCURRENTLY" in sql or "pg_try_advisory_lock" in sql]


def test_a_process_opening_beside_a_build_in_progress_does_not_wait_for_it(pg_url: str) -> None:
    """While another process builds (its claim held, its index there and not
    yet valid, the table under the lock a concurrent build holds), a
    process opening the store neither builds nor waits: its install finds
    the name taken and takes no lock on the table."""
    _older_store(pg_url)
    _leave_a_dead_build(pg_url)  # as the build in progress stands in the catalog
    builder = psycopg.connect(pg_url)
    builder.execute("LOCK TABLE memories IN SHARE UPDATE EXCLUSIVE MODE")
    claims = Claims(pg_url)
    try:
        with claims.claim("memwarden index build") as mine:
            assert mine
            # a lock wait fails the test (lock_timeout raises) instead of hanging it
            w = Warden(f"{pg_url}?options=-c%20lock_timeout%3D5000")
            assert w.save(
                memory_id="new",
                kind="external_fact",
                summary="요약",
                content="서울",
                source_url="https://src.example/new",
                scope={"tenant": "t1", "project": "p1"},
                caller=OPERATOR,
            ).seq
            w.close()
    finally:
        builder.rollback()
        builder.close()
        claims.close()


def test_a_lock_timeout_while_opening_is_named_as_one_not_as_an_unreachable_server(pg_url: str) -> None:
    Warden(pg_url).close()
    writer = psycopg.connect(pg_url)
    writer.execute("SELECT seq FROM log_head FOR UPDATE")  # another node's write in progress
    waiting = f"{pg_url}?options=-c%20lock_timeout%3D200"
    try:
        with pytest.raises(StoreUnavailable, match="lock timeout") as raised:
            Warden(waiting)
        assert isinstance(raised.value.__cause__, psycopg.errors.LockNotAvailable)
        result = Cli(waiting)("query", "--tenant", "t1", "--json")
        assert result.exit_code == 2, result.output
        assert "lock timeout" in result.stderr
        assert "cannot connect" not in result.stderr and "file damaged" not in result.stderr
    finally:
        writer.rollback()
        writer.close()


def test_a_store_made_before_final_sink_outcomes_gains_the_column(pg_url: str) -> None:
    Warden(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:  # the table as the version before made it
        conn.execute("ALTER TABLE sink_readbacks DROP COLUMN final_seq")
    Warden(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        found = conn.execute(
            "SELECT data_type FROM information_schema.columns WHERE table_name = 'sink_readbacks' "
            "AND column_name = 'final_seq'"
        ).fetchall()
    assert found == [("bigint",)]
