"""The read port's questions and answers, by name: frozen dataclasses.

A question that used to be several methods of ``ViewReader`` (a policy's
current version, its seq, whether a version was retired...) is one method
taking one of these queries and answering with one of these rows, so the
port stays a short list and each answer names its fields.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ._access import Access
from ._rows import Key, MemoryRow

# -- policies -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PolicyRow:
    """A policy as the view holds it (``ViewReader.policy``); with ``version``
    asked about, what the view says of that version too."""

    policy: str
    current: str | None  # its current version key; None if it was never set
    seq: int | None  # the seq that made ``current`` current
    highest_numbered: int | None  # the highest numbered version it was ever at
    version: str | None = None  # the version asked about
    retired_seq: int | None = None  # the seq that retired ``version``; None if it never was
    problem: str | None = None  # why ``version`` may not be made current now; None: it may


# -- the tables beside the view -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyRow:
    """An API key (``ViewReader.keys``): its hash only when asked for by id."""

    key_id: str
    role: str
    tenants: tuple[str, ...]
    agent: str | None
    created_at: str
    revoked_at: str | None
    key_hash: str | None = None


@dataclass(frozen=True, slots=True)
class Backoff:
    """A source that failed lately (``ViewReader.side().backoff``)."""

    failures: int  # in a row
    until: float  # the time before which not to try it again


@dataclass(frozen=True, slots=True)
class WeekRow:
    """The counters of one ISO week (``ViewReader.weekly``): each of ``COUNTERS``."""

    week: str
    counts: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return {"week": self.week, **self.counts}


# -- revocations ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RevocationQuery:
    """Which revocations to read (``ViewReader.revocation_records``):
    ``revocation_id`` one by id; ``unconfirmed`` those with no read-back
    yet or a failed one, oldest first; otherwise a page, newest first."""

    revocation_id: str | None = None
    unconfirmed: bool = False
    limit: int | None = None
    offset: int = 0


@dataclass(frozen=True, slots=True)
class RevocationRow:
    """A revocation as the view holds it (selector and leaked ids as JSON text)."""

    revocation_id: str
    seq: int
    selector: str
    reason: str | None
    issued_by: str | None
    effective_at: str
    recorded_at: str | None
    covered: int | None
    readback_status: str | None
    readback_seq: int | None
    readback_latency_ms: float | None
    still_visible: int | None
    leaked_ids: str | None

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


# -- which memories a selector, a revocation or a policy version covers -----------------------


@dataclass(frozen=True, slots=True)
class Selected:
    """What a revocation of ``selector`` issued now would take out."""

    selector: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RevokedBy:
    """What the revocation ``revocation_id`` (recorded at ``seq``) covers."""

    revocation_id: str
    seq: int
    effective_at: str
    selector: dict[str, Any]


@dataclass(frozen=True, slots=True)
class TakenAt:
    """What the revocation at ``seq`` took out and nothing changed since;
    ``evidence``: only what some memory was drawn from; ``tenant``: only its."""

    revocation_id: str
    seq: int
    selector: dict[str, Any]
    tenant: str | None = None
    evidence: bool = False


@dataclass(frozen=True, slots=True)
class CheckedUnder:
    """The memories checked under ``version`` of ``policy``, not out for good:
    what a change away from it retires."""

    policy: str
    version: str


Covering = Selected | RevokedBy | TakenAt | CheckedUnder


@dataclass(frozen=True, slots=True)
class CoveredRow:
    """A memory a ``Covering`` question covers (``ViewReader.covered``)."""

    tenant: str
    memory_id: str
    kind: str

    @property
    def key(self) -> Key:
        return (self.tenant, self.memory_id)


# -- the derivation graph ---------------------------------------------------------------------

Walk = Literal["up", "down", "children", "drawn"]


@dataclass(frozen=True, slots=True)
class LineageQuery:
    """A walk of the derivation graph from ``keys`` (``ViewReader.lineage``):

    * ``up``: every memory they were drawn from, at any depth; with
      ``limit``, each with its ``level`` (2: a direct parent), walked no
      deeper than ``limit`` + 1 levels;
    * ``down``: every memory drawn from them, at any depth;
    * ``children``: those drawn directly from them that are still in the
      read paths, with their current version;
    * ``drawn``: those drawn directly from them, whatever their status.
    """

    walk: Walk
    keys: tuple[Key, ...]
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class Kin:
    """A memory a walk found: ``parent_id`` (children, drawn) the one of the
    walk's keys it was drawn from; ``version`` (children) its current
    version; ``level`` (up, with a limit) how deep under the keys it lies."""

    tenant: str
    memory_id: str
    parent_id: str | None = None
    version: int | None = None
    level: int | None = None

    @property
    def key(self) -> Key:
        return (self.tenant, self.memory_id)


def depth_of(found: list[Kin]) -> int:
    """How many levels of evidence lie under a walk's keys (1: drawn from nothing)."""
    return max((k.level or 1 for k in found), default=1)


# -- the texts ----------------------------------------------------------------------------

# (tenant, memory_id, version): one version of a memory
Version = tuple[str, str, int]


@dataclass(frozen=True, slots=True)
class TextRow:
    """A version's texts (``ViewReader.texts``), with its memory's current
    checksum (what the current version's content must hash to)."""

    tenant: str
    memory_id: str
    version: int
    checksum: str
    summary: str | None
    content: bytes | None

    @classmethod
    def of(cls, tenant: str, memory_id: str, version: int, checksum: str, summary: str | None, content: Any) -> TextRow:
        """From a statement's row: the content as bytes (PostgreSQL's bytea is a memoryview)."""
        return cls(tenant, memory_id, int(version), checksum, summary, None if content is None else bytes(content))

    @property
    def key(self) -> Key:
        return (self.tenant, self.memory_id)


# -- one memory's row ------------------------------------------------------------------------


class RowsReader(Protocol):
    def rows(self, access: Access, keys: Sequence[Key]) -> Mapping[Key, MemoryRow]: ...


def row_of(view: RowsReader, access: Access, tenant: str, memory_id: str) -> MemoryRow | None:
    """The row of one memory that ``access`` allows (``ViewReader.rows`` of one key); None otherwise."""
    return view.rows(access, [(tenant, memory_id)]).get((tenant, memory_id))
