"""One tenant's vectors of one length, in parts by agent, each memory with
the scope a search filters by.

A search is confined and filtered before anything is ranked: a key bound
to an agent searches that agent's part only, and the request's other
scope fields (project, permission, user, tool, kind) narrow each part to
the memories that hold them, through sets kept per part, before a single
vector is compared. So the work of a search, and what it answers, depend
only on memories the caller may see: no other agent's memory is compared,
counted or skipped on its behalf (issue 58: an agent learnt, from how long
a search took, how many of another agent's memories lay near a vector).

Each part is exact (numpy) or an HNSW graph (``_vector_kinds``) by its own
size. A filtered search compares exactly the rows that hold the filter
while they are at most ``exact_up_to``; past that, a graph part is asked
for more candidates in proportion to their share of it and keeps theirs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ._named import VectorRow
from ._vector_kinds import KINDS, Exact, Hnsw, best, normalised, ranked
from ._wanted import FILTERS, Wanted


class Where(NamedTuple):
    """A memory's scope as the index filters by it."""

    agent: str | None
    project: str | None
    permission: str | None
    user: str | None
    tool: str | None
    kind: str | None

    def filters(self) -> Iterator[tuple[str, str]]:
        return ((f, v) for f, v in zip(FILTERS, self[1:], strict=True) if v is not None)


@dataclass
class Part:
    """One agent's vectors (or those of memories naming no agent)."""

    index: Exact | Hnsw
    by: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (field, value) -> memory ids
    dirty: set[str] | None = None  # while its graph is built: the memories changed since its snapshot

    def among(self, filters: list[tuple[str, str]]) -> set[str]:
        """The memories of this part that hold every one of ``filters``."""
        sets = sorted((self.by.get(f, set()) for f in filters), key=len)
        return sets[0].intersection(*sets[1:]) if len(sets) > 1 else sets[0]


class TenantIndex:
    """Every part of one tenant's index of one length, at one log position."""

    def __init__(self, tenant: str, dims: int, position: int, opened_from: str = "view") -> None:
        self.tenant = tenant
        self.dims = dims
        self.position = position
        self.opened_from = opened_from  # or "file": where this process found it
        self.parts: dict[str | None, Part] = {}
        self.where: dict[str, Where] = {}
        self.changes = 0  # since it was last saved

    def __len__(self) -> int:
        return len(self.where)

    # -- changes ------------------------------------------------------------------

    def apply(self, changes: Iterable[tuple[str, Where | None, np.ndarray | None]], *, scrub: bool = False) -> None:
        """Each memory's vectors (unit rows) and scope as the view now has
        them; None: it leaves (erased, revoked, or no vector of this length).
        ``scrub`` (an erasure is among them): no byte of a vector that left
        is kept in a graph's freed slots (``Hnsw.scrub``: costly, and only
        an erasure destroys a vector; a revoked one is still in the store)."""
        leaving: dict[str | None, list[str]] = {}
        coming: dict[str | None, list[tuple[str, np.ndarray]]] = {}
        count = 0
        for memory_id, where, rows in changes:
            count += 1
            stays = where is not None and rows is not None and len(rows) > 0
            old = self.where.pop(memory_id, None)
            if old is not None:
                _unlisted(self.parts[old.agent], memory_id, old)
                if not stays or where.agent != old.agent:  # type: ignore[union-attr]
                    leaving.setdefault(old.agent, []).append(memory_id)
            if stays:
                self.where[memory_id] = where  # type: ignore[assignment]
                coming.setdefault(where.agent, []).append((memory_id, rows))  # type: ignore[union-attr,arg-type]
        for agent, ids in leaving.items():
            part = self.parts[agent]
            part.index.put_many([(m, None) for m in ids])
            if part.dirty is not None:
                part.dirty.update(ids)
        for agent, puts in coming.items():
            part = self.parts.get(agent) or self.parts.setdefault(agent, Part(Exact(self.dims)))
            part.index.put_many(puts)  # type: ignore[arg-type]
            for memory_id, _ in puts:
                _listed(part, memory_id, self.where[memory_id])
            if part.dirty is not None:
                part.dirty.update(m for m, _ in puts)
        for agent in {*leaving, *coming}:
            part = self.parts[agent]
            if scrub:
                part.index.scrub()
            if not len(part.index) and part.dirty is None:
                del self.parts[agent]
        self.changes += count

    # -- searching ----------------------------------------------------------------

    def nearest(
        self, query: np.ndarray, k: int, floor: float, wanted: Wanted, exact_up_to: int
    ) -> tuple[list[tuple[str, float]], int]:
        """The ``k`` memories ``wanted`` allows nearest ``query`` with a
        similarity above ``floor``, and how many vectors were compared."""
        parts = [self.parts.get(wanted.agent)] if wanted.agent is not None else list(self.parts.values())
        filters = wanted.filters()
        found: list[tuple[str, float]] = []
        examined = 0
        for part in parts:
            if part is None:
                continue
            if not filters:
                pairs, n = part.index.nearest(query, k, floor)
            else:
                among = part.among(filters)
                if not among:
                    continue
                if isinstance(part.index, Exact) or len(among) <= exact_up_to:
                    ids, rows = part.index.rows_of(among)
                    pairs, n = best(ids, rows @ query, k, part.index.most, floor), len(ids)
                else:
                    pairs, n = part.index.nearest(query, k, floor, among)
            found += pairs
            examined += n
        return ranked(found, k), examined

    def held(self, memory_id: str) -> np.ndarray | None:
        where = self.where.get(memory_id)
        return None if where is None else self.parts[where.agent].index.held(memory_id)

    def rows(self) -> int:
        return sum(p.index.count_rows() for p in self.parts.values())

    def nbytes(self) -> int:
        return sum(p.index.nbytes() for p in self.parts.values())

    def describe(self) -> list[dict[str, Any]]:
        return [
            {
                "tenant": self.tenant,
                "agent": agent,
                "dims": self.dims,
                "kind": part.index.kind,
                "memories": len(part.index),
                "vectors": part.index.count_rows(),
                "position": self.position,
                "opened_from": self.opened_from,
            }
            for agent, part in self.parts.items()
        ]

    # -- files --------------------------------------------------------------------

    def dump(self) -> tuple[dict[str, Any], bytes]:
        """The parts' metadata (each kind's, its memories and their scopes,
        the scopes once each) and their payloads back to back."""
        scopes: dict[tuple[Any, ...], int] = {}
        members: dict[str | None, list[str]] = {agent: [] for agent in self.parts}
        for memory_id, where in self.where.items():
            members[where.agent].append(memory_id)
        parts, payloads = [], []
        for agent, part in self.parts.items():
            meta, payload = part.index.dump()
            ids = members[agent]
            parts.append(
                {
                    "agent": agent,
                    "index": meta,
                    "length": len(payload),
                    "memories": ids,
                    "scopes": [scopes.setdefault(tuple(self.where[m][1:]), len(scopes)) for m in ids],
                }
            )
            payloads.append(payload)
        return {"parts": parts, "scopes": [list(s) for s in scopes]}, b"".join(payloads)

    @classmethod
    def load(cls, tenant: str, dims: int, position: int, meta: dict[str, Any], payload: bytes) -> TenantIndex:
        out = cls(tenant, dims, position, opened_from="file")
        scopes = [tuple(s) for s in meta["scopes"]]
        at = 0
        for saved in meta["parts"]:
            agent, length = saved["agent"], int(saved["length"])
            index = KINDS[saved["index"]["kind"]].load(dims, saved["index"], payload[at : at + length])
            at += length
            part = out.parts[agent] = Part(index)
            ids = saved["memories"]
            if len(ids) != len(index) or not all(map(index.holds, ids)):
                raise ValueError("a part's memories and its index disagree")
            for memory_id, scope in zip(ids, saved["scopes"], strict=True):
                where = out.where[memory_id] = Where(agent, *scopes[scope])
                _listed(part, memory_id, where)
        if at != len(payload):
            raise ValueError("the payload is not the parts' length")
        return out


def _listed(part: Part, memory_id: str, where: Where) -> None:
    for key in where.filters():
        part.by.setdefault(key, set()).add(memory_id)


def _unlisted(part: Part, memory_id: str, where: Where) -> None:
    for key in where.filters():
        held = part.by.get(key)
        if held is not None:
            held.discard(memory_id)
            if not held:
                del part.by[key]


def changes_of(
    rows: list[VectorRow], asked: Iterable[str], dims: int
) -> Iterator[tuple[str, Where | None, np.ndarray | None]]:
    """The view's rows as the index's changes, and a leaving for each of
    ``asked`` it has no row for (erased, revoked, or no vector of ``dims``)."""
    found = set()
    for row in rows:
        found.add(row.memory_id)
        where = Where(row.agent, row.project, row.permission, row.user, row.tool, row.kind)
        yield row.memory_id, where, normalised(row.vector, dims)
    for memory_id in asked:
        if memory_id not in found:
            yield memory_id, None, None
