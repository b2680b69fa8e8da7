"""The view's reads of the derivation graph (the ``derivations`` table):
walks up to the evidence and down to what was drawn from it, and what a
past view is listed from (``_asof``). Written once in SQL both backends
speak; ``SQLView`` inherits them, and a backend picks its walk's step."""

from __future__ import annotations

from . import _graph
from ._reads import Kin, LineageQuery
from ._rows import Connection, Key


class GraphReads:
    conn: Connection
    # one step of a walk of the derivation graph (``_graph``)
    GRAPH_STEP = _graph.JOIN_STEP

    # -- derivations -----------------------------------------------------------------------

    def lineage(self, query: LineageQuery) -> list[Kin]:
        """A walk of the derivation graph from ``query.keys`` (``LineageQuery``),
        in recursive queries: no Python recursion, whatever the depth."""
        if query.walk == "up":
            return self._up(query)
        if query.walk == "down":
            return [Kin(t, m) for t, m in sorted(_graph.descendants(self.conn, query.keys, self.GRAPH_STEP))]
        if query.walk == "children":
            return [Kin(c.tenant, c.memory_id, c.parent_id, c.version) for c in _graph.children(self.conn, query.keys)]
        found: list[Kin] = []
        for tenant, parent_id in query.keys:
            found.extend(
                Kin(tenant, child_id, parent_id)
                for (child_id,) in self.conn.execute(
                    "SELECT child_id FROM derivations WHERE tenant = ? AND parent_id = ? ORDER BY child_id",
                    (tenant, parent_id),
                )
            )
        return found

    def _up(self, query: LineageQuery) -> list[Kin]:
        by_tenant: dict[str, list[str]] = {}
        for tenant, memory_id in query.keys:
            by_tenant.setdefault(tenant, []).append(memory_id)
        found: list[Kin] = []
        for tenant, ids in by_tenant.items():
            if query.limit is None:
                found.extend(Kin(tenant, m) for m in sorted(_graph.ancestors(self.conn, tenant, ids, self.GRAPH_STEP)))
            else:
                levels = _graph.levels(self.conn, tenant, ids, query.limit, self.GRAPH_STEP)
                found.extend(Kin(tenant, m, level=d) for m, d in sorted(levels.items()))
        return found

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
