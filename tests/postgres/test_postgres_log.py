"""The event log on PostgreSQL: gapless seqs under the head lock, the same
chain as SQLite byte for byte, a table that refuses to be rewritten, and
real processes appending at once or killed mid-append."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from memwarden.events import (
    EventIdReused,
    FrozenClock,
    LogDiverged,
    PostgresEventLog,
    RevocationIssued,
    Selector,
    SQLiteEventLog,
    StoreUnavailable,
    VersionConflict,
)

from ..conftest import START, saved
from ..log_processes import four_writers_at_once, writers_killed_at_random

KOREAN = '서울 본사 3층 회의실 🙂 \u0007 "인용" \\'


@pytest.fixture
def pg_log(pg_url: str, clock: FrozenClock) -> Iterator[PostgresEventLog]:
    log = PostgresEventLog(pg_url, clock=clock)
    yield log
    log.close()


def test_appends_get_gapless_seqs_stream_versions_and_a_valid_chain(pg_log: PostgresEventLog) -> None:
    assert pg_log.append([saved(1), saved(2)]) == [1, 2]
    assert pg_log.append([saved(1, version=2)]) == [3]
    events = list(pg_log.read())
    assert [e.seq for e in events] == [1, 2, 3]
    assert [e.stream_version for e in events] == [1, 1, 2]
    assert events[1].prev_hash == events[0].hash and events[2].prev_hash == events[1].hash
    report = pg_log.verify_chain()
    assert report.ok and report.head_seq == 3 and report.head_hash == events[2].hash == pg_log.head().hash


def test_korean_and_control_characters_round_trip_byte_for_byte(pg_log: PostgresEventLog) -> None:
    event = RevocationIssued(
        revocation_id="rev_1",
        selector=Selector(tenant="서울"),
        reason=KOREAN,
        issued_by="보안팀",
        effective_at=START,
        actor="보안팀",
    )
    pg_log.append([event])
    stored = next(pg_log.read())
    assert stored.payload["reason"] == KOREAN and stored.payload["selector"]["tenant"] == "서울"
    with pg_log.snapshot() as conn:
        (payload,) = conn.execute("SELECT payload FROM events WHERE seq = 1").fetchone()
    assert payload == stored.payload_json and payload.encode("utf-8") == stored.payload_json.encode("utf-8")
    assert pg_log.verify_chain().ok


def test_an_event_appended_again_is_a_no_op_and_a_reused_id_is_refused(pg_log: PostgresEventLog) -> None:
    event = saved(1)
    assert pg_log.append([event]) == [1]
    assert pg_log.append([event]) == [1]
    other = saved(2, event_id=event.event_id)
    with pytest.raises(EventIdReused):
        pg_log.append([other])
    with pytest.raises(VersionConflict):
        pg_log.append([saved(1, version=2)], expected_version=0)
    assert pg_log.head().seq == 1 and pg_log.count() == 1


def test_the_same_events_chain_to_the_same_hashes_as_on_sqlite(pg_log: PostgresEventLog, tmp_path: Path) -> None:
    clock = FrozenClock(START)
    sqlite_log = SQLiteEventLog(tmp_path / "same.db", clock=clock)
    batches = [[saved(1), saved(2, tenant="globex")], [saved(3, summary=KOREAN)], [saved(1, version=2)]]
    for batch in batches:
        assert sqlite_log.append(batch) == pg_log.append(batch)
    assert [e.hash for e in sqlite_log.read()] == [e.hash for e in pg_log.read()]
    assert sqlite_log.head() == pg_log.head()
    sqlite_log.close()


def test_an_import_keeps_seqs_and_hashes_and_goes_on_from_them(pg_url: str, tmp_path: Path) -> None:
    clock = FrozenClock(START)
    source = SQLiteEventLog(tmp_path / "source.db", clock=clock)
    source.append([saved(i) for i in range(200)])  # past the COPY threshold
    source.append([saved(1000, summary=KOREAN)])
    log = PostgresEventLog(pg_url, clock=clock)
    assert log.import_records(source.read()) == 201
    assert log.import_records(source.read()) == 0  # the same events again: nothing new
    assert [e.hash for e in log.read()] == [e.hash for e in source.read()]
    assert log.verify_chain().ok
    assert log.append([saved(2000)]) == [202]
    assert log.verify_chain().ok
    source.append([saved(3000)])  # the source went another way at seq 202
    with pytest.raises(LogDiverged):
        log.import_records(source.read())
    source.close()
    log.close()


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE events SET payload = '{}' WHERE seq = 1",
        "DELETE FROM events WHERE seq = 2",
        "TRUNCATE events",
        "UPDATE log_head SET seq = 0",
        "DELETE FROM log_head",
    ],
)
def test_the_log_refuses_to_be_rewritten(pg_log: PostgresEventLog, pg_url: str, statement: str) -> None:
    pg_log.append([saved(1), saved(2)])
    with psycopg.connect(pg_url, autocommit=True) as raw:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="memwarden"):
            raw.execute(statement)
    assert [e.seq for e in pg_log.read()] == [1, 2] and pg_log.verify_chain().ok


def test_verify_names_an_edit_made_behind_the_triggers(pg_log: PostgresEventLog, pg_url: str) -> None:
    """A superuser can switch the triggers off; the chain still tells."""
    pg_log.append([saved(i) for i in range(5)])
    with psycopg.connect(pg_url, autocommit=True) as raw:
        raw.execute("ALTER TABLE events DISABLE TRIGGER events_append_only")
        raw.execute("UPDATE events SET payload = replace(payload, 'example.org/2', 'example.org/X') WHERE seq = 3")
    report = pg_log.verify_chain()
    assert not report.ok and report.first_bad_seq == 3 and "hash mismatch" in (report.problem or "")
    with psycopg.connect(pg_url, autocommit=True) as raw:
        raw.execute("UPDATE events SET payload = replace(payload, 'example.org/X', 'example.org/2') WHERE seq = 3")
        raw.execute("DELETE FROM events WHERE seq = 5")
    report = pg_log.verify_chain()
    assert not report.ok and report.first_bad_seq == 5 and "truncated" in (report.problem or "")


def test_a_seq_is_the_head_plus_one_even_after_a_rolled_back_append(pg_log: PostgresEventLog) -> None:
    """No sequence object: a rolled-back transaction leaves no gap."""
    pg_log.append([saved(1)])
    with pytest.raises(RuntimeError), pg_log.transaction() as tx:
        tx.append([saved(2)])
        raise RuntimeError("rolled back")
    assert pg_log.append([saved(3)]) == [2]
    assert pg_log.verify_chain().ok


def test_four_processes_appending_at_once(pg_url: str, tmp_path: Path) -> None:
    four_writers_at_once(tmp_path, pg_url, "PostgresEventLog", lambda: PostgresEventLog(pg_url))


# twenty writer processes started, killed and checked one after another: past the suite's 120 s
# a test on a loaded machine
@pytest.mark.timeout(300)
def test_sigkill_at_random_points_loses_nothing_acknowledged(pg_url: str, tmp_path: Path) -> None:
    writers_killed_at_random(tmp_path, pg_url, "PostgresEventLog", lambda: PostgresEventLog(pg_url))


def test_a_read_never_waits_for_a_write_and_never_sees_it_uncommitted(pg_url: str, clock: FrozenClock) -> None:
    """Reads take a connection of the pool: a write transaction held open
    (a long revocation, a rebuild) does not stall them."""
    import threading

    log = PostgresEventLog(pg_url, clock=clock)
    log.append([saved(1)])
    seen: list[int] = []
    try:
        with log.transaction() as tx:
            tx.append([saved(2)])
            assert [e.seq for e in log.read()] == [1, 2]  # this thread reads its own write
            reader = threading.Thread(target=lambda: seen.extend(e.seq for e in log.read()))
            reader.start()
            reader.join(timeout=10)
            assert not reader.is_alive(), "a read waited for the open write transaction"
            assert seen == [1]  # the other thread sees only what was committed
        assert [e.seq for e in log.read()] == [1, 2]
    finally:
        log.close()


def test_a_statement_that_failed_inside_a_write_is_never_committed(pg_log: PostgresEventLog) -> None:
    from memwarden.events import StorageError

    with pytest.raises(StorageError, match="nothing was appended"), pg_log.transaction() as tx:
        tx.append([saved(1)])
        try:
            tx.conn.execute("SELECT 1/0")
        except psycopg.errors.DivisionByZero:
            pass  # swallowed: COMMIT would quietly roll back
    assert pg_log.head().seq == 0
    assert pg_log.append([saved(1)]) == [1]  # the connection is usable again


def test_identifiers_travel_as_one_text_and_a_separator_inside_one_is_refused() -> None:
    from memwarden.events._postgres_write import id_array

    assert id_array([]) == "" and id_array(["a"]) == "a" and id_array(["a", "서울"]) == "a\x1f서울"
    with pytest.raises(ValueError, match="U\\+001F"):
        id_array(["a\x1fb", "c"])


def test_opening_a_log_beside_a_running_writer_takes_no_table_lock(pg_url: str, clock: FrozenClock) -> None:
    """A process starting on a database whose schema exists runs no DDL: a
    CREATE OR REPLACE TRIGGER would queue behind the writers' locks, and
    they behind it (a deadlock seen with eight writers and a scheduler)."""
    import threading

    writer = PostgresEventLog(pg_url, clock=clock)
    opened: list[PostgresEventLog] = []
    try:
        with writer.transaction() as tx:
            tx.append([saved(1)])  # holds the events table and the head row until it commits
            starter = threading.Thread(target=lambda: opened.append(PostgresEventLog(pg_url, clock=clock)))
            starter.start()
            starter.join(timeout=10)
            assert not starter.is_alive(), "opening the log waited for the writer's transaction"
        assert opened[0].append([saved(2)]) == [2]
    finally:
        writer.close()
        for log in opened:
            log.close()


def test_a_write_that_cannot_take_the_head_lock_leaves_the_connection_usable(pg_url: str, clock: FrozenClock) -> None:
    holder = psycopg.connect(pg_url, autocommit=True)
    log = PostgresEventLog(pg_url, clock=clock)
    try:
        log.conn.execute("SET lock_timeout = '100ms'")
        with holder.transaction():
            holder.execute("SELECT 1 FROM log_head FOR UPDATE")
            with pytest.raises(StoreUnavailable, match="lock timeout") as raised:
                log.append([saved(1)])
            assert isinstance(raised.value.__cause__, psycopg.errors.LockNotAvailable)
        assert log.append([saved(1)]) == [1]
    finally:
        holder.close()
        log.close()


def test_a_single_append_refused_at_its_commit_appends_nothing(pg_url: str, clock: FrozenClock) -> None:
    """A log-only single append sends its row with the COMMIT: a refusal
    there (a row slipped in behind the head's back holds the next seq)
    rolls it all back and leaves the connection usable."""
    log = PostgresEventLog(pg_url, clock=clock)
    try:
        log.append([saved(1)])
        with psycopg.connect(pg_url, autocommit=True) as other:
            other.execute(
                "INSERT INTO events SELECT 2, 'intruder', type, 'elsewhere', 1, occurred_at, recorded_at, actor, "
                "schema_version, payload, prev_hash, hash FROM events WHERE seq = 1"
            )
        with pytest.raises(StoreUnavailable) as raised:
            log.append([saved(2)])
        assert isinstance(raised.value.__cause__, psycopg.errors.UniqueViolation)
        with log.snapshot() as conn:
            assert conn.execute("SELECT seq FROM log_head").fetchone()[0] == 1
            assert conn.execute("SELECT count(*) FROM events WHERE event_id <> 'intruder'").fetchone()[0] == 1
        assert log.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE  # usable again
        with pytest.raises(StoreUnavailable) as raised:  # refused again, the same way
            log.append([saved(3)])
        assert isinstance(raised.value.__cause__, psycopg.errors.UniqueViolation)
    finally:
        log.close()
