"""The SQLite store's projector: catching up a copied file or another database, the set form of
the cascade's writes, forward-only tracking, and a rebuild's bounded cache."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from memwarden.engine import OPERATOR, Warden
from memwarden.events import FrozenClock, RecordedEvent
from memwarden.projections import COLUMNS, Projector, UsableProjection, fold_memory
from memwarden.projections._rows import select_rows

from ..conftest import save_memory
from ..test_projections import history, live_rows

STATUSES_FOR_FOLD = ["usable", "expired", "unknown", "revoked", "invalidated", "erased", "quarantined"]


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
    assert again.check_projections(caller=OPERATOR).ok
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
    _assert_set_form_is_the_fold(
        [{"status": status, "version": version} for status, version in rows],
        "memory.invalidated",
        [{"memory_id": f"m{target}", "version": version, "reason": reason} for target, version, reason in hits],
    )


EXPIRIES = ["2026-01-05T10:00:00.000000Z", "2026-01-05T11:00:00.000000Z"]


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(STATUSES_FOR_FOLD), st.integers(1, 3), st.sampled_from([None, *EXPIRIES])),
        min_size=1,
        max_size=6,
    ),
    hits=st.lists(st.tuples(st.integers(0, 7), st.integers(1, 3), st.sampled_from(EXPIRIES))),
)
def test_a_batch_of_expiries_equals_the_fold(
    rows: list[tuple[str, int, str | None]], hits: list[tuple[int, int, str]]
) -> None:
    """The set form of the expiry sweep's writes (one UPDATE per batch)
    leaves every row as ``fold_memory`` would, one event at a time: only a
    usable row of that version and that expiry expires; each takes the seq."""
    _assert_set_form_is_the_fold(
        [
            {
                "status": status,
                "version": version,
                "reason": None if status == "usable" else status,
                "expires_at": expires_at,
            }
            for status, version, expires_at in rows
        ],
        "memory.expired",
        [
            {"memory_id": f"m{target}", "version": version, "expires_at": expires_at}
            for target, version, expires_at in hits
        ],
    )


def _assert_set_form_is_the_fold(rows: list[dict[str, Any]], kind: str, payloads: list[dict[str, Any]]) -> None:
    """Rows m0, m1, ... of tenant ``t`` (each a base row with ``rows[n]``
    over it), then one batch of ``kind`` events with ``payloads``: the view
    applied in one go equals ``fold_memory`` one event at a time."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    view = UsableProjection(text_source=None)
    view.create(conn)
    stored = {}
    for n, over in enumerate(rows):
        row = (
            {c: None for c in COLUMNS}
            | {
                "memory_id": f"m{n}",
                "kind": "k",
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
            | over
        )
        conn.execute(
            f"INSERT INTO memories (mid, {', '.join(COLUMNS)}) VALUES (?{', ?' * len(COLUMNS)})",
            [n + 1, *(row[c] for c in COLUMNS)],
        )
        stored[row["memory_id"]] = row
    events = [
        RecordedEvent(100 + k, f"e{k}", kind, p["memory_id"], 1, "t", "t", "a", 1, {"tenant": "t", **p}, "0", "0")
        for k, p in enumerate(payloads)
    ]
    expected = dict(stored)
    for event in events:
        folded = fold_memory(expected.get(event.payload["memory_id"]), event, [])
        if folded is not None:
            expected[event.payload["memory_id"]] = folded
    view.apply(conn, events)
    got = {r.memory_id: r.as_dict() for r in select_rows(conn, "1", [])}
    for memory_id, row in expected.items():
        assert {c: v for c, v in got[memory_id].items() if v != row[c]} == {}, (memory_id, row)


def test_a_rebuild_streams_with_a_bounded_cache_and_gives_it_back(warden: Warden, clock: FrozenClock) -> None:
    from memwarden.projections._runner import BUILD_CACHE_MB

    history(warden, clock)
    before = warden.store.conn.execute("PRAGMA cache_size").fetchone()[0]
    mapped = warden.store.conn.execute("PRAGMA mmap_size").fetchone()[0]
    seen: list[tuple[int, int]] = []
    warden.rebuild(
        progress=lambda n: seen.append(
            (
                warden.store.conn.execute("PRAGMA cache_size").fetchone()[0],
                warden.store.conn.execute("PRAGMA mmap_size").fetchone()[0],
            )
        ),
        caller=OPERATOR,
    )
    assert seen and set(seen) == {(-BUILD_CACHE_MB * 1024, 0)}
    assert warden.store.conn.execute("PRAGMA cache_size").fetchone()[0] == before
    assert warden.store.conn.execute("PRAGMA mmap_size").fetchone()[0] == mapped > 0


def test_tracking_only_moves_forward(warden: Warden) -> None:
    for i in range(5):
        save_memory(warden, f"m{i}")
    conn = warden.store.conn
    warden.store.projector.track(conn, "usable", 2)
    assert warden.store.projector.positions(conn)["usable"] == 5
    warden.store.projector.track(conn, "usable", 9)
    assert warden.store.projector.positions(conn)["usable"] == 9


def test_tracking_several_at_once_moves_each_only_forward(warden: Warden) -> None:
    for i in range(5):
        save_memory(warden, f"m{i}")
    conn = warden.store.conn
    projector = warden.store.projector
    assert projector.positions(conn) == {"usable": 5, "stats": 5}
    projector.track_all(conn, [("usable", 3), ("stats", 8)])
    assert projector.positions(conn) == {"usable": 5, "stats": 8}
    projector.track_all(conn, [])
    assert projector.positions(conn) == {"usable": 5, "stats": 8}
