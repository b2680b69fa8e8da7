"""What the engine answers with: plain frozen records that print as JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from ._gate import Decision

SCOPE_FIELDS = ("tenant", "project", "permission", "user", "agent", "tool")


class MemoryView(NamedTuple):
    """One memory as an agent sees it, with the gate's answer.

    A named tuple rather than a frozen dataclass: a query builds a hundred
    of these per call, and a tuple is made in a fifth of the time.
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
    checksum: str
    content: str | None
    scope: dict[str, str | None]
    source_url: str
    fetched_at: str
    expires_at: str | None
    verified_at: str | None
    policy: str
    revocation_version: int
    derived_from: list[dict[str, Any]]
    last_seq: int

    @classmethod
    def of(cls, row: dict[str, Any], decision: Decision, content: str | None) -> MemoryView:
        return cls(
            row["memory_id"],
            row["version"],
            row["status"],
            decision.usable,
            decision.reason,
            decision.action,
            decision.detail,
            row["kind"],
            row["summary"],
            row["checksum"],
            content if decision.usable else None,
            {k: row[k] for k in SCOPE_FIELDS},
            row["source_url"],
            row["fetched_at"],
            row["expires_at"],
            row["verified_at"],
            row["policy"],
            row["revocation_version"],
            json.loads(row["derived_from"]) if row["derived_from"] not in (None, "[]") else [],
            row["last_seq"],
        )

    def as_dict(self) -> dict[str, Any]:
        return self._asdict()


@dataclass(frozen=True)
class SaveResult:
    memory_id: str
    version: int
    checksum: str
    seq: int
    expires_at: str | None

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
class VerifyResult:
    memory_id: str
    outcome: str  # verified | changed | updated | failed | revoked | erased | skipped
    detail: str | None = None
    seq: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class DueItem(NamedTuple):
    """One memory to re-verify and why (a tuple: ``due`` lists thousands)."""

    memory_id: str
    source_url: str
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return self._asdict()


@dataclass(frozen=True)
class ImportResult:
    imported: int
    refused: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
