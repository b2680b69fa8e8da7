from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from memwarden.engine import InvalidInput, StaleView, Warden, fts_query
from memwarden.engine._gate import decide
from memwarden.engine._views import MemoryView, gate_row
from memwarden.events import FrozenClock
from memwarden.projections import RECHECK, VIEW_COLUMNS, fetch_row, select_rows_with_text

from .conftest import Cli, save_memory


@pytest.fixture
def scoped(warden: Warden, clock: FrozenClock) -> Warden:
    save_memory(
        warden,
        "a",
        tenant="acme",
        project="p1",
        summary="서울에서 열린 회의",
        kind="external_fact",
        scope={"user": "kim", "agent": "planner", "permission": "calendar"},
    )
    clock.advance("1s")
    save_memory(
        warden,
        "b",
        tenant="acme",
        project="p2",
        summary="부산 출장 계획",
        kind="research_result",
        scope={"user": "lee", "agent": "travel"},
        content="KTX 08:00 출발",
        ttl=None,
    )
    clock.advance("1s")
    save_memory(
        warden,
        "c",
        tenant="acme",
        project="p1",
        summary="Quarterly budget",
        kind="project_rule",
        scope={"tool": "sheets"},
    )
    clock.advance("1s")
    save_memory(warden, "x", tenant="globex", project="p1", summary="서울 사무실 이전")
    return warden


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, ["c", "b", "a"]),
        ({"project": "p1"}, ["c", "a"]),
        ({"permission": "calendar"}, ["a"]),
        ({"user": "lee"}, ["b"]),
        ({"agent": "planner"}, ["a"]),
        ({"tool": "sheets"}, ["c"]),
        ({"kind": "research_result"}, ["b"]),
        ({"text": "서울"}, ["a"]),  # a Korean stem finds "서울에서"
        ({"text": "ktx"}, ["b"]),  # content is indexed too, case-insensitively
        ({"text": "budget quarterly"}, ["c"]),
        ({"text": "nothing-like-this"}, []),
    ],
)
def test_filters(scoped: Warden, filters: dict, expected: list[str]) -> None:
    assert [v.memory_id for v in scoped.query(tenant="acme", **filters)] == expected


def test_tenants_never_mix(scoped: Warden) -> None:
    assert [v.memory_id for v in scoped.query(tenant="globex", text="서울")] == ["x"]
    assert [v.memory_id for v in scoped.query(tenant="nobody")] == []


def test_all_shows_every_memory_and_why(scoped: Warden, clock: FrozenClock) -> None:
    clock.advance("2h")  # research results live 1h
    scoped.revoke({"ids": ["a"]}, reason="r")
    views = {v.memory_id: (v.usable, v.reason, v.action) for v in scoped.query(tenant="acme", include_unusable=True)}
    assert views == {
        "a": (False, "revoked", "treat_as_unknown"),
        "b": (False, "expired", "reverify"),
        "c": (True, None, "none"),
    }
    assert [v.memory_id for v in scoped.query(tenant="acme")] == ["c"]


def test_limit_and_content(scoped: Warden) -> None:
    assert [v.memory_id for v in scoped.query(tenant="acme", limit=2)] == ["c", "b"]
    assert scoped.query(tenant="acme", limit=1, with_content=False)[0].content is None
    assert scoped.query(tenant="acme", kind="research_result")[0].content == "KTX 08:00 출발"
    with pytest.raises(InvalidInput, match="limit"):
        scoped.query(tenant="acme", limit=0)
    with pytest.raises(InvalidInput, match="tenant"):
        scoped.query(tenant="")


def test_min_seq_consistency_token(scoped: Warden) -> None:
    head = scoped.log.head().seq
    assert len(scoped.query(tenant="acme", min_seq=head)) == 3
    assert scoped.get("a", min_seq=head).usable
    with pytest.raises(StaleView, match=f"view is at seq {head}, the caller needs at least seq {head + 5}"):
        list(scoped.query(tenant="acme", min_seq=head + 5))


def test_text_queries_are_quoted(scoped: Warden, run_cli: Cli) -> None:
    assert fts_query('서울 "x') == '"서울"* """x"*'
    assert scoped.query(tenant="acme", text='AND OR NOT "(') == []
    with pytest.raises(InvalidInput, match="text"):
        scoped.query(tenant="acme", text="   ")
    assert run_cli("query", "--tenant", "acme", "--text", " ").exit_code == 2
    assert run_cli("query", "--tenant", "acme", "--limit", "0").exit_code == 2


def test_the_agent_query_walks_a_usable_only_covering_index(scoped: Warden) -> None:
    """Revoked or invalidated memories leave the agent query's indexes (one
    delete each), which is what keeps a 10,000-memory revocation cheap; the
    index carries every column a view shows (a column added to the view
    but not to the index fails here, not silently in the benchmarks)."""
    selected = ", ".join(f'm."{c}"' for c in VIEW_COLUMNS)
    plan = " ".join(
        str(r[3])
        for r in scoped.conn.execute(
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
        for r in scoped.conn.execute(
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
    names = {r[0] for r in w.conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
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
    """The query path builds views and gate inputs by position from
    ``VIEW_COLUMNS``; the same memory through full rows must agree field by field."""
    scoped.revoke({"tenant": "acme", "project": "p2"}, reason="test")
    with scoped.reading() as conn:
        selected = select_rows_with_text(conn, VIEW_COLUMNS, "m.tenant = ?", ("acme",), "ORDER BY m.memory_id")
        rows = [fetch_row(conn, "acme", v[0]) for v in selected]
    assert [r["memory_id"] for r in rows] == ["a", "b", "c"]
    now = scoped.now()
    for values, row in zip(selected, rows, strict=True):
        assert values[-1] is not None and values[-2] is not None  # summary and stored text come last
        assert gate_row(values) == {k: row[k] for k in gate_row(values)}
        decision = decide(row, now=now, policy_version=1)
        assert decide(gate_row(values), now=now, policy_version=1) == decision
        assert MemoryView.of_values(values, decision, "text", "s") == MemoryView.of(row, decision, "text", "s")
    assert {v[0]: v[2] for v in selected} == {"a": "usable", "b": "revoked", "c": "usable"}


def test_memories_named_by_key_are_found_through_the_primary_key(warden: Warden) -> None:
    """Every apply fetches the rows of the memories its events name: a plan
    that scans the table instead makes each save cost the whole view."""
    from memwarden.projections._rows import _SELECT_BY_KEYS

    plan = " ".join(
        str(r[3])
        for r in warden.conn.execute(
            f"EXPLAIN QUERY PLAN WITH k(t, m) AS (VALUES (?,?),(?,?)) {_SELECT_BY_KEYS}", ("a", "b", "c", "d")
        )
    )
    assert "SEARCH memories USING PRIMARY KEY" in plan and "SCAN memories" not in plan
