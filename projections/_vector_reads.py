"""The view's questions for the vector projection (a mixin of ``SQLView``):
each memory's current vectors with the scope a search filters by."""

from __future__ import annotations

from collections.abc import Sequence

from ._fold import TERMINAL_SQL
from ._named import VectorRow
from ._rows import Connection

# the current version's vectors of one length, of a memory that may yet be
# used: an erased or revoked one never is again, and leaves the index
_ROWS = (
    'SELECT m.memory_id, m.agent, m.project, m.permission, m."user", m.tool, m.kind, v.vector '
    "FROM memories m JOIN vectors v ON v.tenant = m.tenant AND v.memory_id = m.memory_id "
    f"AND v.version = m.version AND v.dims = ? WHERE m.tenant = ? AND m.status NOT IN {TERMINAL_SQL}"
)


class VectorReads:
    conn: Connection

    def vector_rows(
        self, tenant: str, dims: int, memory_ids: Sequence[str] | None = None, *, any_status: bool = False
    ) -> list[VectorRow]:
        """The vectors of ``dims`` and scope of ``memory_ids`` (None: every
        memory of ``tenant``) whose current version has vectors of that
        length and may yet be used (``any_status``: whatever its status);
        the others are absent."""
        sql = _ROWS if not any_status else _ROWS.replace(f" AND m.status NOT IN {TERMINAL_SQL}", "")
        if memory_ids is None:
            return list(map(VectorRow._make, self.conn.execute(sql, (dims, tenant))))
        if not memory_ids:
            return []
        marks = ",".join("?" * len(memory_ids))
        rows = self.conn.execute(f"{sql} AND m.memory_id IN ({marks})", (dims, tenant, *memory_ids))
        return list(map(VectorRow._make, rows))
