"""The gate's answers as of every seq of generated logs, served from the
indexes (``replay``), against the oracle: a full replay of the log to that
seq into a private SQLite view, judged there."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memwarden.engine import OPERATOR, Warden
from memwarden.engine._derivation import Judge
from memwarden.engine.testing import in_memory_warden
from memwarden.projections import Projector, SQLiteView, private_view

from .._sizes import larger
from ..test_asof import OPS, TENANTS, apply


def replayed_answers(w: Warden, seq: int) -> dict[tuple[str, str], tuple[Any, ...]]:
    conn = private_view(w.log.read(until_seq=seq))
    try:
        past = SQLiteView(conn, Projector())
        when = w.log.get(seq).recorded_at if seq else w.now()
        judge = Judge(past, when, past.policies())
        out = {}
        for row in past.every_row():
            decision = judge.decide(row)
            out[(row["tenant"], row["memory_id"])] = (row["status"], decision.usable, decision.reason)
        return out
    finally:
        conn.close()


def indexed_answers(w: Warden, seq: int) -> dict[tuple[str, str], tuple[Any, ...]]:
    out = {}
    for tenant in TENANTS:
        for m in w.replay(seq=seq, tenant=tenant, include_unusable=True, caller=OPERATOR)["memories"]:
            out[(tenant, m["memory_id"])] = (m["status"], m["usable"], m["reason"])
    return out


# 40 logs of up to 30 steps by default, each compared at every seq (100 under --runslow)
@settings(max_examples=larger(40, 100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=8, max_size=30))
def test_the_gates_answers_then_equal_a_full_replays(ops: list[tuple[Any, ...]]) -> None:
    w = in_memory_warden()
    try:
        for op in ops:
            apply(w, w.clock, op)  # type: ignore[arg-type]
        for seq in range(w.log.head().seq + 1):
            assert indexed_answers(w, seq) == replayed_answers(w, seq), seq
    finally:
        w.close()
