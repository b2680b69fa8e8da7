"""The view's reads of the derivation graph (the ``derivations`` table):
walks up to the evidence and down to what was drawn from it, and what a
past view is listed from (``_asof``). Written once in SQL both backends
speak; ``SQLView`` inherits them, and a backend picks its walk's step."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from . import _graph
from ._named import Child
from ._rows import Connection, Key


class GraphReads:
    conn: Connection
    # one step of a walk of the derivation graph (``_graph``)
    GRAPH_STEP = _graph.JOIN_STEP

    # -- derivations -----------------------------------------------------------------------

    def ancestors(self, tenant: str, memory_ids: Sequence[str]) -> set[str]:
        """Every memory of ``tenant`` the given ones were drawn from, at any depth."""
        return _graph.ancestors(self.conn, tenant, memory_ids, self.GRAPH_STEP)

    def depth(self, tenant: str, memory_ids: Sequence[str], limit: int) -> int:
        """How many levels of evidence lie under the given memories (at most ``limit`` + 1)."""
        return _graph.depth(self.conn, tenant, memory_ids, limit, self.GRAPH_STEP)

    def descendants(self, keys: Iterable[Key]) -> set[Key]:
        """Every memory drawn from the given ones, at any depth."""
        return _graph.descendants(self.conn, keys, self.GRAPH_STEP)

    def children(self, parents: Iterable[Key]) -> list[Child]:
        """(tenant, child_id, child version, parent_id) drawn directly from ``parents``."""
        return _graph.children(self.conn, parents)

    def drawn_from(self, tenant: str, memory_id: str) -> list[str]:
        """Ids of the memories drawn from ``memory_id``, whatever their status."""
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT child_id FROM derivations WHERE tenant = ? AND parent_id = ? ORDER BY child_id",
                (tenant, memory_id),
            )
        ]

    # -- what a past view is listed from (projections/_asof.py) -------------------------------

    def existing_at(self, point: int, tenant: str | None, after: Key | None, limit: int) -> list[Key]:
        """Up to ``limit`` memories saved at or before seq ``point`` (of
        ``tenant`` when given), by tenant and id, after the key ``after``:
        rows are never deleted, so these are the memories that existed then."""
        where = ["first_seq <= ?"]
        args: list[int | str] = [point]
        if tenant is not None:
            where.append("tenant = ?")
            args.append(tenant)
            if after is not None:
                where.append("memory_id > ?")
                args.append(after[1])
        elif after is not None:
            # a row value: both backends seek the key's index to it (the OR
            # form scanned from the start, once per page)
            where.append("(tenant, memory_id) > (?, ?)")
            args.extend(after)
        sql = f"SELECT tenant, memory_id FROM memories WHERE {' AND '.join(where)} ORDER BY tenant, memory_id LIMIT ?"
        return [(t, m) for t, m in self.conn.execute(sql, [*args, limit])]

    def ever_drawn_from(self, tenant: str, memory_id: str) -> list[str]:
        """Ids of the memories any version of which was drawn from ``memory_id``."""
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT child_id FROM derivations_ever WHERE tenant = ? AND parent_id = ? ORDER BY child_id",
                (tenant, memory_id),
            )
        ]

    def revoked_evidence(self, selector: dict[str, Any], revocation_id: str, seq: int) -> list[Key]:
        """What a revocation just took out that is some memory's evidence."""
        return _graph.revoked_evidence(self.conn, selector, revocation_id, seq)
