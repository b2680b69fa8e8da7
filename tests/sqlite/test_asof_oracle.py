"""The gate's answers as of every seq of generated logs, served from the
indexes (``replay``), against the oracle: a full replay of the log to that
seq into a private SQLite view, judged there. The oracle is SQLite's own;
the store under test is each backend in turn."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memwarden.engine import OPERATOR, Warden
from memwarden.engine._derivation import Judge
from memwarden.projections import Access, Projector, SQLiteView, private_view

from .._sizes import larger
from ..backends import BACKENDS, Backend
from ..conftest import ready, scratch_warden
from ..test_asof import OPS, TENANTS, apply


@pytest.fixture(scope="session", params=BACKENDS, ids=lambda b: b.name)
def under_test(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The backend the past is served from (this folder's ``backend`` is SQLite's alone)."""
    chosen = ready(request.param)
    yield chosen
    chosen.close()


def replayed_answers(w: Warden, seq: int) -> dict[tuple[str, str], tuple[Any, ...]]:
    conn = private_view(w.log.read(until_seq=seq))
    try:
        past = SQLiteView(conn, Projector())
        when = w.log.get(seq).recorded_at if seq else w.now()
        judge = Judge(past, when, past.policies())
        out = {}
        for row in past.memories(Access.system()):
            decision = judge.decide(row)
            out[row.key] = (row.status, decision.usable, decision.reason)
        return out
    finally:
        conn.close()


def indexed_answers(w: Warden, seq: int) -> dict[tuple[str, str], tuple[Any, ...]]:
    out = {}
    for tenant in TENANTS:
        for m in w.replay(seq=seq, tenant=tenant, include_unusable=True, caller=OPERATOR)["memories"]:
            out[(tenant, m["memory_id"])] = (m["status"], m["usable"], m["reason"])
    return out


# --runslow runs hundreds of generated histories: minutes on PostgreSQL
@pytest.mark.timeout(larger(120, 1800))
def test_the_gates_answers_then_equal_a_full_replays(under_test: Backend, tmp_path: Path) -> None:
    # PostgreSQL's examples cost a round trip per read: fewer in the default run
    @settings(
        max_examples=larger(40, 100) if under_test.name == "sqlite" else larger(12, 100),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(st.lists(OPS, min_size=8, max_size=30))
    def check(ops: list[tuple[Any, ...]]) -> None:
        w = scratch_warden(under_test, tmp_path)
        try:
            for op in ops:
                apply(w, w.clock, op)  # type: ignore[arg-type]
            for seq in range(w.log.head().seq + 1):
                assert indexed_answers(w, seq) == replayed_answers(w, seq), seq
        finally:
            w.close()

    check()
