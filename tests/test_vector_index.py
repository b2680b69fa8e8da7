"""The vector index (issue 40, stage B): exact while a tenant is small,
HNSW past the threshold, persisted with its position, caught up from the
log on open, rebuilt when its file is damaged, followed on every node,
and free of every erased vector's bytes."""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from memwarden.engine import OPERATOR, IndexSettings, Warden
from memwarden.events import FrozenClock

from ._exact import exact_top, unit
from .backends import Backend
from .conftest import save_memory

DIMS = 32


def vectors(n: int, seed: int = 40, dims: int = DIMS) -> dict[str, list[float]]:
    rng = random.Random(seed)
    return {f"m{i:04}": [rng.gauss(0, 1) for _ in range(dims)] for i in range(n)}


def save_all(w: Warden, given: dict[str, list[float]], tenant: str = "acme") -> None:
    items = [
        dict(
            memory_id=memory_id,
            kind="external_fact",
            summary=f"about {memory_id}",
            content=f"text of {memory_id}",
            source_url=f"https://example.org/{memory_id}",
            scope={"tenant": tenant, "project": "p1"},
            ttl="6h",
            embedding=vector,
        )
        for memory_id, vector in given.items()
    ]
    for at in range(0, len(items), 500):
        w.save_many(items[at : at + 500], caller=OPERATOR)


def found(w: Warden, q: list[float], k: int = 10, tenant: str = "acme", **extra: Any) -> list[str]:
    hits = w.search(tenant=tenant, vector=q, limit=k, mode="vector", caller=OPERATOR, **extra)
    return [f.view.memory_id for f in hits]


def kinds(w: Warden) -> dict[str, str]:
    return {d["tenant"]: d["kind"] for d in w.vector_index.describe()}


@pytest.fixture
def settings(tmp_path: Path) -> IndexSettings:
    # a folder named on every backend (on PostgreSQL there is none by default)
    return IndexSettings(directory=tmp_path / "vectors", exact_up_to=100, save_after=1)


@pytest.fixture
def opened(db_path: Path, clock: FrozenClock, settings: IndexSettings) -> Iterator[Any]:
    made: list[Warden] = []

    def open_one(**changes: Any) -> Warden:
        chosen = IndexSettings(**{**settings.__dict__, **changes})
        w = Warden(db_path, clock=clock, vector_index=chosen)
        made.append(w)
        return w

    yield open_one
    for w in made:
        w.close()


def test_hnsw_results_equal_the_exact_search(opened: Any) -> None:
    w = opened()
    given = vectors(600)
    save_all(w, given)
    rng = random.Random(6)
    queries = [[rng.gauss(0, 1) for _ in range(DIMS)] for _ in range(30)]
    assert found(w, queries[0]) == exact_top(given, queries[0])  # exact while the graph is built
    w.vector_index.settle()
    assert kinds(w) == {"acme": "hnsw"}
    hits = sum(len(set(found(w, q)) & set(exact_top(given, q))) for q in queries)
    assert hits / (10 * len(queries)) >= 0.95


def test_saved_with_its_position_and_caught_up_on_open(opened: Any, settings: IndexSettings) -> None:
    w = opened()
    given = vectors(150)
    save_all(w, given)
    found(w, given["m0000"])
    w.vector_index.settle()
    head = w.head_seq()
    w.close()
    [saved] = settings.directory.glob("*.vec")  # type: ignore[union-attr]
    assert saved.stat().st_size > 150 * DIMS * 2

    again = opened()
    more = vectors(20, seed=7)
    more = {f"n{i}": v for i, v in enumerate(more.values())}
    save_all(again, more)
    assert found(again, more["n3"], 1) == ["n3"]
    [index] = again.vector_index.describe()
    assert index["opened_from"] == "file" and index["position"] > head and index["kind"] == "hnsw"
    again.erase(memory_id="m0001", reason="asked", caller=OPERATOR)
    assert "m0001" not in found(again, given["m0001"], 5, include_hidden=True)
    assert found(again, given["m0002"], 1) == ["m0002"]


def test_a_damaged_file_is_rebuilt_from_the_log(opened: Any, settings: IndexSettings) -> None:
    w = opened(exact_up_to=20_000)
    given = vectors(40)
    save_all(w, given)
    found(w, given["m0000"])
    w.close()
    [saved] = settings.directory.glob("*.vec")  # type: ignore[union-attr]
    data = bytearray(saved.read_bytes())
    data[-5] ^= 0xFF
    saved.write_bytes(bytes(data))
    again = opened(exact_up_to=20_000)
    q = vectors(1, seed=99)["m0000"]
    assert found(again, q) == exact_top(given, q)
    assert again.vector_index.describe()[0]["opened_from"] == "view"


def test_another_databases_file_is_not_taken(tmp_path: Path, backend: Backend, clock: FrozenClock) -> None:
    folder = tmp_path / "shared-vectors"
    settings = IndexSettings(directory=folder, save_after=1)
    with Warden(backend.db(tmp_path, "one.db"), clock=clock, vector_index=settings) as one:
        save_all(one, vectors(30, seed=1))
        found(one, vectors(1)["m0000"])
    theirs = vectors(30, seed=2)
    with Warden(backend.db(tmp_path, "two.db"), clock=clock, vector_index=settings) as two:
        save_all(two, theirs)  # the same tenant, ids and head: only the hash at the position differs
        q = vectors(1, seed=3)["m0000"]
        assert found(two, q) == exact_top(theirs, q)
        assert two.vector_index.describe()[0]["opened_from"] == "view"


def test_the_tenant_is_the_wall(opened: Any, settings: IndexSettings) -> None:
    w = opened()
    ours, theirs = vectors(150, seed=1), vectors(150, seed=2)
    save_all(w, ours, tenant="acme")
    save_all(w, theirs, tenant="globex")  # the same memory ids in another tenant
    q = vectors(1, seed=5)["m0000"]
    assert found(w, q, tenant="acme") == exact_top(ours, q)
    assert found(w, q, tenant="globex") == exact_top(theirs, q)
    w.vector_index.settle()
    w.close()
    assert len(list(settings.directory.glob("*.vec"))) == 2  # type: ignore[union-attr]
    again = opened()
    assert set(found(again, q, tenant="globex")) >= set(exact_top(theirs, q)[:5])
    assert {d["tenant"]: d["vectors"] for d in again.vector_index.describe()} == {"globex": 150}


def test_every_node_follows_the_log(db_path: Path, clock: FrozenClock, settings: IndexSettings) -> None:
    """Two Wardens on one store (two nodes on PostgreSQL, two processes'
    worth on one SQLite file): each index follows what the other writes,
    without a search to pull it, and a read with ``min_seq`` is served
    from an index that has applied it."""
    with Warden(db_path, clock=clock, vector_index=settings) as a, Warden(db_path, clock=clock) as b:
        given = vectors(10)
        save_all(a, given)
        assert found(a, given["m0000"], 1) == ["m0000"]
        seq = save_memory(b, "late", embedding=[1.0] * DIMS).seq
        deadline = time.monotonic() + 5
        while a.vector_index.describe()[0]["position"] < seq:
            assert time.monotonic() < deadline, "the follower did not catch up"
            time.sleep(0.05)
        seq = save_memory(b, "later", embedding=[-1.0] + [1.0] * (DIMS - 1)).seq
        assert found(a, [-1.0] + [1.0] * (DIMS - 1), 1, min_seq=seq) == ["later"]


def erased_marks(vector: list[float]) -> list[bytes]:
    """The bytes an erased vector could be kept as: as given, and unit
    length as the indexes keep it (float32, and float16 in the graph)."""
    raw = np.array(vector, dtype="<f4")
    wide = raw.astype(np.float64)
    units = [raw / np.linalg.norm(raw), (wide / np.linalg.norm(wide)).astype("<f4")]  # normed in 32 or 64 bits
    return [raw[:8].tobytes()] + [u[:8].tobytes() for u in units] + [u.astype("<f2")[:8].tobytes() for u in units]


def index_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


@pytest.mark.parametrize("kind", ["exact", "hnsw"])
def test_erasure_leaves_no_vector_bytes_in_the_index_files(
    opened: Any, settings: IndexSettings, backend: Backend, db_path: Path, kind: str
) -> None:
    w = opened(exact_up_to=20_000 if kind == "exact" else 100)
    given = vectors(150)
    secret = [0.123456789 + i * 1e-3 for i in range(DIMS)]
    given["m0007"] = secret
    save_all(w, given)
    found(w, secret)
    w.vector_index.settle()
    w.close()
    assert any(mark in index_bytes(settings.directory) for mark in erased_marks(secret))  # type: ignore[arg-type]

    again = opened(exact_up_to=20_000 if kind == "exact" else 100)
    assert found(again, secret, 1) == ["m0007"]
    assert again.vector_index.describe()[0]["kind"] == kind
    again.erase(memory_id="m0007", reason="GDPR art. 17", caller=OPERATOR)
    save_memory(again, "after", embedding=[2.0] * DIMS)
    assert "m0007" not in found(again, secret, 5, include_hidden=True)
    again.vector_index.save()
    again.close()
    at_rest = backend.bytes_at_rest(db_path) + index_bytes(settings.directory)  # type: ignore[arg-type]
    for mark in erased_marks(secret):
        assert mark not in at_rest
    assert list(settings.directory.glob("*.vec"))  # type: ignore[union-attr]


def test_a_new_node_copies_no_files_it_cannot_trust(tmp_path: Path, backend: Backend, clock: FrozenClock) -> None:
    """A folder copied from a node at a later position (a restore of the
    store to an older backup) is not taken: the view is behind it."""
    db = backend.db(tmp_path)
    settings = IndexSettings(directory=tmp_path / "v", save_after=1)
    with Warden(db, clock=clock, vector_index=settings) as w:
        save_all(w, vectors(20))
        found(w, vectors(1)["m0000"])
        backup = backend.db(tmp_path, "backup.db")
        backend.copy_store(db, backup)
        save_all(w, {"extra": [1.0] * DIMS})
        found(w, [1.0] * DIMS)
    shutil.copytree(tmp_path / "v", tmp_path / "v2")
    with Warden(backup, clock=clock, vector_index=IndexSettings(directory=tmp_path / "v2")) as old:
        assert "extra" not in found(old, [1.0] * DIMS, 20, include_hidden=True)
        assert old.vector_index.describe()[0]["opened_from"] == "view"


@pytest.mark.parametrize("kind", ["exact", "hnsw"])
def test_several_vectors_a_memory_ranked_by_the_closest(opened: Any, kind: str) -> None:
    """Two vectors a memory (issue 59): the index answers each memory once,
    at its closer vector, as an exact search over both rows does."""
    w = opened(exact_up_to=20_000 if kind == "exact" else 100)
    firsts, seconds = vectors(150, seed=1), vectors(150, seed=2)
    items = [
        dict(
            memory_id=memory_id,
            kind="external_fact",
            summary=f"about {memory_id}",
            content=f"text of {memory_id}",
            source_url=f"https://example.org/{memory_id}",
            scope={"tenant": "acme", "project": "p1"},
            ttl="6h",
            embeddings=[firsts[memory_id], seconds[memory_id]],
        )
        for memory_id in firsts
    ]
    w.save_many(items, caller=OPERATOR)
    found(w, firsts["m0000"])
    w.vector_index.settle()
    assert kinds(w) == {"acme": kind}
    names = list(firsts)
    rows = np.stack([unit(list(firsts.values())), unit(list(seconds.values()))])  # (2, n, dims)
    rng = random.Random(9)
    hits = 0
    for _ in range(20):
        q = [rng.gauss(0, 1) for _ in range(DIMS)]
        best = (rows @ unit(q)).max(axis=0)
        expected = [names[i] for i in np.argsort(-best, kind="stable")[:10]]
        got = w.search(tenant="acme", vector=q, limit=10, mode="vector", caller=OPERATOR)
        got_ids = [f.view.memory_id for f in got]
        assert len(set(got_ids)) == len(got_ids), "each memory once"
        if kind == "exact":
            assert got_ids == expected
            assert [f.similarity for f in got] == pytest.approx(sorted(best, reverse=True)[:10], abs=1e-5)
        hits += len(set(got_ids) & set(expected))
    assert hits / 200 >= 0.95
    # each of a memory's vectors finds it first
    assert found(w, seconds["m0042"], 1) == ["m0042"] and found(w, firsts["m0042"], 1) == ["m0042"]
