"""The two kinds of one tenant's vector index: exact (numpy) while the
tenant is small, HNSW (usearch) past ``IndexSettings.exact_up_to``.

Why usearch for the approximate one: it is maintained (releases every
few weeks), its wheel is small and has no dependency beyond numpy, it
takes and answers numpy arrays without copies through Python lists,
stores f32 or f16, and saves to and restores from bytes (or maps a file
read-only). FAISS is far larger and hnswlib is unmaintained.

The HNSW index stores f16 (half the memory of f32, and the top ten over
384 dimensions rank the same) with 16 links per node and a search breadth
of ``EXPANSION``: the least breadth that holds the recall target, each
doubling of it costing a query more time; f32 instead of f16 barely
changes recall (the breadth, not the precision, decides).

A vector that leaves an HNSW index (an erasure, a new version) leaves its
bytes in the freed slot until another vector takes it: ``scrub`` fills
every free slot with a filler and frees it again, so no destroyed vector
outlives the catch-up that removed it, in memory or in a saved file.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import numpy as np
from usearch.index import Index

CONNECTIVITY = 16
EXPANSION_ADD = (
    64  # half the build of 128 (the build is most of a large tenant's wait); the breadth below makes up the recall
)
EXPANSION = 2048  # the least breadth that held recall@10 >= 0.95 at 200,000 vectors
_FILLER_KEYS = 1 << 63  # fillers' keys: above every memory's
# exact rows added at a time: a quarter more (at least 64), so an append is
# amortised (not a copy per vector) while a small tenant's matrix stays near
# its size (a fixed block made small tenants hold many times their bytes)
_GROW_MIN = 64
_GROW_SHARE = 4


def normalised(data: Any) -> np.ndarray:
    """Stored bytes (float32, little-endian) as a unit row: the dot product is the cosine."""
    # the norm in 64 bits: one of 32-bit values near their largest is infinite in 32
    vector = np.frombuffer(bytes(data), dtype="<f4").astype(np.float64)
    norm = float(np.linalg.norm(vector))
    return (vector / norm if norm > 0 else vector).astype(np.float32)


def _ranked(pairs: Iterable[tuple[str, float]], k: int) -> list[tuple[str, float]]:
    # ties in score fall to the id, so an answer never depends on slot order
    return sorted(pairs, key=lambda p: (-p[1], p[0]))[:k]


class Exact:
    """One tenant's vectors as a matrix; a removed row is zeroed (its bytes
    overwritten at once) and its slot reused."""

    kind = "exact"

    def __init__(self, dims: int) -> None:
        self.dims = dims
        self.rows = np.zeros((0, dims), np.float32)
        self.ids: list[str | None] = []
        self.slot: dict[str, int] = {}
        self.free: list[int] = []

    def __len__(self) -> int:
        return len(self.slot)

    def put(self, memory_id: str, vector: np.ndarray | None) -> None:
        at = self.slot.get(memory_id)
        if vector is None:
            if at is not None:
                self.rows[at] = 0.0
                self.ids[at] = None
                self.free.append(at)
                del self.slot[memory_id]
            return
        if at is None:
            at = self.free.pop() if self.free else len(self.ids)
            if at == len(self.ids):
                self.ids.append(None)
                if at >= len(self.rows):
                    grown = np.zeros(
                        (len(self.rows) + max(_GROW_MIN, len(self.rows) // _GROW_SHARE), self.dims), np.float32
                    )
                    grown[: len(self.rows)] = self.rows
                    self.rows = grown
            self.slot[memory_id] = at
            self.ids[at] = memory_id
        self.rows[at] = vector

    def put_many(self, changes: list[tuple[str, np.ndarray | None]]) -> None:
        for memory_id, vector in changes:
            self.put(memory_id, vector)

    def nearest(self, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        count = len(self.ids)
        if not self.slot:
            return []
        scores = self.rows[:count] @ query
        live = np.fromiter((i is not None for i in self.ids), bool, count)
        scores = np.where(live, scores, -np.inf)
        k = min(k, len(self.slot))
        top = np.argpartition(-scores, k - 1)[:k] if k < count else np.arange(count)
        return _ranked(((self.ids[i], float(scores[i])) for i in top.tolist() if self.ids[i] is not None), k)  # type: ignore[misc]

    def held(self, memory_id: str) -> np.ndarray | None:
        """The vector this index holds for ``memory_id`` (a copy), or None."""
        at = self.slot.get(memory_id)
        return None if at is None else self.rows[at].copy()

    def live(self) -> tuple[list[str], np.ndarray]:
        """The memory ids and their rows, without the free slots."""
        at = sorted(self.slot.values())
        return [self.ids[i] for i in at], self.rows[at]  # type: ignore[misc]

    def scrub(self) -> None:
        """Nothing to do: a removed row is zeroed when it is removed."""

    def dump(self) -> tuple[dict[str, Any], bytes]:
        ids, rows = self.live()
        return {"kind": self.kind, "ids": ids}, np.ascontiguousarray(rows, dtype="<f4").tobytes()

    @classmethod
    def load(cls, dims: int, meta: dict[str, Any], payload: bytes) -> Exact:
        ids = meta["ids"]
        rows = np.frombuffer(payload, dtype="<f4").reshape(len(ids), dims)
        out = cls(dims)
        for memory_id, row in zip(ids, rows, strict=True):
            out.put(memory_id, row)
        return out

    def nbytes(self) -> int:
        return int(self.rows.nbytes) + _ids_nbytes(self.slot)


class Hnsw:
    """One tenant's vectors in a usearch HNSW graph; memory ids map to the
    graph's integer keys (given in order, never reused)."""

    kind = "hnsw"

    def __init__(self, dims: int, index: Index | None = None) -> None:
        self.dims = dims
        self.index = index or Index(
            ndim=dims, metric="cos", dtype="f16", connectivity=CONNECTIVITY, expansion_add=EXPANSION_ADD
        )
        self.index.expansion_search = EXPANSION
        self.key: dict[str, int] = {}
        self.id_of: dict[int, str] = {}
        self.next_key = 0
        self.freed = 0  # slots vectors have left and no vector has taken since
        self.unscrubbed = False  # a freed slot may still hold a removed vector's bytes

    def __len__(self) -> int:
        return len(self.key)

    @classmethod
    def built(cls, dims: int, ids: list[str], rows: np.ndarray) -> Hnsw:
        """An index of ``rows`` (one per id), built on every core at once."""
        out = cls(dims)
        keys = np.arange(len(ids), dtype=np.uint64)
        if ids:
            out.index.add(keys, rows, threads=0)
        out.key = {m: i for i, m in enumerate(ids)}
        out.id_of = dict(enumerate(ids))
        out.next_key = len(ids)
        return out

    def put(self, memory_id: str, vector: np.ndarray | None) -> None:
        old = self.key.pop(memory_id, None)
        if old is not None:
            self.index.remove(old)
            del self.id_of[old]
            self.freed += 1
            self.unscrubbed = True
        if vector is None:
            return
        key = self.next_key
        self.next_key += 1
        # a freed slot is taken first: a new version's vector overwrites its old one
        self.index.add(key, vector)
        self.freed = max(0, self.freed - 1)
        self.key[memory_id] = key
        self.id_of[key] = memory_id

    def put_many(self, changes: list[tuple[str, np.ndarray | None]]) -> None:
        """``put`` of each (distinct memory ids), the new vectors added in one
        call on every core: one ``add`` a vector is one thread and a Python
        round trip each, most of a large catch-up's time."""
        added = [(m, v) for m, v in changes if v is not None]
        for memory_id, vector in changes:
            if vector is None or memory_id in self.key:
                self.put(memory_id, None)  # a removal, or the old vector of a new version
        if not added:
            return
        keys = np.arange(self.next_key, self.next_key + len(added), dtype=np.uint64)
        self.next_key += len(added)
        self.index.add(keys, np.stack([v for _, v in added]), threads=0)
        self.freed = max(0, self.freed - len(added))
        for key, (memory_id, _) in zip(keys.tolist(), added, strict=True):
            self.key[memory_id] = key
            self.id_of[key] = memory_id

    def held(self, memory_id: str) -> np.ndarray | None:
        """The vector this graph holds for ``memory_id`` (in 32 bits, from its 16), or None."""
        key = self.key.get(memory_id)
        return None if key is None else np.asarray(self.index.get(key), dtype=np.float32)

    def scrub(self) -> None:
        if not self.unscrubbed or not self.freed:
            self.unscrubbed = False
            return
        keys = np.arange(_FILLER_KEYS, _FILLER_KEYS + self.freed, dtype=np.uint64)
        filler = np.zeros((self.freed, self.dims), np.float32)
        filler[:, 0] = 1.0
        self.index.add(keys, filler)
        self.index.remove(keys)
        self.unscrubbed = False

    def nearest(self, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        if not self.key:
            return []
        found = self.index.search(query, min(k, len(self.key)))
        pairs = (
            (self.id_of[int(key)], 1.0 - float(distance))
            for key, distance in zip(found.keys.tolist(), found.distances.tolist(), strict=True)
            if int(key) in self.id_of
        )
        return _ranked(pairs, k)

    def dump(self) -> tuple[dict[str, Any], bytes]:
        self.scrub()
        keys = list(self.id_of)
        meta = {
            "kind": self.kind,
            "ids": [self.id_of[k] for k in keys],
            "keys": keys,
            "next_key": self.next_key,
            "freed": self.freed,
        }
        return meta, bytes(self.index.save())

    @classmethod
    def load(cls, dims: int, meta: dict[str, Any], payload: bytes) -> Hnsw:
        index = Index.restore(payload, view=False)
        if index is None or index.ndim != dims:
            raise ValueError("not an HNSW index of this length")
        out = cls(dims, index)
        out.id_of = dict(zip(meta["keys"], meta["ids"], strict=True))
        out.key = {m: k for k, m in out.id_of.items()}
        out.next_key, out.freed = int(meta["next_key"]), int(meta["freed"])
        if len(index) != len(out.key):
            raise ValueError("the graph and its ids disagree")
        return out

    def nbytes(self) -> int:
        return int(self.index.memory_usage) + _ids_nbytes(self.key) + sys.getsizeof(self.id_of)


def _ids_nbytes(ids: dict[str, int]) -> int:
    """The id map's own memory (the dict and its strings; small ints are shared)."""
    return sys.getsizeof(ids) + sum(sys.getsizeof(m) for m in ids)


KINDS: dict[str, type[Exact] | type[Hnsw]] = {"exact": Exact, "hnsw": Hnsw}
