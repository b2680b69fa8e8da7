from __future__ import annotations

import json
from pathlib import Path

import pytest
from memwarden.engine import OPERATOR, Warden
from memwarden.events import (
    EventIdReused,
    FrozenClock,
    JsonlEventLog,
    LogDamaged,
    MemoryExpired,
    VersionConflict,
    read_verified,
    verify_file,
)

from .backends import Backend
from .conftest import Cli, save_memory, saved


@pytest.fixture
def exported(warden: Warden, tmp_path: Path, clock: FrozenClock) -> Path:
    for i in range(12):
        save_memory(warden, f"m{i}", content=f"한국어 내용 {i} — naïve ☃", summary=f"한국어 요약 {i}")
        clock.advance("1m")
    warden.revoke({"tenant": "acme", "ids": ["m3"]}, reason="test", caller=OPERATOR)
    warden.set_policy("default", 2, caller=OPERATOR)
    path = tmp_path / "log.jsonl"
    assert warden.export(path, caller=OPERATOR) == 14
    return path


def test_export_then_import_gives_identical_hashes(
    exported: Path, warden: Warden, tmp_path: Path, run_cli: Cli, backend: Backend
) -> None:
    other = Warden(backend.db(tmp_path, "other.db"))
    assert other.import_log(exported, caller=OPERATOR) == 14
    assert [e.hash for e in other.log.read()] == [e.hash for e in warden.log.read()]
    assert other.log.verify_chain().ok
    # the view is rebuilt inline from the imported events
    assert other.get("m3", caller=OPERATOR).reason == "revoked"
    assert other.policies(caller=OPERATOR) == {"default": 2}
    # importing again is a no-op; the exported lines are the canonical envelopes
    assert other.import_log(exported, caller=OPERATOR) == 0
    lines = exported.read_text(encoding="utf-8").splitlines()
    # events carry checksums; the texts travel on their own lines, UTF-8 unescaped
    assert "한국어" not in lines[0] and any("한국어" in line and line.startswith('{"texts":') for line in lines)
    assert not any("\\u" in line for line in lines)
    other.close()


def test_cli_export_import(exported: Path, tmp_path: Path, backend: Backend) -> None:
    target = Cli(backend.db(tmp_path, "cli.db"))
    assert target.json("import", str(exported)) == {"events": 14}
    again = tmp_path / "again.jsonl"
    assert target.json("export", str(again)) == {"events": 14}
    assert again.read_bytes() == exported.read_bytes()


@pytest.mark.parametrize("line_no", [1, 5, 14])
def test_one_altered_line_is_refused_with_its_number(
    exported: Path, tmp_path: Path, line_no: int, backend: Backend
) -> None:
    lines = exported.read_text(encoding="utf-8").splitlines(keepends=True)
    data = json.loads(lines[line_no - 1])
    data["actor"] = data["actor"] + "x"
    lines[line_no - 1] = json.dumps(data, ensure_ascii=False) + "\n"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(LogDamaged, match=f"^line {line_no}: hash mismatch") as info:
        verify_file(bad)
    assert info.value.line == line_no

    target = Cli(backend.db(tmp_path, "target.db"))
    result = target("import", str(bad))
    assert result.exit_code == 2 and f"line {line_no}" in result.stderr
    assert target.json("audit", "head")["seq"] == 0  # nothing written


def test_damage_of_every_kind_names_the_line(exported: Path, tmp_path: Path) -> None:
    lines = exported.read_text(encoding="utf-8").splitlines(keepends=True)
    cases = {
        "not json": lines[:3] + ["{oops\n"] + lines[4:],
        "dropped": lines[:3] + lines[4:],
        "swapped": lines[:3] + [lines[4], lines[3]] + lines[5:],
        "torn": lines[:-1] + [lines[-1][:-20]],
    }
    torn_line = len(lines)
    expected = {
        "not json": (4, "not valid JSON"),
        "dropped": (4, "gap"),
        "swapped": (4, "gap"),
        "torn": (torn_line, "incomplete last line"),
    }
    for name, content in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(content), encoding="utf-8")
        with pytest.raises(LogDamaged) as info:
            verify_file(path)
        line, problem = expected[name]
        assert info.value.line == line, name
        assert problem in str(info.value), name


def test_import_into_a_diverged_log_is_refused(exported: Path, tmp_path: Path, backend: Backend) -> None:
    other = Warden(backend.db(tmp_path, "other.db"))
    save_memory(other, "something-else")
    from memwarden.events import LogDiverged

    with pytest.raises(LogDiverged, match="seq 1"):
        other.import_log(exported, caller=OPERATOR)
    assert other.log.head().seq == 1
    other.close()


def test_an_event_invalid_for_its_model_is_refused(tmp_path: Path, clock: FrozenClock) -> None:
    log = JsonlEventLog(tmp_path / "x.jsonl", clock=clock)
    log.append([saved(1)])
    # rewrite the payload to break the model, then re-chain it so only the model check can catch it
    from memwarden.events._jsonl import parse_line
    from memwarden.events._recorded import row_hash

    row = list(parse_line((tmp_path / "x.jsonl").read_text(encoding="utf-8"), 1))
    payload = json.loads(row[9])
    payload["content_checksum"] = "sha256:nothex"
    from memwarden.events import canonical_json

    row[9] = canonical_json(payload)
    row[11] = row_hash(tuple(row))  # type: ignore[arg-type]
    keys = (
        "seq",
        "event_id",
        "type",
        "stream",
        "stream_version",
        "occurred_at",
        "recorded_at",
        "actor",
        "schema_version",
        "payload",
        "prev_hash",
        "hash",
    )
    envelope = dict(zip(keys, row, strict=True))
    envelope["payload"] = payload
    (tmp_path / "y.jsonl").write_text(canonical_json(envelope) + "\n", encoding="utf-8")
    with pytest.raises(LogDamaged, match="line 1: event at seq 1 is not a valid memory.saved"):
        list(read_verified(tmp_path / "y.jsonl"))


def test_jsonl_log_offers_the_same_interface(tmp_path: Path, clock: FrozenClock) -> None:
    path = tmp_path / "log.jsonl"
    log = JsonlEventLog(path, clock=clock)
    assert log.append([saved(1), saved(2)]) == [1, 2]
    event = saved(3)
    assert log.append([event]) == [3]
    assert log.append([event]) == [3]  # idempotent
    with pytest.raises(EventIdReused):
        log.append([saved(4, event_id=event.event_id)])
    with pytest.raises(VersionConflict):
        log.append(
            [MemoryExpired(tenant="acme", memory_id="m1", version=1, expires_at="2026-01-05T15:00:00Z")],
            expected_version=5,
        )
    assert log.head().seq == 3 and log.verify_chain().ok
    assert [e.seq for e in log.read(after_seq=1)] == [2, 3]
    # a reopened log knows its head, ids and stream versions
    again = JsonlEventLog(path, clock=clock)
    assert again.head() == log.head()
    assert again.append([event]) == [3]
    assert again.append([saved(1, version=2)]) == [4]
    assert [e.stream_version for e in again.read() if e.stream == "m1 acme"] == [1, 2]
    # the file verifies as an export, and imports into SQLite
    assert verify_file(path) == 4


def test_jsonl_log_cuts_a_torn_unacknowledged_tail(tmp_path: Path, clock: FrozenClock) -> None:
    path = tmp_path / "log.jsonl"
    log = JsonlEventLog(path, clock=clock)
    log.append([saved(1), saved(2)])
    with open(path, "ab") as fh:
        fh.write(b'{"seq":3,"event_id":"half')
    reopened = JsonlEventLog(path, clock=clock)
    assert reopened.head().seq == 2
    assert reopened.append([saved(3)]) == [3]
    assert verify_file(path) == 3


@pytest.mark.parametrize("latency_ms", [0.00001, 1.5e-07, 0.25, 1e16])
def test_floats_orjson_spells_otherwise_round_trip_byte_exact(
    warden: Warden, tmp_path: Path, latency_ms: float, backend: Backend
) -> None:
    """A read-back latency under 1e-4 is stored as json writes it (1e-05,
    not orjson's 0.00001): export, import and an idempotent re-append all
    re-encode it, and each must give the very bytes the hash covers."""
    from memwarden.events import ReadbackConfirmed

    event = ReadbackConfirmed(revocation_id="rev-1", paths_checked=("query",), covered=0, latency_ms=latency_ms)
    (seq,) = warden.log.append([event])
    stored = next(warden.log.read(after_seq=seq - 1, until_seq=seq)).payload_json
    assert f'"latency_ms":{json.dumps(latency_ms)}' in stored
    assert warden.log.append([event]) == [seq]  # re-encoded, found equal: no EventIdReused
    path = tmp_path / "floats.jsonl"
    warden.export(path, caller=OPERATOR)
    other = Warden(backend.db(tmp_path, "other.db"))
    assert other.import_log(path, caller=OPERATOR) == seq
    assert [e.hash for e in other.log.read()] == [e.hash for e in warden.log.read()]
    other.close()


def test_a_line_longer_than_the_store_holds_is_refused_before_it_is_read_whole(
    exported: Path, tmp_path: Path, backend: Backend
) -> None:
    import dataclasses
    import tracemalloc

    huge = tmp_path / "huge.jsonl"
    lines = exported.read_bytes().splitlines(keepends=True)
    with open(huge, "wb") as fh:
        fh.writelines(lines[:3])
        fh.write(b'{"seq": 4, "payload": "' + b"x" * (40 * 1024 * 1024) + b'"}\n')  # 40 MB on one line
    other = Warden(backend.db(tmp_path, "target.db"))
    other.limits = dataclasses.replace(other.limits, max_content_bytes=10_000)
    try:
        tracemalloc.start()
        with pytest.raises(LogDamaged, match=r"^line 4: a line longer than \d+ bytes") as refused:
            other.import_log(huge, caller=OPERATOR)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert refused.value.line == 4
        assert peak < 4 * 1024 * 1024, peak  # the line's first bytes only, not its 40 MB
        assert other.head_seq() == 0
    finally:
        other.close()
