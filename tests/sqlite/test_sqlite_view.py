"""The SQLite store's view: the indexes the agent query and due walk, an older database's indexes
replaced, the rows the agent query selects equal to rows read whole."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from memwarden.engine import OPERATOR, Warden
from memwarden.engine._gate import decide
from memwarden.engine._views import MemoryView
from memwarden.projections import RECHECK, VIEW_COLUMNS, ViewRow
from memwarden.projections._rows import fetch_row, select_rows_with_text
from memwarden.projections._sqlite_view import fts5_query


def test_the_agent_query_walks_a_usable_only_covering_index(scoped: Warden) -> None:
    """Revoked or invalidated memories leave the agent query's indexes (one
    delete each), which is what keeps a 10,000-memory revocation cheap; the
    index carries every column a view shows (a column added to the view
    but not to the index fails here, not silently in the benchmarks)."""
    selected = ", ".join(f'm."{c}"' for c in VIEW_COLUMNS)
    plan = " ".join(
        str(r[3])
        for r in scoped.store.conn.execute(
            f"EXPLAIN QUERY PLAN SELECT {selected} FROM memories m WHERE tenant = ? AND project = ? "
            "AND status = 'usable' AND (expires_at IS NULL OR expires_at > ?) ORDER BY m.last_seq DESC LIMIT 100",
            ("acme", "p1", "2026-01-05T09:00:00.000000Z"),
        )
    )
    assert "COVERING INDEX memories_usable_view" in plan and "TEMP B-TREE" not in plan


@pytest.mark.parametrize("status", ["invalidated", "expired", "unknown"])
def test_due_reads_the_reverify_index(scoped: Warden, status: str) -> None:
    plan = " ".join(
        r[3]
        for r in scoped.store.conn.execute(
            f"EXPLAIN QUERY PLAN SELECT memory_id, source_url FROM memories WHERE status = ? AND {RECHECK}", (status,)
        )
    )
    assert "USING INDEX memories_to_reverify (status=?)" in plan


def test_indexes_of_an_older_database_are_replaced(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    Warden(db).close()
    conn = sqlite3.connect(db)
    conn.execute("DROP INDEX memories_usable_view")
    conn.execute(
        "CREATE INDEX memories_usable_by_scope ON memories (tenant, project, last_seq) WHERE status = 'usable'"
    )
    conn.execute("CREATE INDEX memories_by_scope ON memories (tenant, project, status, last_seq)")
    conn.execute("CREATE INDEX memories_by_status ON memories (status)")
    conn.execute("DROP INDEX memories_to_reverify")
    conn.execute("CREATE INDEX memories_to_recheck ON memories (status) WHERE status IN ('expired', 'unknown')")
    conn.commit()
    conn.close()
    w = Warden(db)
    names = {r[0] for r in w.store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    w.close()
    assert {"memories_usable_view", "memories_usable_by_tenant", "memories_to_reverify"} <= names
    assert not names & {
        "memories_by_scope",
        "memories_by_tenant",
        "memories_by_status",
        "memories_to_recheck",
        "memories_usable_by_scope",
    }


def test_views_from_selected_values_match_views_from_rows(scoped: Warden) -> None:
    """The query path builds views and gate inputs from rows selected as
    ``VIEW_COLUMNS`` (``ViewRow``); the same memory through full rows
    (``MemoryRow``) must agree field by field, and the gate decide both alike."""
    scoped.revoke({"tenant": "acme", "project": "p2"}, reason="test", caller=OPERATOR)
    with scoped.reading() as view:
        conn = view.conn
        found = select_rows_with_text(conn, VIEW_COLUMNS, "m.tenant = ?", ("acme",), "ORDER BY m.memory_id")
        selected = [ViewRow._make(values) for values in found]
        rows = [fetch_row(conn, "acme", v.memory_id) for v in selected]
    assert [r.memory_id if r else None for r in rows] == ["a", "b", "c"]
    now = scoped.now()
    for values, row in zip(selected, rows, strict=True):
        assert values.content is not None and values.summary is not None  # summary and stored text come last
        assert row is not None
        assert {c: getattr(values, c) for c in VIEW_COLUMNS} == {c: getattr(row, c) for c in VIEW_COLUMNS}
        decision = decide(row, now=now, policy_version=1)
        assert decide(values, now=now, policy_version=1) == decision
        assert MemoryView.of_values(values, decision, "text", "s") == MemoryView.of(row, decision, "text", "s")
    assert {v.memory_id: v.status for v in selected} == {"a": "usable", "b": "revoked", "c": "usable"}


def test_memories_named_by_key_are_found_through_the_primary_key(warden: Warden) -> None:
    """Every apply fetches the rows of the memories its events name: a plan
    that scans the table instead makes each save cost the whole view."""
    from memwarden.projections._rows import _SELECT_BY_KEYS

    plan = " ".join(
        str(r[3])
        for r in warden.store.conn.execute(
            f"EXPLAIN QUERY PLAN WITH k(t, m) AS (VALUES (?,?),(?,?)) {_SELECT_BY_KEYS}", ("a", "b", "c", "d")
        )
    )
    assert "SEARCH memories USING PRIMARY KEY" in plan and "SCAN memories" not in plan


def test_search_words_become_quoted_fts5_prefixes() -> None:
    assert fts5_query(["서울", '"x']) == '"서울"* """x"*'
