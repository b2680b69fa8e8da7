"""The usable view: inline with every append, equal to a rebuild and to a
replay, at every point of the history."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memwarden.engine import Warden
from memwarden.engine._history import build_view
from memwarden.events import FrozenClock, MemoryExpired, RecordedEvent
from memwarden.projections import COLUMNS, Projector, UsableProjection, fold_memory, select_rows

from .conftest import Cli, save_memory


def live_rows(w: Warden) -> dict[str, list[tuple[Any, ...]]]:
    return UsableProjection().digest_rows(w.conn)


def replay_rows(w: Warden, seq: int) -> dict[str, list[tuple[Any, ...]]]:
    conn = build_view(w, seq)
    try:
        return UsableProjection(text_source=None).digest_rows(conn)
    finally:
        conn.close()


def comparable(rows: dict[str, list[tuple[Any, ...]]]) -> dict[str, Any]:
    # the text index of a replay holds summaries only (it has no blobs)
    return {
        "memories": rows["memories"],
        "revocations": rows["revocations"],
        "policies": rows["policies"],
        "fts": [(r[0], r[1]) for r in rows["memories_fts"]],
    }


def history(w: Warden, clock: FrozenClock) -> None:
    save_memory(w, "a", summary="서울 날씨 요약", tenant="acme", ttl="1h")
    save_memory(w, "b", tenant="acme", project="p2", scope={"user": "kim"})
    save_memory(w, "c", tenant="globex", ttl=None, kind="permission")
    clock.advance("2h")
    w.log.append([MemoryExpired(tenant="acme", memory_id="a", version=1, expires_at="2026-01-05T10:00:00Z")])
    save_memory(w, "a", summary="서울 날씨 새 요약", tenant="acme", ttl="1h")
    w.set_policy("default", 2)
    save_memory(w, "d", tenant="acme")
    w.revoke({"tenant": "acme", "project": "p2"}, reason="leak")
    w.erase(memory_id="d", reason="asked")
    clock.advance("1h")
    save_memory(w, "e", tenant="globex", scope={"user": "kim"})


def test_inline_equals_rebuild_equals_replay(warden: Warden, clock: FrozenClock, run_cli: Cli) -> None:
    history(warden, clock)
    result = warden.check_projections()
    assert result.ok, result
    head = warden.log.head().seq
    assert comparable(replay_rows(warden, head)) == comparable(live_rows(warden))
    data = run_cli.json("projections", "check")
    assert data["ok"] is True
    rebuilt = run_cli.json("rebuild")
    assert rebuilt["ok"] and rebuilt["events"] == head
    assert warden.check_projections().ok


def test_replay_at_every_seq_equals_the_inline_view_then(warden: Warden, clock: FrozenClock) -> None:
    snapshots: dict[int, dict[str, Any]] = {}
    original = warden.projector.on_append

    def spy(conn: sqlite3.Connection, events: Any) -> None:
        original(conn, events)
        snapshots[events[-1].seq] = comparable(UsableProjection().digest_rows(conn))

    warden.log.subscribers = [spy]
    history(warden, clock)
    head = warden.log.head().seq
    assert sorted(snapshots)[-1] == head
    for seq in range(1, head + 1):
        expected = snapshots.get(seq)
        if expected is None:
            continue  # inside a multi-event batch: no inline state existed there
        assert comparable(replay_rows(warden, seq)) == expected, f"seq {seq}"


def test_replay_cli_as_of_and_seq(warden: Warden, clock: FrozenClock, run_cli: Cli) -> None:
    save_memory(warden, "old", ttl="1h")
    clock.advance("30m")
    mid = warden.now()
    clock.advance("1h")
    save_memory(warden, "new", ttl="1h")
    # at `mid`, "old" was still fresh and "new" did not exist
    at_mid = run_cli.json("replay", "--as-of", mid)
    assert [m["memory_id"] for m in at_mid["memories"]] == ["old"]
    assert at_mid["seq"] == 1
    now = run_cli.json("replay", "--seq", "2", "--tenant", "acme")
    assert [m["memory_id"] for m in now["memories"]] == ["new"]  # old had expired by then
    assert run_cli("replay").exit_code == 2
    assert run_cli("replay", "--as-of", "2026-01-05T10:00:00").exit_code == 2  # naive time
    # replay never touches the live view
    assert warden.check_projections().ok


def test_tracking_only_moves_forward(warden: Warden) -> None:
    for i in range(5):
        save_memory(warden, f"m{i}")
    conn = warden.conn
    warden.projector.track(conn, "usable", 2)
    assert warden.projector.positions(conn)["usable"] == 5
    warden.projector.track(conn, "usable", 9)
    assert warden.projector.positions(conn)["usable"] == 9


def test_a_behind_projection_catches_up_from_its_checkpoint(db_path: Path, clock: FrozenClock, tmp_path: Path) -> None:
    w = Warden(db_path, clock=clock)
    history(w, clock)
    expected = live_rows(w)
    w.close()
    # a copied database whose projections were never built (or were lost)
    copy = tmp_path / "copy.db"
    shutil.copy(db_path, copy)
    raw = sqlite3.connect(copy, isolation_level=None)
    for table in ("memories", "memories_fts", "revocations", "policies", "stats", "projection_tracking"):
        raw.execute(f"DROP TABLE {table}")
    raw.close()
    again = Warden(copy, clock=clock)
    assert live_rows(again)["memories"] == expected["memories"]
    assert again.check_projections().ok
    again.close()


def test_a_projection_in_another_database_file_catches_up(warden: Warden, clock: FrozenClock, tmp_path: Path) -> None:
    history(warden, clock)
    other = sqlite3.connect(tmp_path / "replica.db", isolation_level=None)
    projector = Projector()
    projector.install(other)
    first = warden.log.head().seq
    assert projector.catch_up(other, lambda after: warden.log.read(after_seq=after)) == first * 2  # two projections
    save_memory(warden, "late", tenant="acme")
    assert projector.catch_up(other, lambda after: warden.log.read(after_seq=after)) == 2
    assert projector.positions(other) == {"usable": first + 1, "stats": first + 1}
    assert UsableProjection().digest_rows(other)["memories"] == live_rows(warden)["memories"]
    other.close()


def test_projections_check_names_the_first_differing_memory(warden: Warden, clock: FrozenClock, run_cli: Cli) -> None:
    history(warden, clock)
    raw = sqlite3.connect(warden.path, isolation_level=None)
    raw.execute("UPDATE memories SET status = 'usable', reason = NULL WHERE memory_id = 'b'")
    raw.close()
    result = run_cli("projections", "check", "--json")
    assert result.exit_code == 1
    import json

    data = json.loads(result.stdout)
    assert data["ok"] is False and data["first_difference"] == "memories" and data["memory_id"] == "b"
    assert "memory b" in run_cli("projections", "check").stdout
    # a rebuild repairs the view from the log
    run_cli.json("rebuild")
    assert run_cli.json("projections", "check")["ok"] is True


def test_explain_saved_expired_reverified_revoked(
    warden: Warden, clock: FrozenClock, tmp_path: Path, run_cli: Cli
) -> None:
    source = tmp_path / "fact.txt"
    source.write_text("회의는 목요일 오후 3시", encoding="utf-8")
    warden.save(
        memory_id="meeting",
        kind="external_fact",
        summary="회의 시간",
        content=source.read_text("utf-8"),
        source_url=source.as_uri(),
        scope={"tenant": "acme"},
        ttl="1h",
    )
    clock.advance("2h")
    warden.log.append([MemoryExpired(tenant="acme", memory_id="meeting", version=1, expires_at="2026-01-05T10:00:00Z")])
    expired_at = warden.now()
    clock.advance("5m")
    assert warden.verify("meeting").outcome == "verified"
    verified_at = warden.now()
    clock.advance("5m")
    warden.revoke({"tenant": "acme"}, reason="contract ended")

    data = run_cli.json("explain", "meeting")
    assert [(h["event"], h["status_after"]) for h in data["history"]] == [
        ("memory.saved", "usable"),
        ("memory.expired", "expired"),
        ("memory.verified", "usable"),
        ("revocation.issued", "revoked"),
    ]
    assert data["usable"] is False and data["reason"] == "revoked"
    assert all(h["actor"] and h["recorded_at"] for h in data["history"])
    then = run_cli.json("explain", "meeting", "--as-of", expired_at)
    assert then["usable"] is False and then["reason"] == "expired" and len(then["history"]) == 2
    later = run_cli.json("explain", "meeting", "--as-of", verified_at)
    assert later["usable"] is True and later["history"][-1]["event"] == "memory.verified"
    text = run_cli("explain", "meeting")
    assert text.exit_code == 0 and "revocation.issued" in text.stdout and "NOT usable: revoked" in text.stdout
    assert run_cli("explain", "nobody").exit_code == 1


KILLED_WRITER = textwrap.dedent(
    """
    import sys
    from memwarden.engine import Warden
    w = Warden(sys.argv[1])
    i = 0
    while True:
        w.save(memory_id=f"k{i % 50}", kind="external_fact", summary=f"요약 {i}", content=f"내용 {i}",
               source_url="https://example.org", scope={"tenant": f"t{i % 3}"}, ttl="1h")
        if i % 7 == 0:
            w.revoke({"tenant": f"t{i % 3}", "ids": [f"k{(i + 1) % 50}"]}, reason="r")
        print(i, flush=True)
        i += 1
    """
)


def test_sigkill_between_appends_leaves_view_and_log_consistent(db_path: Path, tmp_path: Path) -> None:
    Warden(db_path).close()
    script = tmp_path / "writer.py"
    script.write_text(KILLED_WRITER)
    for round_ in range(5):
        proc = subprocess.Popen([sys.executable, str(script), str(db_path)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        proc.stdout.readline()
        time.sleep(0.1 + 0.07 * round_)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
        w = Warden(db_path)
        assert w.log.verify_chain().ok
        assert w.projector.position(w.conn) == w.log.head().seq
        assert w.check_projections().ok
        w.close()


@pytest.mark.parametrize("n", [0, 1])
def test_an_empty_log_has_an_empty_view(tmp_path: Path, n: int) -> None:
    w = Warden(tmp_path / f"e{n}.db")
    assert w.check_projections().ok
    assert w.replay(seq=0)["memories"] == []
    w.close()


STATUSES_FOR_FOLD = ["usable", "expired", "unknown", "revoked", "invalidated", "erased", "quarantined"]


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.tuples(st.sampled_from(STATUSES_FOR_FOLD), st.integers(1, 3)), min_size=1, max_size=6),
    hits=st.lists(st.tuples(st.integers(0, 7), st.integers(1, 3), st.sampled_from(["source_changed", "x"]))),
)
def test_a_batch_of_invalidations_equals_the_fold(
    rows: list[tuple[str, int]], hits: list[tuple[int, int, str]]
) -> None:
    """The set form of the cascade's writes (one UPDATE per batch) leaves
    every row as ``fold_memory`` would, one event at a time."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    view = UsableProjection(text_source=None)
    view.create(conn)
    stored = {}
    for n, (status, version) in enumerate(rows):
        row = {c: None for c in COLUMNS} | {
            "memory_id": f"m{n}",
            "version": version,
            "kind": "k",
            "status": status,
            "tenant": "t",
            "source_url": "s",
            "fetched_at": "2026-01-05T09:00:00.000000Z",
            "policy": "default",
            "revocation_version": "1",
            "checksum": "sha256:" + "0" * 64,
            "content_length": 0,
            "derived_from": "[]",
            "first_seq": n + 1,
            "last_seq": n + 1,
        }
        conn.execute(
            f"INSERT INTO memories (mid, {', '.join(COLUMNS)}) VALUES (?{', ?' * len(COLUMNS)})",
            [n + 1, *(row[c] for c in COLUMNS)],
        )
        stored[row["memory_id"]] = row
    events = [
        RecordedEvent(
            100 + k,
            f"e{k}",
            "memory.invalidated",
            f"m{target}",
            1,
            "t",
            "t",
            "a",
            1,
            {"tenant": "t", "memory_id": f"m{target}", "version": version, "reason": reason},
            "0",
            "0",
        )
        for k, (target, version, reason) in enumerate(hits)
    ]
    expected = dict(stored)
    for event in events:
        folded = fold_memory(expected.get(event.payload["memory_id"]), event, [])
        if folded is not None:
            expected[event.payload["memory_id"]] = folded
    view.apply(conn, events)
    got = {r["memory_id"]: r for r in select_rows(conn, "1", [])}
    for memory_id, row in expected.items():
        assert {c: v for c, v in got[memory_id].items() if v != row[c]} == {}, (memory_id, row)


def test_a_rebuild_streams_with_a_bounded_cache_and_gives_it_back(warden: Warden, clock: FrozenClock) -> None:
    from memwarden.projections._runner import BUILD_CACHE_MB

    history(warden, clock)
    before = warden.conn.execute("PRAGMA cache_size").fetchone()[0]
    mapped = warden.conn.execute("PRAGMA mmap_size").fetchone()[0]
    seen: list[tuple[int, int]] = []
    warden.rebuild(
        progress=lambda n: seen.append(
            (
                warden.conn.execute("PRAGMA cache_size").fetchone()[0],
                warden.conn.execute("PRAGMA mmap_size").fetchone()[0],
            )
        )
    )
    assert seen and set(seen) == {(-BUILD_CACHE_MB * 1024, 0)}
    assert warden.conn.execute("PRAGMA cache_size").fetchone()[0] == before
    assert warden.conn.execute("PRAGMA mmap_size").fetchone()[0] == mapped > 0
