"""Which memories a revocation selector covers, in Python and in SQL.

Both forms are generated from the same field table; a property test
(tests/test_selector.py) holds them, and the revocation cache's shares
(``_revocation_cache``), to the same answer on every backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from memwarden.events import RecordedEvent


@dataclass(frozen=True, slots=True)
class Revocation:
    """A revocation as saves and folds check against it
    (``ViewReader.revocations``): its selector parsed."""

    revocation_id: str
    selector: dict[str, Any]
    effective_at: str
    seq: int

    @classmethod
    def issued(cls, event: RecordedEvent) -> Revocation:
        """A ``revocation.issued`` event's."""
        p = event.payload
        return cls(p["revocation_id"], p["selector"], p["effective_at"], event.seq)


class Columns(Protocol):
    """A memory row read by attribute (``MemoryRow``)."""

    @property
    def memory_id(self) -> str: ...
    @property
    def fetched_at(self) -> str: ...


# a memory row: the fold's dict, or a row read by attribute
Row = Mapping[str, Any] | Columns


def _column(row: Row, column: str) -> Any:
    return row.get(column) if isinstance(row, Mapping) else getattr(row, column)


# selector field -> memories column (equality match)
EQUALITY = {
    "tenant": "tenant",
    "project": "project",
    "permission": "permission",
    "user": "user",
    "agent": "agent",
    "tool": "tool",
    "kind": "kind",
}


def selector_covers(selector: dict[str, Any], row: Row) -> bool:
    """Does ``selector`` (a Selector dump) cover memory ``row``?"""
    if selector.get("everything"):
        return True
    named = False  # an empty selector covers nothing (and is refused upstream)
    for field, column in EQUALITY.items():
        want = selector.get(field)
        if want is not None:
            named = True
            if _column(row, column) != want:
                return False
    prefix = selector.get("source_prefix")
    if prefix is not None:
        named = True
        if not (_column(row, "source_url") or "").startswith(prefix):
            return False
    ids = selector.get("ids") or ()
    if ids:
        named = True
        if _column(row, "memory_id") not in ids:
            return False
    return named


def revocation_blocks(effective_at: str, fetched_at: str) -> bool:
    """Whether a revocation blocks a version recorded after it: every fetch
    made up to and including its effective time is covered; only a fetch
    strictly after it escapes."""
    return fetched_at <= effective_at


def revokes(revocation: Revocation, row: Row, *, recorded_before: bool) -> bool:
    """The one rule of revocation coverage: ``revocation`` takes out the
    memory version ``row`` when its selector covers the row and the version
    was recorded before it (by seq, whatever its ``fetched_at`` claims), or
    was recorded after it from a fetch made at or before its effective time
    (no resurrection). Saving, importing, folding, reading back and serving
    history all ask this one question."""
    if not selector_covers(revocation.selector, row):
        return False
    return recorded_before or revocation_blocks(revocation.effective_at, _column(row, "fetched_at"))


def could_cover(selector: Mapping[str, Any], tenant: str) -> bool:
    """Whether a revocation's ``selector`` may cover any memory of ``tenant``
    at all (one naming another tenant never does): folds and saves skip the others."""
    named = selector.get("tenant")
    return named is None or named == tenant


def blocking_revocation(
    revocations: Sequence[Revocation], row: Row, recorded_seq: int | None = None
) -> Revocation | None:
    """The first of ``revocations`` that takes out ``row``, a version
    recorded at ``recorded_seq`` (None: being recorded now, after them all)."""
    return next(
        (r for r in revocations if revokes(r, row, recorded_before=recorded_seq is not None and recorded_seq < r.seq)),
        None,
    )


# ``revokes`` over the memories table, for a revocation already folded
# (parameters: its id, its seq, its effective time): the rows it took out,
# and those it covers that a read must never serve (recorded before it, or
# fetched before its effective time), whatever their status now
COVERED_SQL = "(revoked_by = ? OR last_seq < ? OR fetched_at <= ?)"


def selector_sql(selector: dict[str, Any]) -> tuple[str, list[Any]]:
    """A WHERE clause over ``memories`` equivalent to ``selector_covers``."""
    if selector.get("everything"):
        return "TRUE", []
    clauses: list[str] = []
    params: list[Any] = []
    for field, column in EQUALITY.items():
        want = selector.get(field)
        if want is not None:
            clauses.append(f'"{column}" = ?')
            params.append(want)
    prefix = selector.get("source_prefix")
    if prefix is not None:
        clauses.append("substr(source_url, 1, ?) = ?")
        params.extend([len(prefix), prefix])
    ids = list(selector.get("ids") or ())
    if ids:
        clauses.append(f"memory_id IN ({','.join('?' * len(ids))})")
        params.extend(ids)
    return " AND ".join(clauses) or "FALSE", params
