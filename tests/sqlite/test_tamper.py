"""Tampering with the database file directly, triggers dropped: every kind
of damage is found at its exact seq, by the API and by the CLI (exit 1)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from memwarden.engine import Warden
from memwarden.events import FrozenClock

from ..conftest import Cli, save_memory


@pytest.fixture
def filled(db_path: Path, clock: FrozenClock) -> Path:
    w = Warden(db_path, clock=clock)
    for i in range(1, 11):
        save_memory(w, f"m{i}", content=f"내용 {i}")
        clock.advance("1m")
    w.close()
    return db_path


def _raw(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DROP TRIGGER events_refuse_update")
    conn.execute("DROP TRIGGER events_refuse_delete")
    return conn


def flip_payload_byte(conn: sqlite3.Connection) -> None:
    payload = conn.execute("SELECT payload FROM events WHERE seq = 4").fetchone()[0]
    conn.execute(
        "UPDATE events SET payload = ? WHERE seq = 4", (payload.replace('"memory_id":"m4"', '"memory_id":"m5"'),)
    )


def delete_row(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM events WHERE seq = 4")


def swap_rows(conn: sqlite3.Connection) -> None:
    cols = (
        "event_id, type, stream, stream_version, occurred_at, recorded_at, actor, schema_version, payload, "
        "prev_hash, hash"
    )
    a = conn.execute(f"SELECT {cols} FROM events WHERE seq = 4").fetchone()
    b = conn.execute(f"SELECT {cols} FROM events WHERE seq = 5").fetchone()
    sets = ", ".join(f"{c.strip()} = ?" for c in cols.split(","))
    conn.execute("UPDATE events SET event_id = 'tmp-a', stream = 'tmp-a' WHERE seq = 4")
    conn.execute(f"UPDATE events SET {sets} WHERE seq = 5", a)
    conn.execute(f"UPDATE events SET {sets} WHERE seq = 4", b)


def forge_row(conn: sqlite3.Connection) -> None:
    last = conn.execute("SELECT hash, recorded_at FROM events WHERE seq = 10").fetchone()
    conn.execute(
        "INSERT INTO events (seq, event_id, type, stream, stream_version, occurred_at, recorded_at, actor, "
        "schema_version, payload, prev_hash, hash) "
        "VALUES (11, 'forged', 'memory.erased', 'm1 acme', 2, ?, ?, 'mallory', 2, "
        '\'{"memory_id":"m1","reason":"x","tenant":"acme"}\', ?, ?)',
        (last[1], last[1], last[0], "f" * 64),
    )


def truncate_tail(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM events WHERE seq >= 9")


def change_link(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE events SET prev_hash = ? WHERE seq = 7", ("a" * 64,))


def retype_payload(conn: sqlite3.Connection) -> None:
    # the same bytes, stored as a BLOB: SQLite's concatenation would hide it
    conn.execute("UPDATE events SET payload = CAST(payload AS BLOB) WHERE seq = 6")


def retype_version(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE events SET stream_version = 1.5 WHERE seq = 8")


def retype_actor(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE events SET actor = 42 WHERE seq = 3")


CASES: list[tuple[Callable[[sqlite3.Connection], None], int, str]] = [
    (flip_payload_byte, 4, "hash mismatch"),
    (delete_row, 4, "gap"),
    (swap_rows, 4, "hash mismatch"),
    (forge_row, 11, "hash mismatch"),
    (truncate_tail, 9, "truncated"),
    (change_link, 7, "hash mismatch"),
    (retype_payload, 6, "hash mismatch"),
    (retype_version, 8, "hash mismatch"),
    (retype_actor, 3, "hash mismatch"),
]


@pytest.mark.parametrize(("tamper", "bad_seq", "problem"), CASES, ids=[c[0].__name__ for c in CASES])
def test_tampering_is_named_at_its_seq(
    filled: Path, run_cli: Cli, tamper: Callable[[sqlite3.Connection], None], bad_seq: int, problem: str
) -> None:
    conn = _raw(filled)
    tamper(conn)
    conn.close()

    w = Warden(filled)
    # in one process, and split over worker processes (parts 1-3, 4-6, 7-10)
    for workers in (1, 3):
        report = w.log.verify_chain(workers=workers)
        assert not report.ok
        assert report.first_bad_seq == bad_seq, (workers, report)
        assert report.problem is not None and report.problem.startswith(problem), (workers, report)
    w.close()

    result = run_cli("audit", "verify", "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["ok"] is False and data["first_bad_seq"] == bad_seq
    text = run_cli("audit", "verify")
    assert text.exit_code == 1 and f"seq {bad_seq}" in text.stdout


def test_parallel_verify_of_an_intact_log(filled: Path) -> None:
    w = Warden(filled)
    for workers in (1, 2, 3, 4):
        report = w.log.verify_chain(workers=workers)
        assert report.ok and report.checked == 10 and report.head_seq == 10, workers
    w.close()


def test_a_consistent_rewrite_is_caught_by_a_kept_head(filled: Path, run_cli: Cli) -> None:
    """An attacker who recomputes every hash defeats the chain alone; a head
    kept elsewhere ('audit head') still exposes the rewrite."""
    anchor = run_cli.json("audit", "head")
    assert run_cli.json("audit", "verify", "--against", f"{anchor['seq']}:{anchor['hash']}")["extends_anchor"] is True

    conn = _raw(filled)
    from memwarden.events._recorded import ROW_COLUMNS, row_hash

    rows = [list(r) for r in conn.execute(f"SELECT {ROW_COLUMNS} FROM events ORDER BY seq")]
    rows[2][9] = rows[2][9].replace('"memory_id":"m3"', '"memory_id":"mX"')
    prev = "0" * 64
    for row in rows:
        row[10] = prev
        row[11] = row_hash(tuple(row))  # type: ignore[arg-type]
        prev = row[11]
        conn.execute(
            "UPDATE events SET payload = ?, prev_hash = ?, hash = ? WHERE seq = ?", (row[9], row[10], row[11], row[0])
        )
    conn.close()

    assert run_cli.json("audit", "verify")["ok"] is True  # the chain alone is consistent
    result = run_cli("audit", "verify", "--against", f"{anchor['seq']}:{anchor['hash']}", "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["extends_anchor"] is False and data["first_bad_seq"] == anchor["seq"]


def test_against_a_later_log_extends_the_anchor(filled: Path, run_cli: Cli, clock: FrozenClock) -> None:
    anchor = run_cli.json("audit", "head")
    w = Warden(filled, clock=clock)
    save_memory(w, "later")
    w.close()
    data = run_cli.json("audit", "verify", "--against", f"{anchor['seq']}:{anchor['hash']}")
    assert data["ok"] and data["extends_anchor"] and data["head_seq"] == anchor["seq"] + 1


def test_against_refuses_malformed_anchor(filled: Path, run_cli: Cli) -> None:
    result = run_cli("audit", "verify", "--against", "five:abc")
    assert result.exit_code == 2 and "against" in result.stderr


@pytest.mark.parametrize(
    "stored", [5, b"\xff\x00{}", "{not json", '["an", "array"]'], ids=["number", "blob", "garbage", "array"]
)
def test_a_payload_of_the_wrong_type_is_damage_at_its_seq_not_a_crash(
    filled: Path, run_cli: Cli, stored: object
) -> None:
    """SQLite keeps any type in any column of a hand-edited file; every
    command that decodes the log names the seq (exit 2) instead of raising."""
    conn = _raw(filled)
    conn.execute("UPDATE events SET payload = ? WHERE seq = 4", (stored,))
    conn.close()
    audit = run_cli("audit", "verify")
    assert audit.exit_code == 1 and "4" in audit.output
    for args in (
        ["rebuild"],
        ["log", "tail"],
        ["explain", "m4"],
        ["projections", "check"],
        ["export", str(filled) + ".jsonl"],
    ):
        result = run_cli(*args)
        assert result.exit_code == 2, (args, result.output)
        assert "event seq 4" in result.stderr and "audit verify" in result.stderr, (args, result.stderr)


@pytest.mark.parametrize(
    ("table", "column", "stored"),
    [
        ("memories", "derived_from", 5),
        ("memories", "derived_from", '[{"memory_id": 1}]'),
        ("projection_tracking", "seq", "x"),
    ],
)
def test_a_damaged_read_model_says_rebuild_and_a_rebuild_repairs_it(
    filled: Path, run_cli: Cli, table: str, column: str, stored: object
) -> None:
    """The read models are caches of the log: damage to them is named, with
    the way out, and replaying the log puts them right."""
    conn = sqlite3.connect(filled, isolation_level=None)
    conn.execute(f"UPDATE {table} SET {column} = ?", (stored,))
    conn.close()
    for args in (["get", "m1"], ["query", "--tenant", "acme", "--all"]):
        result = run_cli(*args)
        assert result.exit_code == 2, (args, result.output)
        assert "projection damaged" in result.stderr and "memwarden rebuild" in result.stderr, result.stderr
    audit = run_cli("audit", "verify")
    assert audit.exit_code == 0, audit.stderr  # the log itself is intact
    explain = run_cli("explain", "m1")  # replays the log; its "now" needs the view
    assert explain.exit_code in (0, 1) or "projection damaged" in explain.stderr
    assert run_cli("rebuild").exit_code == 0
    # judged again (the CLI runs on today's clock: the fixture's memories have expired)
    assert run_cli.json("get", "m1", code=1)["reason"] == "expired"
    assert run_cli.json("projections", "check")["ok"] is True


def test_projections_check_reports_a_blob_where_text_belongs(filled: Path, run_cli: Cli) -> None:
    conn = sqlite3.connect(filled, isolation_level=None)
    conn.execute("UPDATE memories SET kind = ? WHERE memory_id = 'm3'", (b"\xff",))
    conn.close()
    report = run_cli.json("projections", "check", code=1)
    assert report["ok"] is False and report["memory_id"] == "m3"
