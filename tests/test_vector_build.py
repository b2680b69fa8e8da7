"""The vector index's graph (issue 62): built beside its exact part while
searches and revocations go on, swapped in with every change made
meanwhile; a saved file far behind the log opened from the view instead
of caught up one insertion at a time; the search breadth set from the
graph's size."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from memwarden.engine import OPERATOR, IndexSettings, Warden
from memwarden.events import FrozenClock
from memwarden.projections import _vector_build, _vector_kinds

from ._exact import exact_top
from .test_vector_index import DIMS, found, kinds, save_all, vectors

HELD = 30.0  # seconds a held step waits for its release before failing the test (never decides a verdict)


@pytest.fixture
def settings(tmp_path: Path) -> IndexSettings:
    return IndexSettings(directory=tmp_path / "vectors", exact_up_to=100, save_after=1)


@pytest.fixture
def warden(db_path: Path, clock: FrozenClock, settings: IndexSettings) -> Iterator[Warden]:
    w = Warden(db_path, clock=clock, vector_index=settings)
    yield w
    w.close()


def leak_items(given: dict[str, list[float]], project: str) -> list[dict[str, Any]]:
    return [
        dict(
            memory_id=memory_id,
            kind="external_fact",
            summary=f"about {memory_id}",
            content=f"text of {memory_id}",
            source_url=f"https://example.org/{memory_id}",
            scope={"tenant": "acme", "project": project},
            ttl="6h",
            embedding=vector,
        )
        for memory_id, vector in given.items()
    ]


@pytest.mark.parametrize("swap_at", [0, 256], ids=["in-rounds", "at-once"])
def test_the_graph_is_built_beside_and_never_serves_a_revoked_memory(
    warden: Warden, monkeypatch: pytest.MonkeyPatch, swap_at: int
) -> None:
    """A build held once its graph is made: meanwhile a revocation commits
    and searches answer (exactly, from the part), and more memories are
    saved; released, the graph takes every change made since its snapshot
    (in rounds outside the lock, or all at the swap) and serves none of
    the revoked."""
    monkeypatch.setattr(_vector_build, "SWAP_AT", swap_at)
    built, release = threading.Event(), threading.Event()

    def hold(tenant: str, agent: str | None) -> None:
        built.set()
        assert release.wait(HELD), "the test never released the build"

    warden.vector_index.on_built = hold
    kept, leaked = vectors(120, seed=1), vectors(30, seed=2)
    leaked = {f"leak{i}": v for i, v in enumerate(leaked.values())}
    save_all(warden, kept)
    warden.save_many(leak_items(leaked, "leak"), caller=OPERATOR)
    found(warden, kept["m0000"])  # loads the index: 150 vectors, past 100, so its graph is built
    assert built.wait(HELD), "no graph was built"

    warden.revoke({"tenant": "acme", "project": "leak"}, reason="test", caller=OPERATOR)
    for memory_id, vector in leaked.items():  # served from the exact part while the graph waits
        assert memory_id not in found(warden, vector, 10, include_hidden=True)
    later = {f"late{i}": v for i, v in enumerate(vectors(10, seed=3).values())}
    save_all(warden, later)
    assert found(warden, later["late4"], 1) == ["late4"]
    assert kinds(warden) == {"acme": "exact"}

    release.set()
    warden.vector_index.settle()
    warden.vector_index.follow_once()
    assert kinds(warden) == {"acme": "hnsw"}
    assert [d["vectors"] for d in warden.vector_index.describe()] == [130]
    for memory_id, vector in leaked.items():
        assert memory_id not in found(warden, vector, 10, include_hidden=True)
    for memory_id, vector in later.items():
        assert found(warden, vector, 1) == [memory_id]
    everything = {**kept, **later}
    q = vectors(1, seed=9)["m0000"]
    assert len(set(found(warden, q)) & set(exact_top(everything, q))) >= 9


def test_a_file_far_behind_the_log_is_opened_from_the_view(
    db_path: Path, clock: FrozenClock, settings: IndexSettings
) -> None:
    """Catching up inserts each change into the graph: past
    ``catch_up_most`` changes the file is set aside, the index read again
    from the view (exact at once) and its graph built beside."""
    given = vectors(150)
    with Warden(db_path, clock=clock, vector_index=settings) as w:
        save_all(w, given)
        found(w, given["m0000"])
        w.vector_index.settle()
        assert kinds(w) == {"acme": "hnsw"}
    later = {f"late{i}": v for i, v in enumerate(vectors(8, seed=3).values())}
    with Warden(db_path, clock=clock, vector_index=settings) as writer:  # saves only: its index never opens
        save_all(writer, later)

    near = IndexSettings(**{**settings.__dict__, "catch_up_most": 8})
    with Warden(db_path, clock=clock, vector_index=near) as w:
        assert found(w, later["late5"], 1) == ["late5"]
        [index] = w.vector_index.describe()
        assert (index["opened_from"], index["kind"]) == ("file", "hnsw")
        w.vector_index.on_built = lambda tenant, agent: pytest.fail("a graph was rebuilt")

    more = {f"more{i}": v for i, v in enumerate(vectors(8, seed=4).values())}
    with Warden(db_path, clock=clock, vector_index=settings) as writer:
        save_all(writer, more)
    far = IndexSettings(**{**settings.__dict__, "catch_up_most": 7})
    with Warden(db_path, clock=clock, vector_index=far) as w:
        q = vectors(1, seed=9)["m0000"]
        assert found(w, q) == exact_top({**given, **later, **more}, q)  # exact, from the view
        [index] = w.vector_index.describe()
        assert index["opened_from"] == "view"
        w.vector_index.settle()
        assert found(w, more["more2"], 1) == ["more2"] and kinds(w) == {"acme": "hnsw"}


def test_the_search_breadth_follows_the_graphs_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Set when the graph is built, grows, shrinks or is restored; the
    build's breadth by the size it is built at."""
    assert _vector_kinds.breadth(10) == _vector_kinds.BREADTHS[0][1]
    assert _vector_kinds.breadth(10**9) == _vector_kinds.BREADTHS[-1][1]
    sizes = [most for most, _ in _vector_kinds.BREADTHS]
    assert sizes[-1] is None and sizes[:-1] == sorted(sizes[:-1])  # type: ignore[type-var]
    monkeypatch.setattr(_vector_kinds, "BREADTHS", ((40, 512), (80, 96), (None, 48)))
    rng = np.random.default_rng(1)
    rows = rng.standard_normal((100, DIMS)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    graph = _vector_kinds.Hnsw.built(DIMS, [f"m{i}" for i in range(30)], rows[:30])
    assert graph.index.expansion_search == 512
    graph.put_many([(f"m{i}", rows[i : i + 1]) for i in range(30, 60)])
    assert graph.index.expansion_search == 96
    graph.put_many([(f"m{i}", rows[i : i + 1]) for i in range(60, 100)])
    assert graph.index.expansion_search == 48
    restored = _vector_kinds.Hnsw.load(DIMS, *graph.dump())
    assert restored.index.expansion_search == 48
    monkeypatch.setattr(_vector_kinds, "EXPANSIONS_ADD", ((40, 24), (None, 72)))
    assert _vector_kinds.Hnsw.built(DIMS, ["a"], rows[:1]).index.expansion_add == 24
    assert _vector_kinds.Hnsw.built(DIMS, [f"m{i}" for i in range(50)], rows[:50]).index.expansion_add == 72
    graph.put_many([(f"m{i}", None) for i in range(50)])
    assert len(graph) == 50 and graph.index.expansion_search == 96
