"""A past view's lineage walks (up, with and without a limit; down;
children; drawn) as of every seq of generated logs, served from the indexes
(``PointView``), against the oracle: a full replay of the log to that seq
into a private SQLite view, walked there. The oracle is SQLite's own; the
store under test is each backend in turn (``under_test``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from memwarden.engine import Warden
from memwarden.projections import LineageQuery, Projector, SQLiteView, private_view

from .._sizes import larger
from ..backends import Backend
from ..conftest import scratch_warden
from ..test_asof import IDS, OPS, TENANTS, apply
from .test_asof_oracle import under_test  # noqa: F401  (each backend in turn)

KEYS = [(t, m) for t in TENANTS for m in IDS]
# a chain four deep (m3 <- m2 <- m1 <- m0, and m3 <- m0 beside it), a parent's
# new version, then a revocation and an erasure in it: generated logs seldom
# draw that deep, and each walk's depth and status are told apart only there
CHAIN = [
    ("save", "acme", "m0", [], "p1", 0),
    ("save", "acme", "m1", ["m0"], "p1", 0),
    ("save", "acme", "m2", ["m1"], "p2", 0),
    ("save", "acme", "m3", ["m2", "m0"], "p1", 0),
    ("save", "acme", "m1", ["m0"], "p1", 1),
    ("revoke", "acme", "m2", "p1", "ids"),
    ("erase", "acme", "m1"),
]


def queries() -> list[LineageQuery]:
    """Each walk from each memory alone, and from every memory at once."""
    walks: list[tuple[Any, int | None]] = [("up", None), ("up", 0), ("up", 1), ("up", 2), ("down", None)]
    walks += [("children", None), ("drawn", None)]
    return [LineageQuery(walk, keys, limit) for walk, limit in walks for keys in [*((k,) for k in KEYS), tuple(KEYS)]]


def walked(view: Any) -> list[list[Any]]:
    return [view.lineage(q) for q in queries()]


def replayed(w: Warden, seq: int) -> list[list[Any]]:
    conn = private_view(w.log.read(until_seq=seq))
    try:
        return walked(SQLiteView(conn, Projector()))
    finally:
        conn.close()


def test_a_past_views_walks_equal_a_full_replays(under_test: Backend, tmp_path: Path) -> None:  # noqa: F811
    @settings(
        max_examples=larger(25, 100) if under_test.name == "sqlite" else larger(8, 100),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(st.lists(OPS, min_size=8, max_size=30))
    @example(CHAIN)
    def check(ops: list[tuple[Any, ...]]) -> None:
        w = scratch_warden(under_test, tmp_path)
        try:
            for op in ops:
                apply(w, w.clock, op)  # type: ignore[arg-type]
            for seq in range(w.log.head().seq + 1):
                with w.store.as_of(seq) as past:
                    assert walked(past) == replayed(w, seq), seq
        finally:
            w.close()

    check()
