"""A read of the view on PostgreSQL: what it costs in round trips, and the
covering index the agent query walks. A page of the agent query is one
statement, outside any transaction: it brings the view's position and the
policies beside the rows, and one statement sees one snapshot. A page that
holds a memory drawn from others is read again in a snapshot, where its
evidence is read too; that snapshot's opening brings the position and the
policies with its BEGIN. The query for a project reads the index alone once
vacuum has marked the table's pages all-visible, as autovacuum does on any
live server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from memwarden.engine import OPERATOR, StaleView, Warden
from memwarden.events import FrozenClock

from .statements import recorded_statements


@pytest.fixture
def warden(pg_url: str) -> Iterator[Warden]:
    w = Warden(pg_url, clock=FrozenClock("2026-01-05T09:00:00Z"))
    yield w
    w.close()


def _save(w: Warden, i: int, **extra: Any) -> int:
    return w.save(
        memory_id=f"m{i}",
        kind="external_fact",
        summary=f"요약 {i}",
        content=f"서울 지사 기록 {i}",
        source_url=f"https://src.example/{i}",
        scope={"tenant": "t1", "project": f"p{i % 2}"},
        ttl="1d",
        **extra,
        caller=OPERATOR,
    ).seq


def test_an_agent_query_is_one_statement_with_its_position_and_policies_outside_any_transaction(
    warden: Warden,
) -> None:
    _save(warden, 1)
    warden.query(tenant="t1", caller=OPERATOR)  # the pool's first connection opens outside the count
    with recorded_statements() as seen:
        views = warden.query(tenant="t1", project="p1", min_seq=1, caller=OPERATOR)
    assert [v.memory_id for v in views] == ["m1"]
    assert len(seen) == 1, seen
    ((statement, _, status),) = seen
    assert status == psycopg.pq.TransactionStatus.IDLE  # no BEGIN before it, no COMMIT after
    assert "projection_tracking" in statement and "FROM policies" in statement and "FROM memories m" in statement


def test_an_empty_page_still_brings_the_position_so_a_token_past_the_head_is_waited_for(warden: Warden) -> None:
    head = _save(warden, 1)
    with recorded_statements() as seen:
        assert warden.query(tenant="nobody", min_seq=head, caller=OPERATOR) == []
    assert len(seen) == 1, seen
    with pytest.raises(StaleView):
        warden.query(tenant="nobody", min_seq=head + 1, caller=OPERATOR)


def test_a_page_holding_a_derived_memory_is_read_again_in_a_snapshot_with_its_evidence(warden: Warden) -> None:
    """One statement reads no evidence: a page that needs it is read in a
    snapshot, where the evidence is of the same state as the page."""
    _save(warden, 1)  # ttl 1d
    warden.save(
        memory_id="summary",
        kind="external_fact",
        summary="요약의 요약",
        content="지사 기록 둘",
        source_url="agent://summariser",
        scope={"tenant": "t1", "project": "p1"},
        ttl="30d",
        derived_from=["m1"],
        caller=OPERATOR,
    )
    with recorded_statements() as seen:
        views = {v.memory_id: v for v in warden.query(tenant="t1", project="p1", caller=OPERATOR)}
    assert views["summary"].usable and views["m1"].usable
    statements = [sql for sql, *_ in seen]
    assert "projection_tracking" in statements[0] and "FROM memories m" in statements[0]
    assert statements[1].startswith("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; ")
    assert statements[-1] == "COMMIT"
    warden.clock.advance("2d")  # the evidence expires; the summary's own ttl has not run out
    views = {v.memory_id: v for v in warden.query(tenant="t1", project="p1", include_unusable=True, caller=OPERATOR)}
    assert views["m1"].reason == "expired"
    assert not views["summary"].usable and views["summary"].reason == "expired_evidence"
    assert warden.query(tenant="t1", project="p1", caller=OPERATOR) == []


def test_a_read_inside_a_snapshot_is_that_snapshots_own(warden: Warden) -> None:
    _save(warden, 1)
    with warden.reading() as view:
        with recorded_statements() as seen:
            assert [v.memory_id for v in warden.query(tenant="t1", caller=OPERATOR)] == ["m1"]
        assert view.position() == 1
    # on the snapshot's connection, its transaction open, as reads of it are
    assert seen and all(status == psycopg.pq.TransactionStatus.INTRANS for _, _, status in seen), seen
    assert not any("ARRAY(" in sql for sql, *_ in seen)


def test_the_opening_reads_the_state_its_own_snapshot_sees(warden: Warden) -> None:
    """The position and the policies come from the same snapshot as the
    query: a save and a policy change between two reads are both in the
    second, and a token past the head is still waited for."""
    first = _save(warden, 1, policy="retention")
    assert [v.usable for v in warden.query(tenant="t1", min_seq=first, caller=OPERATOR)] == [True]
    warden.set_policy("retention", 2, caller=OPERATOR)  # the memory was checked under version 1
    second = _save(warden, 2)
    views = {v.memory_id: v for v in warden.query(tenant="t1", include_unusable=True, min_seq=second, caller=OPERATOR)}
    assert views["m2"].usable
    assert not views["m1"].usable and views["m1"].reason == "policy_changed"
    with warden.store.reading() as view:
        assert view.position() == second
        assert view.policies() == {"retention": "2"}
    with pytest.raises(Exception, match="seq"):
        with warden.reading(min_seq=second + 1, wait=0.1):
            pass


def test_inside_a_write_transaction_a_read_is_that_transactions_own(warden: Warden) -> None:
    _save(warden, 1)
    with warden.transaction() as tx, warden.store.reading() as view:
        assert view.position() == tx.head.seq
        assert view.policies() == {}


def _plan_of(url: str, sql: str, params: list[Any]) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {sql}", params).fetchall()
    return "\n".join(row[0] for row in rows)


def test_the_agent_query_for_a_project_reads_the_covering_index_alone(warden: Warden, pg_url: str) -> None:
    for start in range(0, 2000, 500):
        warden.save_many(
            [
                {
                    "memory_id": f"m{i}",
                    "kind": "external_fact",
                    "summary": f"요약 {i}",
                    "content": f"서울 지사 기록 {i}",
                    "source_url": f"https://src.example/{i}",
                    "scope": {"tenant": f"t{i % 4}", "project": f"p{i % 10}"},
                    "ttl": "1d",
                }
                for i in range(start, start + 500)
            ],
            caller=OPERATOR,
        )
    with psycopg.connect(pg_url, autocommit=True) as conn:
        # what autovacuum does on a live server. The test databases commit
        # asynchronously, and vacuum marks no page whose rows' commits are
        # not on disk yet: the WAL writer flushes them within moments.
        deadline = time.monotonic() + 10
        while True:
            conn.execute("VACUUM ANALYZE memories")
            visible, pages = conn.execute(
                "SELECT relallvisible, relpages FROM pg_class WHERE relname = 'memories'"
            ).fetchone()
            if visible == pages or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    with recorded_statements() as seen:
        views = warden.query(tenant="t1", project="p3", limit=20, caller=OPERATOR)
    assert len(views) == 20 and all(v.scope["project"] == "p3" and v.usable for v in views)
    ((sql, params),) = [(sql, params) for sql, params, _ in seen if "FROM memories m" in sql]
    plan = _plan_of(pg_url, sql, list(params))
    assert "Index Only Scan Backward using memories_usable_view on memories m" in plan, plan
    assert "Heap Fetches: 0" in plan, plan
