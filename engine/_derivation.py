"""Derived memories: summaries that point to their evidence.

Three things live here: judging a memory together with its evidence (the
gate's inputs), the cascade that invalidates descendants in the same
transaction as what took their evidence away, and the graph walks (cycles,
descendants) both need.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from memwarden.events import MemoryInvalidated, RecordedEvent, WriteTransaction
from memwarden.projections import Key, fetch_row, fetch_rows, parent_refs, selector_sql
from pydantic import TypeAdapter

from ._access import EVERYONE, Access
from ._gate import Decision, ParentState, decide

CASCADE_TRIGGERS = frozenset({"memory.erased", "memory.invalidated", "memory.integrity_failed"})
# one validation call for a cascade's events: a quarter cheaper than one
# model at a time, and still every field checked (engine-made events get
# no shortcut)
_INVALIDATIONS: TypeAdapter[list[MemoryInvalidated]] = TypeAdapter(list[MemoryInvalidated])


class Judge:
    """Decides rows with their evidence, memoised for one read."""

    def __init__(self, conn: sqlite3.Connection, now: str, policies: dict[str, int]) -> None:
        self.conn = conn
        self.now = now
        self.policies = policies
        self._rows: dict[Key, dict[str, Any] | None] = {}
        self._decisions: dict[Key, Decision] = {}

    def row(self, tenant: str, memory_id: str) -> dict[str, Any] | None:
        """A memory of the view; evidence is always in its child's tenant."""
        key = (tenant, memory_id)
        if key not in self._rows:
            self._rows[key] = fetch_row(self.conn, tenant, memory_id)
        return self._rows[key]

    def parents(self, row: dict[str, Any], visiting: frozenset[str] = frozenset()) -> list[ParentState]:
        refs = parent_refs(row["memory_id"], row["derived_from"])
        states: list[ParentState] = []
        for ref in refs:
            parent = self.row(row["tenant"], ref["memory_id"])
            if parent is None:
                states.append(ParentState(ref["memory_id"], ref["version"], None, None))
            elif ref["memory_id"] in visiting:  # only a crafted log could hold a cycle
                states.append(
                    ParentState(
                        ref["memory_id"],
                        ref["version"],
                        parent["version"],
                        Decision(False, "derived_from_unusable", "treat_as_unknown", "cycle"),
                    )
                )
            else:
                states.append(
                    ParentState(
                        ref["memory_id"],
                        ref["version"],
                        parent["version"],
                        self.decide(parent, visiting=visiting | {row["memory_id"]}),
                    )
                )
        return states

    def decide(
        self, row: dict[str, Any], *, content_ok: bool | None = None, visiting: frozenset[str] = frozenset()
    ) -> Decision:
        memory_id = (row["tenant"], row["memory_id"])
        if content_ok is None and memory_id in self._decisions:
            return self._decisions[memory_id]
        decision = decide(
            row,
            now=self.now,
            policy_version=self.policies.get(row["policy"], 1),
            content_ok=content_ok,
            parents=self.parents(row, visiting),
        )
        if content_ok is None:
            self._decisions[memory_id] = decision
        return decision

    def tree(self, row: dict[str, Any], depth: int = 0, access: Access = EVERYONE) -> dict[str, Any]:
        """The derivation tree under ``row``, each node with its status; a
        parent ``access`` does not allow is shown as a missing one."""
        decision = self.decide(row)
        node: dict[str, Any] = {
            "memory_id": row["memory_id"],
            "version": row["version"],
            "status": row["status"],
            "usable": decision.usable,
            "reason": decision.reason,
            "parents": [],
        }
        if depth < 32:
            for state in self.parents(row):
                parent = self.row(row["tenant"], state.memory_id)
                if parent is None or not access.allows(parent["tenant"], parent["agent"]):
                    node["parents"].append(
                        {
                            "memory_id": state.memory_id,
                            "version": state.wanted,
                            "status": "missing",
                            "usable": False,
                            "reason": "not_found",
                            "parents": [],
                        }
                    )
                else:
                    node["parents"].append(self.tree(parent, depth + 1, access))
        return node


def ancestors(conn: sqlite3.Connection, tenant: str, memory_ids: Sequence[str]) -> set[str]:
    """Every memory of ``tenant`` the given ones were drawn from, at any depth
    (a recursive query: no Python recursion, whatever the depth)."""
    if not memory_ids:
        return set()
    marks = ",".join("?" * len(memory_ids))
    return {
        r[0]
        for r in conn.execute(
            f"WITH RECURSIVE up(id) AS (SELECT parent_id FROM derivations WHERE tenant = ? AND child_id IN ({marks}) "
            "UNION SELECT d.parent_id FROM derivations d JOIN up ON d.tenant = ? AND d.child_id = up.id) "
            "SELECT id FROM up",
            [tenant, *memory_ids, tenant],
        )
    }


def descendants(conn: sqlite3.Connection, keys: Iterable[Key]) -> set[Key]:
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
                    f"AND parent_id IN ({marks}) UNION SELECT d.child_id FROM derivations d "
                    "JOIN down ON d.tenant = ? AND d.parent_id = down.id) SELECT id FROM down",
                    [tenant, *chunk, tenant],
                )
            )
    return found


def cascade(tx: WriteTransaction, records: Sequence[RecordedEvent]) -> None:
    """A reactor: when evidence is revoked, erased, invalidated or
    quarantined, invalidate what was drawn from it, in this transaction.
    The invalidations it appends come back here, so it walks every depth."""
    roots: dict[Key, tuple[int, str]] = {}  # parent -> (the seq that took it out, why)
    conn = tx.conn
    for record in records:
        if record.type == "revocation.issued":
            # what this revocation took out, found the way its UPDATE found
            # it (so the cost follows its size, not every derivation ever
            # recorded), and of that only what is someone's evidence
            where, params = selector_sql(record.payload["selector"])
            for tenant, memory_id in conn.execute(
                f"SELECT m.tenant, m.memory_id FROM memories m WHERE ({where}) AND m.revoked_by = ? "
                "AND m.last_seq = ? AND EXISTS (SELECT 1 FROM derivations d WHERE d.tenant = m.tenant "
                "AND d.parent_id = m.memory_id)",
                [*params, record.payload["revocation_id"], record.seq],
            ):
                roots[(tenant, memory_id)] = (record.seq, "revoked")
        elif record.type in CASCADE_TRIGGERS:
            why = {"memory.erased": "erased", "memory.integrity_failed": "integrity_failed"}.get(
                record.type, record.payload.get("reason", "invalidated")
            )
            roots[(record.payload["tenant"], record.payload["memory_id"])] = (record.seq, why)
    if not roots:
        return
    children: list[tuple[str, str, int, str]] = []
    by_tenant: dict[str, list[str]] = {}
    for tenant, memory_id in roots:
        by_tenant.setdefault(tenant, []).append(memory_id)
    for tenant, parents in by_tenant.items():
        for start in range(0, len(parents), 500):
            chunk = parents[start : start + 500]
            children += conn.execute(
                "SELECT d.tenant, d.child_id, m.version, d.parent_id FROM derivations d JOIN memories m "
                "ON m.tenant = d.tenant AND m.memory_id = d.child_id "
                f"WHERE d.tenant = ? AND d.parent_id IN ({','.join('?' * len(chunk))}) "
                "AND m.status NOT IN ('erased', 'revoked', 'invalidated')",
                [tenant, *chunk],
            ).fetchall()
    children.sort()  # by child: the log's order does not depend on SQLite's plan
    fields: list[dict[str, Any]] = []
    seen: set[Key] = set()
    for n, (tenant, child_id, version, parent_id) in enumerate(children):
        if (tenant, child_id) in seen:  # drawn from two parents that went in this transaction
            continue
        seen.add((tenant, child_id))
        seq, why = roots[(tenant, parent_id)]
        fields.append(
            {
                # deterministic (the same log state gives the same cascade)
                # and ordered by the seq that caused it, so a cascade's ids
                # go to the end of the event_id index, not to random pages
                "event_id": f"inv_{seq:012d}_{n:06d}",
                "actor": "memwarden",
                "tenant": tenant,
                "memory_id": child_id,
                "version": version,
                "reason": "derived_from_unusable",
                "detail": f"parent {parent_id}: {why}",
                "caused_by": seq,
            }
        )
    if fields:
        tx.append(_INVALIDATIONS.validate_python(fields))


def rows_for(conn: sqlite3.Connection, keys: Sequence[Key]) -> list[dict[str, Any]]:
    return [row for row in fetch_rows(conn, list(keys)).values() if row is not None]
