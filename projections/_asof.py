"""The usable view as it stood at a past seq, answered from indexes.

A memory's row at seq S is a pure function of its own events up to S and
of the revocations issued around them (``fold_memory``, ``revoke_row``):
exactly what the view was built from. So a past row is its stream, read
through the log's stream index, folded with the revocations and policy
changes up to S (read through their own index), and never a replay of the
whole log; and a memory nothing touched after S (its live row's
``last_seq`` <= S) is its live row, read as it is. Which memories existed
at S comes from the live view (a row's
``first_seq``; rows are never deleted), and which memories were ever drawn
from one from ``derivations_ever``. What one question costs follows the
size of its answer: one memory's stream, its ancestors', a page of a
tenant's memories; not the size of the log.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from memwarden.events import RecordedEvent, version_key

from ._access import Access
from ._fold import SETTLED, fold_memory, revoke_row
from ._reads import Kin, LineageQuery
from ._rows import Key, MemoryRow, parent_refs
from ._selector import Revocation, could_cover

# the rows one read of streams folds at a time (two streams each)
CHUNK = 250


class PastLog(Protocol):
    def context_events(self, until_seq: int | None = None) -> Iterator[RecordedEvent]: ...
    def memories_events(
        self, keys: Sequence[tuple[str, str]], *, until_seq: int | None = None
    ) -> Iterator[RecordedEvent]: ...


class Listing(Protocol):
    """What the live view tells about the past: who existed, who drew from whom."""

    def existing_at(self, point: int, tenant: str | None, after: Key | None, limit: int) -> list[Key]: ...
    def ever_drawn_from(self, tenant: str, memory_id: str) -> list[str]: ...
    def rows(self, access: Access, keys: Sequence[Key]) -> dict[Key, MemoryRow]: ...


def _by_tenant(keys: Iterable[Key]) -> dict[str, list[str]]:
    by_tenant: dict[str, list[str]] = {}
    for tenant, memory_id in keys:
        by_tenant.setdefault(tenant, []).append(memory_id)
    return by_tenant


def story(
    events: Iterable[RecordedEvent], context: Iterable[RecordedEvent], tenant: str, memory_id: str
) -> Iterator[tuple[RecordedEvent, MemoryRow]]:
    """One memory's row after each step of its story: each of its own
    events, each revocation that took it out, each change of its policy, in
    seq order. The same fold the view is built from, one memory at a time."""
    row: dict[str, Any] | None = None
    revocations: list[Revocation] = []
    for event in heapq.merge(events, context, key=lambda e: e.seq):
        p = event.payload
        if event.type.startswith("memory."):
            if p.get("tenant") != tenant or p.get("memory_id") != memory_id:
                continue  # another tenant's memory of the same id, before schema 2
            row = fold_memory(row, event, revocations)
            if row is not None:
                yield event, MemoryRow.of(row)
        elif event.type == "revocation.issued":
            revocation = Revocation.issued(event)
            if not could_cover(revocation.selector, tenant):
                continue
            revocations.append(revocation)
            changed = revoke_row(row, revocation, event.seq) if row is not None else None
            if changed is not None:
                row = changed
                yield event, MemoryRow.of(row)
        elif event.type == "policy.version_changed":
            if row is not None and row["policy"] == p["policy"]:
                yield event, MemoryRow.of(row)


def row_after(
    events: Iterable[RecordedEvent], context: Iterable[RecordedEvent], tenant: str, memory_id: str
) -> MemoryRow | None:
    row = None
    for _event, row in story(events, context, tenant, memory_id):  # noqa: B007 - the last one is wanted
        pass
    return row


class PointView:
    """The view's reads as of ``point``, for the Judge, explain and replay
    (the ``ViewReader`` methods they use). Rows are folded once and kept
    for this read; ``forget`` lets a long listing keep flat memory."""

    def __init__(self, log: PastLog, reading: Callable[[], AbstractContextManager[Listing]], point: int) -> None:
        # each listing is its own short read of the live view, not one held
        # for the whole answer: the log below ``point`` never changes, rows
        # are never deleted and their first_seq never moves, so no snapshot
        # is needed, and a long replay never holds the store's connection
        self.log = log
        self.reading = reading
        self.point = point
        context = list(log.context_events(until_seq=point))
        self._revocations = [e for e in context if e.type == "revocation.issued"]
        self._policy_changes = [e for e in context if e.type == "policy.version_changed"]
        self._by_tenant: dict[str, list[RecordedEvent]] = {}
        self._rows: dict[Key, MemoryRow | None] = {}

    def context(self, tenant: str) -> list[RecordedEvent]:
        """The revocations that may touch ``tenant``'s memories and every policy change, in seq order."""
        if tenant not in self._by_tenant:
            self._by_tenant[tenant] = list(
                heapq.merge(
                    (e for e in self._revocations if could_cover(e.payload["selector"], tenant)),
                    self._policy_changes,
                    key=lambda e: e.seq,
                )
            )
        return self._by_tenant[tenant]

    def forget(self) -> None:
        self._rows.clear()

    # -- the reads ----------------------------------------------------------

    def position(self) -> int:
        return self.point

    def rows(self, access: Access, keys: Sequence[Key]) -> dict[Key, MemoryRow]:
        """The rows of those of ``keys`` that existed then and ``access``
        allows (none for the others): folded from events, so confined here."""
        found = self._then(keys)
        return {k: row for k, row in found.items() if access.allows(row.tenant, row.agent)}

    def _then(self, keys: Sequence[Key]) -> dict[Key, MemoryRow]:
        """The rows of those of ``keys`` that existed then (none for the others)."""
        missing = sorted({k for k in keys if k not in self._rows})
        # A live row nothing touched after the point is the row then: every
        # event of a memory and every revocation that changes it moves its
        # last_seq. Only the memories touched since are folded from their
        # streams (rows are never deleted: no live row, no memory then).
        with self.reading() as live:
            current = live.rows(Access.system(), missing) if missing else {}
        folding: list[Key] = []
        for key in missing:
            row = current.get(key)
            if row is None or row.last_seq <= self.point:
                self._rows[key] = row
            else:
                folding.append(key)
        for start in range(0, len(folding), CHUNK):
            chunk = folding[start : start + CHUNK]
            grouped: dict[Key, list[RecordedEvent]] = defaultdict(list)
            for event in self.log.memories_events(chunk, until_seq=self.point):
                grouped[(event.payload["tenant"], event.payload["memory_id"])].append(event)
            for tenant, memory_id in chunk:
                events = grouped.get((tenant, memory_id))
                self._rows[(tenant, memory_id)] = (
                    row_after(events, self.context(tenant), tenant, memory_id) if events else None
                )
        return {k: row for k in keys if (row := self._rows.get(k)) is not None}

    def lineage(self, query: LineageQuery) -> list[Kin]:
        """``ViewReader.lineage`` then: each walk answered as the live view
        answers it, over the edges the rows then drew (``derived_from``)."""
        if query.walk == "drawn":
            return [
                Kin(tenant, child, memory_id)
                for tenant, memory_id in query.keys
                for child in self.drawn_from(tenant, memory_id)
            ]
        if query.walk == "children":
            return self._children(query.keys)
        if query.walk == "down":
            return [Kin(t, m) for t, m in sorted(self.descendants(query.keys))]
        found: list[Kin] = []
        for tenant, ids in _by_tenant(query.keys).items():
            if query.limit is None:
                found.extend(Kin(tenant, m) for m in sorted(self.ancestors(tenant, ids)))
            else:
                found.extend(Kin(tenant, m, level=d) for m, d in sorted(self.levels(tenant, ids, query.limit).items()))
        return found

    def _drew(self, tenant: str, memory_ids: Iterable[str]) -> set[str]:
        """The ids the given memories of ``tenant`` were drawn from then (one step up)."""
        rows = self._then([(tenant, m) for m in sorted(set(memory_ids))])
        return {ref["memory_id"] for row in rows.values() for ref in parent_refs(row.memory_id, row.derived_from)}

    def levels(self, tenant: str, memory_ids: Sequence[str], limit: int) -> dict[str, int]:
        """Every memory of ``tenant`` the given ones were drawn from then, walked
        no deeper than ``limit + 1`` levels, each with the deepest level it was
        met at (2: a direct parent), as ``_graph.levels`` walks the live graph."""
        found: dict[str, int] = {}
        level, frontier = 2, self._drew(tenant, memory_ids)
        while frontier:
            found.update(dict.fromkeys(frontier, level))  # a deeper level met later wins
            if level > limit:
                break
            level, frontier = level + 1, self._drew(tenant, frontier)
        return found

    def ancestors(self, tenant: str, memory_ids: Sequence[str]) -> set[str]:
        """Every memory of ``tenant`` the given ones were drawn from then, at any depth."""
        found: set[str] = set()
        frontier = list(memory_ids)
        while frontier:
            rows = self._then([(tenant, m) for m in frontier])
            step = {
                ref["memory_id"]
                for row in rows.values()
                for ref in parent_refs(row.memory_id, row.derived_from)
                if ref["memory_id"] not in found
            }
            found |= step
            frontier = sorted(step)
        return found

    def drawn_from(self, tenant: str, memory_id: str) -> list[str]:
        """Ids of the memories drawn from ``memory_id`` then, whatever their status."""
        with self.reading() as live:
            candidates = live.ever_drawn_from(tenant, memory_id)
        rows = self._then([(tenant, c) for c in candidates])
        return sorted(
            child_id
            for (_, child_id), row in rows.items()
            if any(ref["memory_id"] == memory_id for ref in parent_refs(child_id, row.derived_from))
        )

    def descendants(self, keys: Iterable[Key]) -> set[Key]:
        """Every memory drawn from the given ones then, at any depth, in their tenants."""
        found: set[Key] = set()
        frontier = sorted(set(keys))
        while frontier:
            step = {(tenant, child) for tenant, memory_id in frontier for child in self.drawn_from(tenant, memory_id)}
            frontier = sorted(step - found)
            found |= step
        return found

    def _children(self, keys: Sequence[Key]) -> list[Kin]:
        """Those drawn directly from ``keys`` then that were still in the read
        paths then, with their version then, in the live view's order."""
        found: list[tuple[str, str, int, str]] = []
        for tenant, memory_id in keys:
            children = self.drawn_from(tenant, memory_id)
            rows = self._then([(tenant, c) for c in children])
            found.extend(
                (tenant, child, row.version, memory_id)
                for child in children
                if (row := rows.get((tenant, child))) is not None and row.status not in SETTLED
            )
        return [Kin(t, child, parent, version) for t, child, version, parent in sorted(found)]

    def page(self, tenant: str | None, after: Key | None, limit: int) -> list[MemoryRow]:
        """Up to ``limit`` rows of the memories that existed then, by tenant
        and id, after the key ``after``."""
        with self.reading() as live:
            keys = live.existing_at(self.point, tenant, after, limit)
        rows = self._then(keys)
        return [rows[k] for k in keys if k in rows]

    def every_row(self, tenant: str | None = None) -> list[MemoryRow]:
        out: list[MemoryRow] = []
        after: Key | None = None
        while page := self.page(tenant, after, 1000):
            out.extend(page)
            after = page[-1].key
        return out

    def policies(self) -> dict[str, str]:
        """Each policy set by then and its version key then."""
        return {e.payload["policy"]: version_key(e.payload["version"]) for e in self._policy_changes}

    def policy_version(self, policy: str) -> str | None:
        return self.policies().get(policy)
