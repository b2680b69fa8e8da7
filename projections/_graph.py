"""The derivation graph: which memories were drawn from which
(the ``derivations`` table), walked by recursive queries, so no walk
recurses in Python however deep a chain goes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ._fold import SETTLED_SQL
from ._named import Child
from ._rows import Connection, Key

# One step of a walk: the rows of ``derivations`` (alias d) whose ``{key}``
# is ``{walk}.id``, in the tenant given by the step's one ``?``. SQLite
# answers a join with a lookup of the key each time. PostgreSQL plans the
# join once, from statistics that lag behind a growing table, and may hash
# a tenant's every derivation at each level (O(n) a level, O(n^2) a walk);
# a LATERAL subquery fenced with OFFSET 0 keeps it a lookup per row.
JOIN_STEP = "derivations d JOIN {walk} ON d.tenant = ? AND d.{key} = {walk}.id"
LATERAL_STEP = "{walk} CROSS JOIN LATERAL (SELECT * FROM derivations WHERE tenant = ? AND {key} = {walk}.id OFFSET 0) d"


def ancestors(conn: Connection, tenant: str, memory_ids: Sequence[str], step: str = JOIN_STEP) -> set[str]:
    """Every memory of ``tenant`` the given ones were drawn from, at any depth
    (a recursive query: no Python recursion, whatever the depth)."""
    if not memory_ids:
        return set()
    marks = ",".join("?" * len(memory_ids))
    return {
        r[0]
        for r in conn.execute(
            f"WITH RECURSIVE up(id) AS (SELECT parent_id FROM derivations WHERE tenant = ? AND child_id IN ({marks}) "
            f"UNION SELECT d.parent_id FROM {step.format(walk='up', key='child_id')}) SELECT id FROM up",
            [tenant, *memory_ids, tenant],
        )
    }


def levels(
    conn: Connection, tenant: str, memory_ids: Sequence[str], limit: int, step: str = JOIN_STEP
) -> dict[str, int]:
    """Every memory of ``tenant`` the given ones were drawn from, walked no
    deeper than ``limit + 1`` levels, each with the deepest level it was met
    at (2: a direct parent): so one walk answers both whether a memory is
    evidence under them and how deep their evidence goes."""
    if not memory_ids:
        return {}
    marks = ",".join("?" * len(memory_ids))
    return {
        memory_id: int(level)
        for memory_id, level in conn.execute(
            f"WITH RECURSIVE up(id, d) AS (SELECT parent_id, 2 FROM derivations WHERE tenant = ? "
            f"AND child_id IN ({marks}) UNION SELECT d.parent_id, up.d + 1 FROM "
            f"{step.format(walk='up', key='child_id')} WHERE up.d <= ?) SELECT id, max(d) FROM up GROUP BY id",
            [tenant, *memory_ids, tenant, limit],
        )
    }


def descendants(conn: Connection, keys: Iterable[Key], step: str = JOIN_STEP) -> set[Key]:
    """Every memory drawn from the given ones, at any depth, in their tenants."""
    by_tenant: dict[str, list[str]] = {}
    for tenant, memory_id in keys:
        by_tenant.setdefault(tenant, []).append(memory_id)
    found: set[Key] = set()
    for tenant, ids in by_tenant.items():
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(
                (tenant, r[0])
                for r in conn.execute(
                    "WITH RECURSIVE down(id) AS (SELECT child_id FROM derivations WHERE tenant = ? "
                    f"AND parent_id IN ({marks}) UNION SELECT d.child_id FROM "
                    f"{step.format(walk='down', key='parent_id')}) SELECT id FROM down",
                    [tenant, *chunk, tenant],
                )
            )
    return found


def children(conn: Connection, parents: Iterable[Key]) -> list[Child]:
    """Memories drawn from ``parents`` that are still in the read paths,
    sorted by child so that the log's order does not depend on SQLite's plan."""
    by_tenant: dict[str, list[str]] = {}
    for tenant, memory_id in parents:
        by_tenant.setdefault(tenant, []).append(memory_id)
    children: list[Child] = []
    for tenant, ids in by_tenant.items():
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            children += map(
                Child._make,
                conn.execute(
                    "SELECT d.tenant, d.child_id, m.version, d.parent_id FROM derivations d JOIN memories m "
                    "ON m.tenant = d.tenant AND m.memory_id = d.child_id "
                    f"WHERE d.tenant = ? AND d.parent_id IN ({','.join('?' * len(chunk))}) "
                    f"AND m.status NOT IN {SETTLED_SQL}",
                    [tenant, *chunk],
                ),
            )
    return sorted(children)
