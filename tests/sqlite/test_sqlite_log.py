from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from memwarden.events import (
    GENESIS_HASH,
    EventIdReused,
    FrozenClock,
    MemoryExpired,
    SQLiteEventLog,
    VersionConflict,
    content_checksum,
)

from ..conftest import saved


def test_append_assigns_gapless_seq_and_stream_versions(fresh_log: SQLiteEventLog) -> None:
    assert fresh_log.append([saved(1), saved(2)]) == [1, 2]
    assert fresh_log.append([saved(1, version=2)]) == [3]
    events = list(fresh_log.read())
    assert [(e.seq, e.stream, e.stream_version) for e in events] == [
        (1, "m1 acme", 1),
        (2, "m2 acme", 1),
        (3, "m1 acme", 2),
    ]
    assert events[0].prev_hash == GENESIS_HASH
    assert events[1].prev_hash == events[0].hash
    assert fresh_log.head().seq == 3 and fresh_log.head().hash == events[2].hash


def test_korean_payload_round_trips_byte_exact(fresh_log: SQLiteEventLog) -> None:
    event = saved(1, summary="서울 지사 출입 권한: 김민준 (2026년 1월)")
    fresh_log.append([event])
    stored = next(fresh_log.read())
    # the summary itself is kept outside the chain; the payload holds its checksum
    assert stored.payload["summary_checksum"] == content_checksum("서울 지사 출입 권한: 김민준 (2026년 1월)")
    assert "김민준".encode() not in stored.payload_json.encode()
    assert stored.to_model() == event.model_copy(update={"occurred_at": stored.to_model().occurred_at})


def test_same_event_again_is_a_no_op_returning_the_original_seq(fresh_log: SQLiteEventLog) -> None:
    event = saved(1)
    assert fresh_log.append([event]) == [1]
    fresh_log.append([saved(2)])
    assert fresh_log.append([event]) == [1]
    assert fresh_log.append([event, saved(3)]) == [1, 3]
    assert fresh_log.count() == 3


def test_the_same_event_twice_in_one_batch_is_written_once(fresh_log: SQLiteEventLog) -> None:
    event = saved(1)
    assert fresh_log.append([event, saved(2), event]) == [1, 2, 1]
    assert fresh_log.count() == 2
    with pytest.raises(EventIdReused, match="ev-twice"):
        fresh_log.append([saved(3, event_id="ev-twice"), saved(4, event_id="ev-twice")])
    assert fresh_log.count() == 2


def test_a_different_event_under_a_used_event_id_is_refused(fresh_log: SQLiteEventLog) -> None:
    fresh_log.append([saved(1, event_id="ev-fixed")])
    with pytest.raises(EventIdReused, match="ev-fixed.*already names another event") as refused:
        fresh_log.append([saved(2, event_id="ev-fixed")])
    assert "seq" not in str(refused.value), "the refusal does not say what holds the id"
    assert fresh_log.count() == 1


def test_expected_version_conflict_names_stream_and_versions(fresh_log: SQLiteEventLog) -> None:
    fresh_log.append([saved(1)])
    fresh_log.append(
        [MemoryExpired(tenant="acme", memory_id="m1", version=1, expires_at="2026-01-05T15:00:00Z")], expected_version=1
    )
    with pytest.raises(VersionConflict, match=r"stream 'm1 acme' is at version 2, but the append expected version 1"):
        fresh_log.append([saved(1, version=2)], expected_version=1)
    with pytest.raises(VersionConflict):
        fresh_log.append([saved(9)], expected_version={"m9 acme": 3})
    assert fresh_log.count() == 2


def test_batches_are_atomic(fresh_log: SQLiteEventLog) -> None:
    fresh_log.append([saved(1, event_id="taken")])
    with pytest.raises(EventIdReused):
        fresh_log.append([saved(2), saved(3), saved(4, event_id="taken")])
    assert fresh_log.count() == 1
    assert fresh_log.verify_chain().ok


def test_a_failing_subscriber_rolls_the_batch_back(db_path: Path, clock: FrozenClock) -> None:
    def explode(conn: sqlite3.Connection, events: object) -> None:
        raise RuntimeError("projection failed")

    log = SQLiteEventLog(db_path, clock=clock, subscribers=[explode])
    with pytest.raises(RuntimeError):
        log.append([saved(1)])
    assert log.count() == 0 and log.head().seq == 0


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE events SET payload = '{}' WHERE seq = 1",
        "UPDATE events SET seq = 99 WHERE seq = 1",
        "DELETE FROM events WHERE seq = 1",
        "DELETE FROM events",
    ],
)
def test_triggers_refuse_update_and_delete(fresh_log: SQLiteEventLog, db_path: Path, statement: str) -> None:
    fresh_log.append([saved(1)])
    raw = sqlite3.connect(db_path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute(statement)
    raw.close()
    assert fresh_log.verify_chain().ok and fresh_log.count() == 1


def test_read_by_seq_range_and_by_time(fresh_log: SQLiteEventLog, clock: FrozenClock) -> None:
    for i in range(1, 11):
        fresh_log.append([saved(i)])
        clock.advance("1m")
    assert [e.seq for e in fresh_log.read(after_seq=3, until_seq=6)] == [4, 5, 6]
    # events recorded at 09:00, 09:01, ... 09:09
    assert [e.seq for e in fresh_log.read(until_time="2026-01-05T09:04:30.000000Z")] == [1, 2, 3, 4, 5]
    assert fresh_log.seq_at("2026-01-05T08:00:00.000000Z") == 0
    assert fresh_log.seq_at("2026-01-06T00:00:00.000000Z") == 10


def test_recorded_at_never_goes_backwards(fresh_log: SQLiteEventLog, clock: FrozenClock) -> None:
    fresh_log.append([saved(1)])
    clock.advance("-1h") if False else clock.set("2026-01-05T08:00:00Z")  # the wall clock steps back
    fresh_log.append([saved(2)])
    first, second = fresh_log.read()
    assert second.recorded_at >= first.recorded_at
    assert fresh_log.verify_chain().ok


def test_read_streams_in_pages(fresh_log: SQLiteEventLog) -> None:
    fresh_log.append([saved(i) for i in range(5000)])
    iterator = fresh_log.read()
    assert next(iterator).seq == 1
    assert sum(1 for _ in iterator) == 4999


def test_verify_chain_range(fresh_log: SQLiteEventLog) -> None:
    fresh_log.append([saved(i) for i in range(20)])
    report = fresh_log.verify_chain(from_seq=5, to_seq=12)
    assert report.ok and report.checked == 8 and report.head_seq == 12


def test_synchronous_is_configurable_and_refuses_nonsense(tmp_path: Path) -> None:
    log = SQLiteEventLog(tmp_path / "a.db", synchronous="NORMAL")
    assert log.conn.execute("PRAGMA synchronous").fetchone()[0] == 1
    assert log.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with pytest.raises(ValueError, match="synchronous"):
        SQLiteEventLog(tmp_path / "b.db", synchronous="SOMETIMES")  # type: ignore[arg-type]
    default = SQLiteEventLog(tmp_path / "c.db")
    assert default.conn.execute("PRAGMA synchronous").fetchone()[0] == 2


def test_default_event_ids_sort_by_creation() -> None:
    """Time-ordered ids keep the event_id index's inserts at its right edge."""
    from memwarden.events import new_id

    ids = [new_id("ev_") for _ in range(2000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert all(len(i) == len(ids[0]) for i in ids)


def test_reads_are_memory_mapped_unless_turned_off(tmp_path: Path) -> None:
    mapped = SQLiteEventLog(tmp_path / "a.db")
    plain = SQLiteEventLog(tmp_path / "b.db", mmap_mb=0)
    assert mapped.conn.execute("PRAGMA mmap_size").fetchone()[0] == 1024 * 1024 * 1024
    assert plain.conn.execute("PRAGMA mmap_size").fetchone()[0] == 0
    mapped.close()
    plain.close()
