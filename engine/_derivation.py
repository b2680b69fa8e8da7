"""Derived memories: summaries that point to their evidence.

Three things live here: judging a memory together with its evidence (the
gate's inputs), the cascade that invalidates descendants in the same
transaction as what took their evidence away, and the graph walks (cycles,
descendants) both need.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from memwarden.events import RecordedEvent
from memwarden.projections import (
    Access,
    Key,
    Kin,
    LineageQuery,
    MemoryRow,
    TakenAt,
    ViewReader,
    Write,
    parent_refs,
    row_of,
)

from ._gate import Decision, ParentState, decide
from ._versions import in_force

if TYPE_CHECKING:
    from memwarden.events import MemoryInvalidated
    from pydantic import TypeAdapter

CASCADE_TRIGGERS = frozenset({"memory.erased", "memory.invalidated", "memory.integrity_failed"})
# set while a cascade appends its own invalidations (``cascade``)
_WALKED: ContextVar[bool] = ContextVar("memwarden_cascade_walked", default=False)
_CYCLE = Decision(False, "derived_from_unusable", "treat_as_unknown", "cycle")

T = TypeVar("T")


@functools.cache
def _invalidations() -> TypeAdapter[list[MemoryInvalidated]]:
    """One validation call for a cascade's events, cheaper than one model
    at a time, and still every field checked: engine-made events get no
    shortcut. Made by the first cascade (pydantic loads with the first write)."""
    from memwarden.events import MemoryInvalidated
    from pydantic import TypeAdapter

    return TypeAdapter(list[MemoryInvalidated])


def deepest_first(root: T, parents_of: Callable[[T], Iterable[T]], key: Callable[[T], Hashable]) -> list[T]:
    """``root`` and everything it rests on, each once, each after its own
    evidence (a parent met again on the current path, a cycle, is not
    followed). An explicit stack, not recursion: a chain of derivations may
    be as deep as the limits allow, far past Python's recursion limit."""
    order: list[T] = []
    done: set[Hashable] = set()
    path: set[Hashable] = set()  # expanded, not yet finished
    stack: list[tuple[T, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        k = key(node)
        if expanded:
            path.discard(k)
            done.add(k)
            order.append(node)
        elif k not in done and k not in path:
            path.add(k)
            stack.append((node, True))
            stack.extend((p, False) for p in parents_of(node) if key(p) not in done and key(p) not in path)
    return order


# the nodes an explain's upward tree holds at most (its downward one: ``drawn``'s limit)
TREE_NODES = 200


class Drawn(Protocol):
    """What a Judge reads of a row to find its evidence: ``MemoryRow``, and
    ``ViewRow`` (the agent query's) too."""

    @property
    def tenant(self) -> str: ...
    @property
    def memory_id(self) -> str: ...
    @property
    def derived_from(self) -> str: ...


def _key(row: MemoryRow) -> Key:
    return (row.tenant, row.memory_id)


class EvidenceView(Protocol):
    """The reads a Judge makes: the live view's (``ViewReader``) or a past point's (``PointView``)."""

    def rows(self, access: Access, keys: Sequence[Key]) -> Mapping[Key, MemoryRow]: ...
    def lineage(self, query: LineageQuery) -> list[Kin]: ...


class Judge:
    """Decides rows with their evidence, memoised for one read."""

    def __init__(self, view: EvidenceView, now: str, policies: dict[str, str]) -> None:
        self.view = view
        self.now = now
        self.policies = policies
        self._rows: dict[Key, MemoryRow | None] = {}
        self._decisions: dict[Key, Decision] = {}

    def row(self, tenant: str, memory_id: str) -> MemoryRow | None:
        """A memory of the view; evidence is always in its child's tenant."""
        key = (tenant, memory_id)
        if key not in self._rows:
            self._rows[key] = row_of(self.view, Access.system(), tenant, memory_id)
        return self._rows[key]

    def refresh(self, tenant: str, memory_id: str) -> None:
        """Read a memory again and decide it anew from its parents as
        decided: after a write changed it, its children are judged from
        its new state."""
        key = (tenant, memory_id)
        row = self._rows[key] = row_of(self.view, Access.system(), tenant, memory_id)
        self._decisions.pop(key, None)
        if row is not None:
            self._decisions[key] = self._decided(row, self.parents(row))

    def parents(self, row: Drawn) -> list[ParentState]:
        """The gate's view of ``row``'s evidence, each parent decided."""
        for ref in parent_refs(row.memory_id, row.derived_from):
            parent = self.row(row.tenant, ref["memory_id"])
            if parent is not None:
                self._settle(parent)
        return self._states(row)

    def decide(self, row: MemoryRow, *, content_ok: bool | None = None) -> Decision:
        key = (row.tenant, row.memory_id)
        if content_ok is None:
            self._settle(row)
            return self._decisions[key]
        return decide(
            row,
            now=self.now,
            policy_version=in_force(self.policies, row.policy),
            content_ok=content_ok,
            parents=self.parents(row),
        )

    def _states(self, row: Drawn) -> list[ParentState]:
        """``row``'s parents as the gate sees them. A parent that exists but is
        not decided yet is on the walk's current path: a cycle, which only a
        crafted log could hold."""
        states: list[ParentState] = []
        for ref in parent_refs(row.memory_id, row.derived_from):
            key = (row.tenant, ref["memory_id"])
            parent = self.row(*key)
            if parent is None:
                states.append(ParentState(ref["memory_id"], ref["version"], None, None))
            else:
                decision = self._decisions.get(key, _CYCLE)
                states.append(ParentState(ref["memory_id"], ref["version"], parent.version, decision, parent.agent))
        return states

    def _settle(self, root: MemoryRow) -> None:
        """Decide ``root`` and all its evidence not decided yet, deepest first."""

        def undecided_parents(row: MemoryRow) -> list[MemoryRow]:
            found = []
            for ref in parent_refs(row.memory_id, row.derived_from):
                parent = self.row(row.tenant, ref["memory_id"])
                if parent is not None and (row.tenant, ref["memory_id"]) not in self._decisions:
                    found.append(parent)
            return found

        if _key(root) in self._decisions:
            return
        self._prefetch(root)
        for row in deepest_first(root, undecided_parents, _key):
            self._decisions[_key(row)] = self._decided(row, self._states(row))

    def _decided(self, row: MemoryRow, parents: list[ParentState]) -> Decision:
        return decide(row, now=self.now, policy_version=in_force(self.policies, row.policy), parents=parents)

    def _prefetch(self, root: MemoryRow) -> None:
        """Every row under ``root``'s evidence in two statements (the walk,
        then the rows), not one per memory: on a server each is a round trip."""
        if root.derived_from == "[]":
            return
        tenant = root.tenant
        walked = self.view.lineage(LineageQuery("up", ((tenant, root.memory_id),)))
        below = [k.memory_id for k in walked if k.key not in self._rows]
        if len(below) < 2:
            return  # one parent: as cheap to read when the walk comes to it
        found = self.view.rows(Access.system(), [(tenant, m) for m in sorted(below)])
        for memory_id in below:
            self._rows[(tenant, memory_id)] = found.get((tenant, memory_id))

    def tree(self, row: MemoryRow, access: Access, *, limit: int = TREE_NODES) -> dict[str, Any]:
        """The derivation tree under ``row``, each node with its status; a
        parent ``access`` does not allow is shown as a missing one.

        Bounded as ``drawn`` is: a memory met again (a diamond in the DAG)
        is a reference (``"ref": true``, no parents of its own), and past
        ``limit`` nodes in all a node's remaining parents are left out
        (``"truncated": true``), so a DAG of any shape answers in at most
        ``limit`` nodes rather than one per path."""
        left = [limit]
        seen = {_key(row)}

        def node_of(memory: MemoryRow, depth: int) -> dict[str, Any]:
            decision = self.decide(memory)
            node: dict[str, Any] = {
                "memory_id": memory.memory_id,
                "version": memory.version,
                "status": memory.status,
                "usable": decision.usable,
                "reason": decision.reason,
                "parents": [],
            }
            if depth >= 32:
                return node
            for state in self.parents(memory):
                if left[0] <= 0:
                    node["truncated"] = True
                    break
                left[0] -= 1
                parent = self.row(memory.tenant, state.memory_id)
                if parent is None or not access.allows(parent.tenant, parent.agent):
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
                elif _key(parent) in seen:
                    decided = self.decide(parent)
                    node["parents"].append(
                        {
                            "memory_id": parent.memory_id,
                            "version": parent.version,
                            "status": parent.status,
                            "usable": decided.usable,
                            "reason": decided.reason,
                            "ref": True,
                            "parents": [],
                        }
                    )
                else:
                    seen.add(_key(parent))
                    node["parents"].append(node_of(parent, depth + 1))
            return node

        return node_of(row, 0)

    def drawn(self, row: MemoryRow, access: Access, *, limit: int = 200) -> list[dict[str, Any]]:
        """What was drawn from ``row``, down to ``limit`` memories in all,
        each node with its status and the gate's answer; a memory
        ``access`` does not allow is left out, as if it did not exist."""
        left = [limit]
        seen = {_key(row)}

        def below(parent: MemoryRow, depth: int) -> list[dict[str, Any]]:
            nodes: list[dict[str, Any]] = []
            if depth >= 32:
                return nodes
            for kin in self.view.lineage(LineageQuery("drawn", ((parent.tenant, parent.memory_id),))):
                child = self.row(kin.tenant, kin.memory_id)
                if child is None or _key(child) in seen or not access.allows(child.tenant, child.agent):
                    continue
                if left[0] <= 0:
                    break
                left[0] -= 1
                seen.add(_key(child))
                decision = self.decide(child)
                nodes.append(
                    {
                        "memory_id": child.memory_id,
                        "version": child.version,
                        "status": child.status,
                        "usable": decision.usable,
                        "reason": decision.reason,
                        "children": below(child, depth + 1),
                    }
                )
            return nodes

        return below(row, 0)


def cascade(tx: Write, records: Sequence[RecordedEvent]) -> None:
    """A reactor: when evidence is revoked, erased, invalidated or
    quarantined, invalidate what was drawn from it, at every depth, in this
    transaction. The depths are walked here, level by level, and appended
    in one batch: letting each level's invalidations come back to this
    reactor would nest a call per level, and a chain may be deeper than
    Python recurses. Every invalidation names its direct parent and is
    ``caused_by`` the event that took that parent out: the batch takes the
    seqs after the head, in order, so a parent's seq is known beforehand."""
    if _WALKED.get():
        return
    roots: dict[Key, tuple[int, str]] = {}  # parent -> (the seq that took it out, why)
    view = tx.view
    for record in records:
        if record.type == "revocation.issued":
            # what this revocation took out, found the way its UPDATE found
            # it (so the cost follows its size, not every derivation ever
            # recorded), and of that only what is someone's evidence
            p = record.payload
            evidence = TakenAt(p["revocation_id"], record.seq, p["selector"], evidence=True)
            for covered in view.covered(evidence):
                roots[covered.key] = (record.seq, "revoked")
        elif record.type in CASCADE_TRIGGERS:
            why = {"memory.erased": "erased", "memory.integrity_failed": "integrity_failed"}.get(
                record.type, record.payload.get("reason", "invalidated")
            )
            roots[(record.payload["tenant"], record.payload["memory_id"])] = (record.seq, why)
    fields: list[dict[str, Any]] = []
    base = tx.head.seq  # fields[k] will be recorded at seq base + 1 + k
    seen: set[Key] = set(roots)
    frontier = roots
    while frontier:
        following: dict[Key, tuple[int, str]] = {}
        for kin in view.lineage(LineageQuery("children", tuple(frontier))):
            tenant, child_id, version, parent_id = kin.tenant, kin.memory_id, kin.version, kin.parent_id
            assert version is not None and parent_id is not None  # a children walk names both
            if (tenant, child_id) in seen:  # drawn from two parents that went out together
                continue
            seen.add((tenant, child_id))
            seq, why = frontier[(tenant, parent_id)]
            fields.append(
                {
                    # deterministic (the same log state gives the same cascade)
                    # and ordered by the seq that caused it, so a cascade's ids
                    # go to the end of the event_id index, not to random pages
                    "event_id": f"inv_{seq:012d}_{len(fields):06d}",
                    "actor": "memwarden",
                    "tenant": tenant,
                    "memory_id": child_id,
                    "version": version,
                    "reason": "derived_from_unusable",
                    "detail": f"parent {parent_id}: {why}",
                    "caused_by": seq,
                }
            )
            following[(tenant, child_id)] = (base + len(fields), "derived_from_unusable")
        frontier = following
    if fields:
        # The walk went to every depth: what these invalidations would take
        # out is among them already, so their records, coming back to this
        # reactor, are not walked again (asking their children would find none)
        walked = _WALKED.set(True)
        try:
            tx.append(_invalidations().validate_python(fields))
        finally:
            _WALKED.reset(walked)


def rows_for(view: ViewReader, keys: Sequence[Key]) -> list[MemoryRow]:
    return list(view.rows(Access.system(), list(keys)).values())
