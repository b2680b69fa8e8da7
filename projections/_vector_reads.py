"""The view's questions for the vector projection (a mixin of ``SQLView``):
each memory's current vectors with the scope a search filters by, and
which memories a revocation took out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._fold import TERMINAL_SQL
from ._named import VectorRow
from ._selector import selector_sql

# the current version's vectors of one length, of a memory that may yet be
# used: an erased or revoked one never is again, and leaves the index
_ROWS = (
    'SELECT m.memory_id, m.agent, m.project, m.permission, m."user", m.tool, m.kind, v.vector '
    "FROM memories m JOIN vectors v ON v.tenant = m.tenant AND v.memory_id = m.memory_id "
    f"AND v.version = m.version AND v.dims = ? WHERE m.tenant = ? AND m.status NOT IN {TERMINAL_SQL}"
)


class VectorReads:
    conn: Any

    def vector_rows(self, tenant: str, dims: int, memory_ids: Sequence[str] | None = None) -> list[VectorRow]:
        """The vectors of ``dims`` and scope of ``memory_ids`` (None: every
        memory of ``tenant``) whose current version may yet be used and has
        vectors of that length; the others are absent."""
        if memory_ids is None:
            return list(map(VectorRow._make, self.conn.execute(_ROWS, (dims, tenant))))
        if not memory_ids:
            return []
        marks = ",".join("?" * len(memory_ids))
        rows = self.conn.execute(f"{_ROWS} AND m.memory_id IN ({marks})", (dims, tenant, *memory_ids))
        return list(map(VectorRow._make, rows))

    def revoked_at(self, tenant: str, seq: int, selector: dict[str, Any]) -> list[str]:
        """The memories of ``tenant`` the revocation at ``seq`` took out and
        nothing has changed since (a later change is a memory event of its
        own); ``selector`` narrows the statement to what it covers."""
        where, params = selector_sql(selector)
        return [
            memory_id
            for (memory_id,) in self.conn.execute(
                "SELECT memory_id FROM memories WHERE tenant = ? AND last_seq = ? "
                f"AND status = 'revoked' AND ({where})",
                (tenant, seq, *params),
            )
        ]

    def current_vectors(self, tenant: str, dims: int, memory_ids: list[str]) -> dict[str, Any]:
        """The vector bytes (each version's vectors back to back) of the
        current version of each of ``memory_ids`` that has them of ``dims``
        (the others are absent), whatever its status."""
        if not memory_ids:
            return {}
        marks = ",".join("?" * len(memory_ids))
        return dict(
            self.conn.execute(
                "SELECT m.memory_id, v.vector FROM memories m JOIN vectors v ON v.tenant = m.tenant "
                f"AND v.memory_id = m.memory_id AND v.version = m.version AND v.dims = ? "
                f"WHERE m.tenant = ? AND m.memory_id IN ({marks})",
                (dims, tenant, *memory_ids),
            )
        )
