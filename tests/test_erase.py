"""Erasure destroys the text everywhere it was kept; the history stays."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from memwarden.engine import MemoryErased, Warden
from memwarden.projections import purge_text_index, text_index_levels
from memwarden.projections._text_index import MAX_LEVELS

from .conftest import Cli, save_memory

SECRET = "주민등록번호 900101-1234567 SECRETMARKER"


def raw_files(db: Path) -> bytes:
    data = b""
    for suffix in ("", "-wal", "-shm", "-journal"):
        path = Path(str(db) + suffix)
        if path.exists():
            data += path.read_bytes()
    return data


def test_erase_destroys_the_text_in_every_file(warden: Warden, run_cli: Cli) -> None:
    save_memory(warden, "pii", content=SECRET, summary="개인 정보", scope={"user": "kim"})
    save_memory(warden, "keep", content="nothing secret here")
    for i in range(30):  # push the text through pages, the WAL and FTS segments
        save_memory(warden, f"filler{i}", content=f"filler text {i} " * 20)
    assert warden.query(tenant="acme", text="SECRETMARKER")[0].memory_id == "pii"
    assert SECRET.encode() in raw_files(Path(warden.path))

    assert run_cli.json("erase", "--id", "pii", "--reason", "GDPR art. 17") == {"erased": 1}
    warden.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = raw_files(Path(warden.path))
    assert SECRET.encode() not in raw
    assert b"SECRETMARKER" not in raw and b"900101" not in raw
    assert warden.query(tenant="acme", text="SECRETMARKER") == []
    assert warden.search_ids("SECRETMARKER") == []

    view = warden.get("pii")
    assert not view.usable and view.reason == "erased" and view.content is None and view.summary is None
    assert run_cli.json("audit", "verify")["ok"] is True
    explained = run_cli.json("explain", "pii")
    assert [h["event"] for h in explained["history"]] == ["memory.saved", "memory.erased"]
    assert "SECRETMARKER" not in str(explained)
    with pytest.raises(MemoryErased):
        save_memory(warden, "pii", content=SECRET)
    assert warden.get("keep").usable
    assert warden.check_projections().ok
    # a rebuild frees the old view's pages without zeroing them: they hold
    # nothing erased, so the text is still nowhere
    warden.rebuild()
    warden.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert b"SECRETMARKER" not in raw_files(Path(warden.path))
    assert warden.conn.execute("PRAGMA secure_delete").fetchone()[0] == 1  # back on for what comes next


def test_erase_by_user_leaves_the_same_words_kept_by_another_memory(warden: Warden, run_cli: Cli) -> None:
    save_memory(warden, "u1", content="kim's note", scope={"user": "kim"})
    save_memory(warden, "u2", content="kim's other note", scope={"user": "kim"})
    save_memory(warden, "copy", content="kim's note")  # the same text, kept by someone else
    save_memory(warden, "lee", content="lee's note", scope={"user": "lee"})
    assert run_cli.json("erase", "--user", "kim", "--reason", "account deleted") == {"erased": 2}
    # erasure destroys exactly what it names: the other memory keeps its (identical) text
    assert {v.memory_id for v in warden.query(tenant="acme")} == {"lee", "copy"}
    assert warden.get("copy").content == "kim's note"
    assert run_cli.json("erase", "--user", "kim", "--reason", "again") == {"erased": 0}
    assert sum(w["erased"] for w in run_cli.json("stats")["weeks"]) == 2


def test_erase_needs_a_target_and_a_reason(run_cli: Cli) -> None:
    assert run_cli("erase", "--reason", "x").exit_code == 2
    assert run_cli("erase", "--id", "a", "--user", "b", "--reason", "x").exit_code == 2
    assert run_cli("erase", "--id", "nobody", "--reason", "x").exit_code == 1


def test_repeated_purges_keep_the_text_index_readable(tmp_path: Path) -> None:
    # SQLite 3.40's FTS5 grows the index structure by two levels on every
    # optimize and fails ("malformed") near 2,000; 1,100 purges pass that
    conn = sqlite3.connect(tmp_path / "fts.db", isolation_level=None)
    conn.execute("CREATE VIRTUAL TABLE memories_fts USING fts5(summary, content)")
    conn.executemany(
        "INSERT INTO memories_fts (rowid, summary, content) VALUES (?, ?, ?)",
        [(i, f"요약 {i}", f"word{i % 97} 내용 {i} " * 8) for i in range(2_000)],
    )
    rebuilds, most = 0, 0
    for i in range(1_100):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (i,))
        conn.execute("INSERT INTO memories_fts (rowid, summary, content) VALUES (?, 'new', 'text')", (10_000 + i,))
        rebuilds += purge_text_index(conn)
        conn.execute("COMMIT")
        levels = text_index_levels(conn)
        assert levels is not None
        most = max(most, levels)
    assert most <= MAX_LEVELS
    conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    assert conn.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'word5'").fetchone()[0] > 0
    assert conn.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH '내용'").fetchone()[0] == 900
    print(f"1,100 purges: {rebuilds} rebuilds, at most {most} levels (SQLite {sqlite3.sqlite_version})")


def test_erasures_past_the_level_bound_leave_search_working(warden: Warden) -> None:
    for i in range(80):
        save_memory(warden, f"m{i}", content=f"기억 {i} marker{i} " + "padding words " * 40)
    for i in range(70):
        warden.erase(memory_id=f"m{i}", reason="asked")
        save_memory(warden, f"n{i}", content=f"새 기억 {i} " + "other words " * 40)
    assert (text_index_levels(warden.conn) or 0) <= MAX_LEVELS
    warden.conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    assert [v.memory_id for v in warden.query(tenant="acme", text="marker75")] == ["m75"]
    assert warden.query(tenant="acme", text="marker5") == []
    assert len(warden.query(tenant="acme", text="새", limit=100)) == 70
    assert warden.check_projections().ok


def test_a_rebuild_recovers_a_text_index_that_no_longer_opens(warden: Warden, run_cli: Cli) -> None:
    for i in range(5):
        save_memory(warden, f"m{i}", content=f"복구 recoverable {i}")
    # what 2,000 levels of growth left behind: a structure that does not decode
    warden.conn.execute("UPDATE memories_fts_data SET block = ? WHERE id = 10", (bytes(4) + b"\x90\x00\x00",))
    with pytest.raises(sqlite3.DatabaseError):
        warden.query(tenant="acme", text="recoverable")
    assert run_cli("rebuild").exit_code == 0
    assert len(warden.query(tenant="acme", text="recoverable")) == 5
    warden.conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    assert run_cli.json("audit", "verify")["ok"] is True


@pytest.mark.parametrize(
    ("block", "levels"),
    [
        (bytes(4) + b"\x05\x01\x02", 5),  # the structure as SQLite 3.40 writes it
        (bytes(4) + b"\xff\x00\x00\x01" + b"\x81\x00\x01", 128),  # newer: a version mark after the cookie
        (bytes(4) + b"\x81", None),  # cut short: unreadable, so purge rebuilds
        (b"", None),
    ],
)
def test_the_level_count_is_read_from_either_structure_format(block: bytes, levels: int | None) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t_data (id INTEGER PRIMARY KEY, block BLOB)")
    conn.execute("INSERT INTO t_data VALUES (10, ?)", (block,))
    assert text_index_levels(conn, "t") == levels
