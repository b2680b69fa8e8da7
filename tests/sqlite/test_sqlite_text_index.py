"""The SQLite store's FTS5 text index after erasures: purges keep it readable, its level count is
read from either structure format, and a rebuild recovers one that no longer opens."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from memwarden.engine import OPERATOR, StoreDamaged, Warden
from memwarden.projections import purge_text_index, text_index_levels
from memwarden.projections._text_index import MAX_LEVELS

from ..conftest import Cli, save_memory
from ..test_save_many import memory


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
        warden.erase(memory_id=f"m{i}", reason="asked", caller=OPERATOR)
        save_memory(warden, f"n{i}", content=f"새 기억 {i} " + "other words " * 40)
    assert (text_index_levels(warden.store.conn) or 0) <= MAX_LEVELS
    warden.store.conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    assert [v.memory_id for v in warden.query(tenant="acme", text="marker75", caller=OPERATOR)] == ["m75"]
    assert warden.query(tenant="acme", text="marker5", caller=OPERATOR) == []
    assert len(warden.query(tenant="acme", text="새", limit=100, caller=OPERATOR)) == 70
    assert warden.check_projections(caller=OPERATOR).ok


def test_a_rebuild_recovers_a_text_index_that_no_longer_opens(warden: Warden, run_cli: Cli) -> None:
    for i in range(5):
        save_memory(warden, f"m{i}", content=f"복구 recoverable {i}")
    # what 2,000 levels of growth left behind: a structure that does not decode
    warden.store.conn.execute("UPDATE memories_fts_data SET block = ? WHERE id = 10", (bytes(4) + b"\x90\x00\x00",))
    with pytest.raises(StoreDamaged) as raised:
        warden.query(tenant="acme", text="recoverable", caller=OPERATOR)
    assert isinstance(raised.value.__cause__, sqlite3.DatabaseError)  # the driver's words kept below it
    assert run_cli("rebuild").exit_code == 0
    assert len(warden.query(tenant="acme", text="recoverable", caller=OPERATOR)) == 5
    warden.store.conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
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


def test_a_batch_writes_the_text_index_in_rowid_order_not_a_segment_per_memory(warden: Warden) -> None:
    """FTS5 keeps a transaction's documents in memory while their rowids
    rise and writes a segment out at every lower one: a batch must hand it
    its documents, and its deletions, in rowid order."""

    def item(i: int, word: str) -> dict[str, object]:
        return memory(i, content=f"{word}{i}z 기억 {i}", scope={"tenant": f"t{i % 7}", "project": "p1"})

    warden.save_many([item(i, "first") for i in range(200)], caller=OPERATOR)
    # new versions of a hundred of them, shuffled among a hundred new memories
    batch = [item(i, "second") for i in range(0, 200, 2)] + [item(i, "second") for i in range(200, 300)]
    batch.sort(key=lambda m: str(m["content"])[::-1])
    writes: list[str] = []
    warden.store.conn.set_trace_callback(writes.append)
    try:
        warden.save_many(batch, caller=OPERATOR)
    finally:
        warden.store.conn.set_trace_callback(None)
    segments = [sql for sql in writes if "memories_fts_data" in sql or "memories_fts_idx" in sql]
    assert len(segments) < 40, f"{len(segments)} segment writes for a batch of 200"
    warden.store.conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    for i in (0, 2, 250):
        assert [v.memory_id for v in warden.query(tenant=f"t{i % 7}", text=f"second{i}z", caller=OPERATOR)] == [f"m{i}"]
    assert warden.query(tenant="t0", text="first0z", caller=OPERATOR) == []  # the replaced version's words are gone
    assert [v.memory_id for v in warden.query(tenant="t1", text="first1z", caller=OPERATOR)] == ["m1"]
    assert warden.check_projections(caller=OPERATOR).ok
