"""The two kinds of one tenant's vector index: exact (numpy) while the
tenant is small, HNSW (usearch) past ``IndexSettings.exact_up_to``.

Why usearch for the approximate one: it is maintained (releases every
few weeks), its wheel is small and has no dependency beyond numpy, it
takes and answers numpy arrays without copies through Python lists,
stores f32 or f16, and saves to and restores from bytes (or maps a file
read-only). FAISS is far larger and hnswlib is unmaintained.

The HNSW index stores f16 (half the memory of f32, and the top ten over
384 dimensions rank the same) with 16 links per node, a build breadth
and a search breadth set by the graph's size (``EXPANSIONS_ADD``,
``BREADTHS``), chosen by measuring recall on vectors clustered as a
sentence model's are: a small graph searches broadly for
about 2 ms, which holds recall even on unclustered vectors; a large one
as broadly as its recall needs, each doubling of breadth costing a query
about half again its time. f32 instead of f16 barely changes recall (the
breadth, not the precision, decides).

An int8 exact scan was measured as the cheaper exact search past the
graph's reach and not taken: numpy has no int8 BLAS, and its int8
matrix-vector product took twice the float32 one's time.

A memory may hold several vectors (one version's ``embeddings``): each
is a row (exact) or a key (HNSW) of its own, and a memory is as close to
a query as its closest: a search asks for ``k`` times the most any memory
holds, which holds the best row of each of the ``k`` best memories (fewer
than ``k`` memories can have rows above it), and answers each once.

A vector that leaves an HNSW index (an erasure, a revocation, a new
version) leaves its bytes in the freed slot until another vector takes
it: after an erasure ``scrub`` fills every free slot with a filler and
frees it again, so no destroyed vector outlives the catch-up that
removed it, in memory or in a saved file. Only then: a filler costs an
insertion into the graph (1,000 of them over a second), and a vector
that leaves otherwise is not destroyed (the store keeps it).
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterable
from typing import Any

import numpy as np
from usearch.index import Index

# links a node: 32 would take a graph's memory from about 1.0x to about 1.5x
# the raw float32 (with the id maps, past the 1.5x target); its recall is made up by breadth
CONNECTIVITY = 16
# the build's breadth by the size a graph is built at: (at most this many vectors, expansion_add)
EXPANSIONS_ADD: tuple[tuple[int | None, int], ...] = (
    (50_000, 64),  # a third of 128's build CPU; the small graph's breadth of 2,048 makes up its recall
    (None, 128),  # at 100,000 clustered vectors: recall@10 0.979 against 64's 0.945 at breadth 128
)
# the search breadth (usearch's ``expansion_search``) by the graph's size:
# (at most this many vectors, breadth), the last for every size past them
BREADTHS: tuple[tuple[int | None, int], ...] = (
    (50_000, 2048),  # as before issue 62: ~2 ms a search, and recall even on unclustered vectors
    (200_000, 256),  # clustered, 100,000 and 200,000: recall@10 0.993 and 0.991 (128: 0.979), an eighth of 2,048's work
    (None, 512),  # recall falls as the graph grows (0.002 a doubling at 256): past 200,000 a margin of twice
)
_FILLER_KEYS = 1 << 63  # fillers' keys: above every memory's
# exact rows added at a time: a quarter more (at least 64), so an append is
# amortised (not a copy per vector) while a small tenant's matrix stays near
# its size (a fixed block made small tenants hold many times their bytes)
_GROW_MIN = 64
_GROW_SHARE = 4


def by_size(table: tuple[tuple[int | None, int], ...], size: int) -> int:
    """The value of ``table``'s first row whose size (None: any) holds ``size``."""
    for most, value in table:
        if most is None or size <= most:
            return value
    return table[-1][1]


def breadth(size: int) -> int:
    """The search breadth of a graph of ``size`` vectors (``BREADTHS``)."""
    return by_size(BREADTHS, size)


def normalised(data: Any, dims: int) -> np.ndarray:
    """Stored bytes (float32, little-endian; one vector or several back to
    back) as unit rows, ``dims`` long: the dot product is the cosine."""
    # the norm in 64 bits: one of 32-bit values near their largest is infinite in 32
    rows = np.frombuffer(bytes(data), dtype="<f4").astype(np.float64).reshape(-1, dims)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def ranked(pairs: Iterable[tuple[str, float]], k: int) -> list[tuple[str, float]]:
    # ties in score fall to the id, so an answer never depends on slot order
    return sorted(pairs, key=lambda p: (-p[1], p[0]))[:k]


def best(row_ids: list[str], scores: np.ndarray, k: int, most: int, floor: float) -> list[tuple[str, float]]:
    """The ``k`` memories of the best scores above ``floor``, each once, at
    its best row's score (``row_ids[i]`` holds row ``i``; a memory holds at
    most ``most`` rows)."""
    above = np.flatnonzero(scores > floor)
    if not len(above):
        return []
    want = min(k * most, len(above))
    top = above[np.argpartition(-scores[above], want - 1)[:want]] if want < len(above) else above
    out: dict[str, float] = {}
    for i, score in zip(top.tolist(), scores[top].tolist(), strict=True):
        m = row_ids[i]
        if score > out.get(m, -np.inf):
            out[m] = score
    return ranked(out.items(), k)


class Exact:
    """One index's vectors as a matrix, a row each; a removed row is zeroed
    (its bytes overwritten at once) and its slot reused."""

    kind = "exact"

    def __init__(self, dims: int) -> None:
        self.dims = dims
        self.rows = np.zeros((0, dims), np.float32)
        self.alive = np.zeros(0, bool)  # which rows hold a vector (kept, not rebuilt a search)
        self.ids: list[str | None] = []
        self.slots: dict[str, list[int]] = {}
        self.free: list[int] = []
        self.most = 1  # the most rows a memory has held here

    def __len__(self) -> int:
        return len(self.slots)

    def count_rows(self) -> int:
        return len(self.ids) - len(self.free)

    def holds(self, memory_id: str) -> bool:
        return memory_id in self.slots

    def _take(self) -> int:
        if self.free:
            return self.free.pop()
        at = len(self.ids)
        self.ids.append(None)
        if at >= len(self.rows):
            grow = max(_GROW_MIN, len(self.rows) // _GROW_SHARE)
            self.rows = np.concatenate([self.rows, np.zeros((grow, self.dims), np.float32)])
            self.alive = np.concatenate([self.alive, np.zeros(grow, bool)])
        return at

    def put(self, memory_id: str, vectors: np.ndarray | None) -> None:
        """``memory_id``'s rows become ``vectors`` (None: it leaves); a new
        version's vectors overwrite its old ones in their slots."""
        old = self.slots.pop(memory_id, [])
        n = 0 if vectors is None else len(vectors)
        for at in old[n:]:
            self.rows[at] = 0.0
            self.alive[at] = False
            self.ids[at] = None
            self.free.append(at)
        if not n:
            return
        slots = old[:n] + [self._take() for _ in range(n - len(old[:n]))]
        self.rows[slots] = vectors
        self.alive[slots] = True
        for at in slots:
            self.ids[at] = memory_id
        self.slots[memory_id] = slots
        self.most = max(self.most, n)

    def put_many(self, changes: list[tuple[str, np.ndarray | None]]) -> None:
        for memory_id, vectors in changes:
            self.put(memory_id, vectors)

    def nearest(self, query: np.ndarray, k: int, floor: float = -np.inf) -> tuple[list[tuple[str, float]], int]:
        """The ``k`` nearest memories above ``floor``, and the rows compared."""
        count = len(self.ids)
        if not self.slots:
            return [], 0
        scores = np.where(self.alive[:count], self.rows[:count] @ query, -np.inf)
        return best(self.ids, scores, k, self.most, floor), self.count_rows()  # type: ignore[arg-type]

    def rows_of(self, memory_ids: Collection[str]) -> tuple[list[str], np.ndarray]:
        """The rows of ``memory_ids`` (those held), with the id of each."""
        slots = [at for m in memory_ids for at in self.slots.get(m, ())]
        return [self.ids[at] for at in slots], self.rows[slots]  # type: ignore[misc]

    def held(self, memory_id: str) -> np.ndarray | None:
        """The rows this index holds for ``memory_id`` (a copy), or None."""
        at = self.slots.get(memory_id)
        return None if at is None else self.rows[at].copy()

    def live(self) -> tuple[list[str], np.ndarray]:
        """The id of each live row and the rows, without the free slots."""
        at = np.flatnonzero(self.alive[: len(self.ids)])
        return [self.ids[i] for i in at.tolist()], self.rows[at]  # type: ignore[misc]

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
        for memory_id, at in _grouped(ids).items():
            out.put(memory_id, rows[at])
        return out

    def nbytes(self) -> int:
        return int(self.rows.nbytes) + int(self.alive.nbytes) + _ids_nbytes(self.slots)


def _grouped(ids: list[str]) -> dict[str, list[int]]:
    """The positions of each id in ``ids``, in order."""
    out: dict[str, list[int]] = {}
    for at, memory_id in enumerate(ids):
        out.setdefault(memory_id, []).append(at)
    return out


class Hnsw:
    """One index's vectors in a usearch HNSW graph; each vector is a key of
    the graph (given in order, never reused), mapped to its memory's id."""

    kind = "hnsw"

    def __init__(self, dims: int, index: Index | None = None, size: int = 0) -> None:
        """A graph of ``dims``: ``index`` (restored), or a new one for about ``size`` vectors."""
        self.dims = dims
        self.index = index or Index(
            ndim=dims,
            metric="cos",
            dtype="f16",
            connectivity=CONNECTIVITY,
            expansion_add=by_size(EXPANSIONS_ADD, size),
        )
        self.breadth = 0  # the search breadth set on the graph, for its size (``_tuned``)
        self.key: dict[str, list[int]] = {}
        self.id_of: dict[int, str] = {}
        self.next_key = 0
        self.most = 1
        self.freed = 0  # slots vectors have left and no vector has taken since
        self.unscrubbed = False  # a freed slot may still hold a removed vector's bytes

    def __len__(self) -> int:
        return len(self.key)

    def count_rows(self) -> int:
        return len(self.id_of)

    def holds(self, memory_id: str) -> bool:
        return memory_id in self.key

    @classmethod
    def built(cls, dims: int, ids: list[str], rows: np.ndarray) -> Hnsw:
        """An index of ``rows`` (``ids[i]`` holds row ``i``), built on every core at once."""
        out = cls(dims, size=len(ids))
        keys = np.arange(len(ids), dtype=np.uint64)
        if ids:
            out.index.add(keys, rows, threads=0)
        out._mapped(keys.tolist(), ids)
        out.next_key = len(ids)
        out._tuned()
        return out

    def _tuned(self) -> None:
        """The search breadth for the graph's size, set when it changes."""
        wanted = breadth(len(self.id_of))
        if wanted != self.breadth:
            # usearch's setter has no annotations, so mypy takes the property as read-only
            self.index.expansion_search = wanted  # type: ignore[misc]
            self.breadth = wanted

    def _mapped(self, keys: list[int], ids: list[str]) -> None:
        for key, memory_id in zip(keys, ids, strict=True):
            held = self.key.setdefault(memory_id, [])
            held.append(key)
            self.id_of[key] = memory_id
            if len(held) > self.most:
                self.most = len(held)

    def _remove(self, memory_ids: Iterable[str]) -> None:
        """Every vector of ``memory_ids`` out of the graph, in one call."""
        keys = [key for m in memory_ids for key in self.key.pop(m, ())]
        if not keys:
            return
        self.index.remove(np.asarray(keys, dtype=np.uint64))
        for key in keys:
            del self.id_of[key]
        self.freed += len(keys)
        self.unscrubbed = True
        self._tuned()

    def put(self, memory_id: str, vectors: np.ndarray | None) -> None:
        self.put_many([(memory_id, vectors)])

    def put_many(self, changes: list[tuple[str, np.ndarray | None]]) -> None:
        """``memory_id``'s vectors become the given ones (None: it leaves),
        for each of ``changes`` (distinct ids), the new vectors added in one
        call on every core: one ``add`` a vector is one thread and a Python
        round trip each, most of a large catch-up's time. A freed slot is
        taken first: a new version's vectors overwrite the old ones."""
        self._remove(m for m, _ in changes)
        added = [(m, v) for m, v in changes if v is not None and len(v)]
        if not added:
            return
        ids = [m for m, v in added for _ in range(len(v))]
        keys = np.arange(self.next_key, self.next_key + len(ids), dtype=np.uint64)
        self.next_key += len(ids)
        self.index.add(keys, np.concatenate([v for _, v in added]), threads=0)
        self.freed = max(0, self.freed - len(ids))
        self._mapped(keys.tolist(), ids)
        self._tuned()

    def held(self, memory_id: str) -> np.ndarray | None:
        """The rows this graph holds for ``memory_id`` (in 32 bits, from its 16), or None."""
        keys = self.key.get(memory_id)
        return None if keys is None else self._vectors(keys)

    def _vectors(self, keys: list[int]) -> np.ndarray:
        if not keys:
            return np.zeros((0, self.dims), np.float32)
        # usearch annotates a tuple of one row: several keys answer a row each, all held here
        return np.stack(self.index.get(np.asarray(keys, dtype=np.uint64), dtype="f32"))  # type: ignore[arg-type]

    def rows_of(self, memory_ids: Collection[str]) -> tuple[list[str], np.ndarray]:
        keys = [(m, key) for m in memory_ids for key in self.key.get(m, ())]
        return [m for m, _ in keys], self._vectors([key for _, key in keys])

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

    def nearest(
        self, query: np.ndarray, k: int, floor: float = -np.inf, among: Collection[str] | None = None
    ) -> tuple[list[tuple[str, float]], int]:
        """The ``k`` nearest memories above ``floor`` (of ``among`` only, when
        given: the graph asked for more, in proportion to their share of it,
        until ``k`` of them are found or the graph is exhausted), and the
        distances computed."""
        if not self.key:
            return [], 0
        total = len(self.id_of)
        share = 1 if among is None else max(1, -(-len(self.key) // max(1, len(among))))
        count = min(k * self.most * share, total)
        examined = 0
        while True:
            found = self.index.search(query, count)
            examined += int(found.computed_distances)
            out: dict[str, float] = {}
            for key, distance in zip(found.keys.tolist(), found.distances.tolist(), strict=True):
                m = self.id_of.get(int(key))
                similarity = 1.0 - float(distance)
                if m is None or similarity <= floor or (among is not None and m not in among):
                    continue
                out[m] = max(similarity, out.get(m, -np.inf))
            if len(out) >= k or count >= total or len(found.keys) < count:
                return ranked(out.items(), k), examined
            count = min(count * 2, total)

    def dump(self) -> tuple[dict[str, Any], bytes]:
        # no scrub here: an erased vector's slot was scrubbed by the catch-up
        # that removed it, before any save; a revoked one's may be saved
        # (the store keeps its vector too, until an erasure)
        keys = list(self.id_of)
        meta = {
            "kind": self.kind,
            "ids": [self.id_of[k] for k in keys],
            "keys": keys,
            "next_key": self.next_key,
            "freed": self.freed,
        }
        saved = self.index.save()
        assert saved is not None  # with no path, save answers the bytes
        return meta, bytes(saved)

    @classmethod
    def load(cls, dims: int, meta: dict[str, Any], payload: bytes) -> Hnsw:
        index = Index.restore(payload, view=False)
        if index is None or index.ndim != dims:
            raise ValueError("not an HNSW index of this length")
        out = cls(dims, index)
        out._mapped([int(k) for k in meta["keys"]], list(meta["ids"]))
        out.next_key, out.freed = int(meta["next_key"]), int(meta["freed"])
        if len(index) != len(out.id_of):
            raise ValueError("the graph and its ids disagree")
        out._tuned()
        return out

    def nbytes(self) -> int:
        return int(self.index.memory_usage) + _ids_nbytes(self.key) + sys.getsizeof(self.id_of)


def _ids_nbytes(ids: dict[str, Any]) -> int:
    """The id map's own memory (the dict and its strings; small ints are shared)."""
    return sys.getsizeof(ids) + sum(sys.getsizeof(m) for m in ids)


KINDS: dict[str, type[Exact] | type[Hnsw]] = {"exact": Exact, "hnsw": Hnsw}
