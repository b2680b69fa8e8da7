"""The vector projection: per tenant, the current version's embedding of
each memory, searched exactly (numpy) for the closest to a query.

It proposes; the usable view decides. It holds every memory that has a
vector, whatever its status (the gate, asked afterwards, says which may be
used now), and follows the view: each search first applies what changed
since the position it last applied (the rows whose ``last_seq`` is past
it), so an erased memory's vector leaves it with the erasure. Each tenant
has its own matrix (one per vector length): no search reads another
tenant's vectors. Nothing of it is kept on disk; it is rebuilt from the
store on first use in each process (a node of a PostgreSQL cluster keeps
its own).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ._port import ViewReader

_GROW = 1024  # rows added at a time: an append is amortised, not a copy per vector


class VectorReads:
    """The view's one question for the vector projection (a mixin of ``SQLView``)."""

    conn: Any

    def vectors_since(self, tenant: str, dims: int, after_seq: int) -> list[tuple[str, Any]]:
        """(memory_id, vector bytes or None) of the tenant's memories changed
        after ``after_seq``: None where the current version has no vector of
        ``dims`` (never had one, or it was erased)."""
        return list(
            self.conn.execute(
                "SELECT m.memory_id, v.vector FROM memories m LEFT JOIN vectors v ON v.tenant = m.tenant "
                "AND v.memory_id = m.memory_id AND v.version = m.version AND v.dims = ? "
                "WHERE m.tenant = ? AND m.last_seq > ?",
                (dims, tenant, after_seq),
            )
        )


@dataclass
class _Matrix:
    """One tenant's vectors of one length, rows L2-normalised (the dot
    product is the cosine); a removed row is zeroed and its slot reused."""

    dims: int
    position: int = 0
    rows: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    ids: list[str | None] = field(default_factory=list)
    slot: dict[str, int] = field(default_factory=dict)
    free: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rows = np.zeros((0, self.dims), np.float32)

    def put(self, memory_id: str, data: Any) -> None:
        at = self.slot.get(memory_id)
        if data is None:
            if at is not None:
                self.rows[at] = 0.0
                self.ids[at] = None
                self.free.append(at)
                del self.slot[memory_id]
            return
        vector = np.frombuffer(bytes(data), dtype="<f4").astype(np.float32)
        norm = float(np.linalg.norm(vector))
        if norm > 0:
            vector = vector / norm
        if at is None:
            at = self.free.pop() if self.free else len(self.ids)
            if at == len(self.ids):
                self.ids.append(None)
                if at >= len(self.rows):
                    grown = np.zeros((len(self.rows) + _GROW, self.dims), np.float32)
                    grown[: len(self.rows)] = self.rows
                    self.rows = grown
            self.slot[memory_id] = at
            self.ids[at] = memory_id
        self.rows[at] = vector

    def nearest(self, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        count = len(self.ids)
        if not self.slot:
            return []
        scores = self.rows[:count] @ query
        live = np.fromiter((i is not None for i in self.ids), bool, count)
        scores = np.where(live, scores, -np.inf)
        k = min(k, len(self.slot))
        top = np.argpartition(-scores, k - 1)[:k] if k < count else np.arange(count)
        # ties in score fall to the id, so an answer never depends on slot order
        order = sorted(top.tolist(), key=lambda i: (-float(scores[i]), self.ids[i] or ""))
        return [(self.ids[i], float(scores[i])) for i in order if self.ids[i] is not None][:k]  # type: ignore[misc]

    def nbytes(self) -> int:
        return int(self.rows.nbytes)


class VectorIndex:
    """Every tenant's vector matrices in this process, each caught up with
    the view it is searched in."""

    def __init__(self) -> None:
        self._matrices: dict[tuple[str, int], _Matrix] = {}
        self._lock = threading.Lock()

    def nearest(self, view: ViewReader, tenant: str, query: Any, k: int) -> list[tuple[str, float]]:
        """The ``k`` memories of ``tenant`` whose vectors are closest to
        ``query`` (cosine, best first), in the state ``view`` reads."""
        q = np.asarray(query, dtype=np.float32)
        norm = float(np.linalg.norm(q))
        if norm == 0.0:
            return []
        q = q / norm
        with self._lock:
            matrix = self._caught_up(view, tenant, len(q))
            return matrix.nearest(q, k)

    def _caught_up(self, view: ViewReader, tenant: str, dims: int) -> _Matrix:
        position = view.position()
        key = (tenant, dims)
        matrix = self._matrices.get(key)
        if matrix is None or position < matrix.position:
            # new here, or the store went back (a restore): from the start
            matrix = self._matrices[key] = _Matrix(dims)
        if position > matrix.position or matrix.position == 0:
            for memory_id, data in view.vectors_since(tenant, dims, matrix.position):
                matrix.put(memory_id, data)
            matrix.position = position
        return matrix

    def nbytes(self) -> int:
        with self._lock:
            return sum(m.nbytes() for m in self._matrices.values())
