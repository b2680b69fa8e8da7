"""The Warden: memwarden's Python API. Every face (CLI, HTTP, MCP) speaks to it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from memwarden.projections import CheckResult, weekly

from . import _history, _verify
from ._cache import Caching
from ._gate import Decision, decide
from ._revoking import Revoking
from ._views import DueItem, ImportResult, VerifyResult


class Warden(Caching, Revoking):
    """Decides whether a remembered fact may be used now.

    Open one per process (or per thread); it owns a connection to the
    database at ``path``. Writes are serialised across processes by
    SQLite's write lock; reads see committed state. Its parts live in
    their own modules: saving, reading, revoking, the cache; verification
    and history delegate to theirs.
    """

    # -- reporting ----------------------------------------------------------------------

    def stats(self) -> list[dict[str, Any]]:
        with self.reading() as conn:
            return weekly(conn)

    def tail(self, n: int = 20) -> list[dict[str, Any]]:
        return [e.envelope() for e in self.log.tail(n)]

    def decide_row(self, row: dict[str, Any], *, now: str, policy_version: int) -> Decision:
        return decide(row, now=now, policy_version=policy_version)

    # -- verification, history and audit (their own modules) ---------------------------

    def verify(self, memory_id: str, *, accept: bool = False) -> VerifyResult:
        return _verify.verify(self, memory_id, accept=accept)

    def verify_due(self, *, accept: bool = False, limit: int | None = None) -> list[VerifyResult]:
        return _verify.verify_due(self, accept=accept, limit=limit)

    def due(self, *, limit: int | None = None) -> list[DueItem]:
        return _verify.due(self, limit=limit)

    def import_records(self, path: str | Path) -> ImportResult:
        return _verify.import_records(self, path)

    def explain(self, memory_id: str, *, as_of: str | None = None) -> dict[str, Any]:
        return _history.explain(self, memory_id, as_of=as_of)

    def replay(
        self,
        *,
        as_of: str | None = None,
        seq: int | None = None,
        tenant: str | None = None,
        include_unusable: bool = False,
    ) -> dict[str, Any]:
        return _history.replay(self, as_of=as_of, seq=seq, tenant=tenant, include_unusable=include_unusable)

    def rebuild(self, *, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
        return _history.rebuild(self, progress=progress)

    def check_projections(self) -> CheckResult:
        return _history.check_projections(self)

    def audit_verify(self, against: str | None = None) -> dict[str, Any]:
        return _history.audit_verify(self, against)

    def audit_head(self) -> dict[str, Any]:
        return _history.audit_head(self)

    def export(self, path: str | Path) -> int:
        return _history.export_log(self, path)

    def import_log(self, path: str | Path) -> int:
        return _history.import_log(self, path)
