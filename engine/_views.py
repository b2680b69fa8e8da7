"""What the engine answers with: plain frozen records that print as JSON."""

from __future__ import annotations

import operator
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from memwarden.events import version_value
from memwarden.projections import VIEW_COLUMNS, MemoryRow, ViewRow, parent_refs

from ._gate import Decision

# a whole row's ``VIEW_COLUMNS``, in order
_view_values = operator.attrgetter(*VIEW_COLUMNS)


class MemoryView(NamedTuple):
    """One memory as an agent sees it, with the gate's answer.

    A named tuple rather than a frozen dataclass: a query builds a hundred
    of these per call, and a tuple is made much faster.
    """

    memory_id: str
    version: int
    status: str
    usable: bool
    reason: str | None
    action: str
    detail: str | None
    kind: str
    summary: str | None
    checksum: str | None  # withheld once the text is erased: a short text is found again from its hash
    content: str | None
    scope: dict[str, str | None]
    source_url: str
    fetched_at: str
    expires_at: str | None
    verified_at: str | None
    policy: str
    revocation_version: int | str
    derived_from: list[dict[str, Any]]
    last_seq: int | None  # None for a caller given tokens (``_tokens``): a log position counts every tenant's writes

    @classmethod
    def of(cls, row: MemoryRow, decision: Decision, content: str | None, summary: str | None) -> MemoryView:
        """From a whole row (every column), as ``of_values``."""
        return cls.of_values(ViewRow._make((*_view_values(row), summary, None)), decision, content, summary)

    @classmethod
    def of_values(cls, v: ViewRow, decision: Decision, content: str | None, summary: str | None) -> MemoryView:
        """From a row the store selected as ``VIEW_COLUMNS`` (no dict in
        between, and ``_make`` rather than the generated ``__new__``: a
        query makes a hundred of these per call)."""
        return cls._make(
            (
                v.memory_id,
                v.version,
                v.status,
                decision.usable,
                decision.reason,
                decision.action,
                decision.detail,
                v.kind,
                summary,
                None if v.status == "erased" else v.checksum,
                content if decision.usable else None,
                {
                    "tenant": v.tenant,
                    "project": v.project,
                    "permission": v.permission,
                    "user": v.user,
                    "agent": v.agent,
                    "tool": v.tool,
                },
                v.source_url,
                v.fetched_at,
                v.expires_at,
                v.verified_at,
                v.policy,
                version_value(v.revocation_version),
                parent_refs(v.memory_id, v.derived_from),
                v.last_seq,
            )
        )

    def as_dict(self) -> dict[str, Any]:
        return self._asdict()


@dataclass(frozen=True)
class SaveResult:
    memory_id: str
    version: int
    checksum: str
    seq: int | str  # a token (str) for a caller that may not read the log (``_tokens``)
    expires_at: str | None
    tenant: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RevocationResult:
    revocation_id: str
    seq: int
    covered: int  # taken out directly
    effective_at: str
    cascaded: int = 0  # memories drawn from those, invalidated with them

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ErasureResult:
    """What a deletion request did: how many memories' texts were
    destroyed, and whether their bytes also left the store's files (False:
    a transaction older than the erasure could still see them; the
    scheduler finishes it once that ends)."""

    erased: int
    cleared: bool = True

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class VerifyResult:
    memory_id: str
    outcome: str  # verified | changed | updated | failed | revoked | erased | skipped
    detail: str | None = None
    seq: int | str | None = None  # a token (str) for a caller that may not read the log
    tenant: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class DueItem(NamedTuple):
    """One memory to re-verify and why (a tuple: ``due`` lists thousands)."""

    memory_id: str
    source_url: str
    reason: str
    tenant: str

    def as_dict(self) -> dict[str, Any]:
        return self._asdict()


@dataclass(frozen=True)
class ImportResult:
    imported: int
    refused: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Found(NamedTuple):
    """One answer of a search: the memory as the gate judged it, its fused
    score, which halves found it, and each half's own measure."""

    view: MemoryView
    score: float
    found_by: tuple[str, ...]
    similarity: float | None  # the cosine with the query (the vector half)
    text_rank: int | None  # its place in the full-text answer, from 1

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.view.as_dict(),
            "score": round(self.score, 6),
            "found_by": list(self.found_by),
            "similarity": None if self.similarity is None else round(self.similarity, 6),
            "text_rank": self.text_rank,
        }
