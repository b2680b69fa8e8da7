"""The Warden: memwarden's Python API. Every face (CLI, HTTP, MCP) speaks to it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from memwarden.projections import CheckResult, weekly

from . import _history, _memory_api, _records, _verify
from ._access import EVERYONE, Access
from ._cache import Caching
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

    def head_seq(self) -> int:
        """The seq of the last event in the log (0 for an empty log)."""
        return self.log.head().seq

    def events_after(self, after: int, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` events after seq ``after``, as envelopes (the feed
        downstream caches follow)."""
        return [e.envelope() for e in self.log.read(after_seq=after, until_seq=after + limit)]

    # -- verification, history and audit (their own modules) ---------------------------

    def verify(
        self, memory_id: str, *, tenant: str | None = None, access: Access = EVERYONE, accept: bool = False
    ) -> VerifyResult:
        return _verify.verify(self, memory_id, tenant=tenant, access=access, accept=accept)

    def verify_due(
        self, *, accept: bool = False, limit: int | None = None, access: Access = EVERYONE
    ) -> list[VerifyResult]:
        return _verify.verify_due(self, accept=accept, limit=limit, access=access)

    def due(self, *, limit: int | None = None, access: Access = EVERYONE) -> list[DueItem]:
        return _verify.due(self, limit=limit, access=access)

    def import_records(self, path: str | Path) -> ImportResult:
        return _records.import_records(self, path)

    def scan_records(self, path: str | Path) -> list[DueItem]:
        """What the article's scan prints for a file of records (nothing is written)."""
        return _records.scan_records(path, self.clock.now())

    def explain(
        self, memory_id: str, *, tenant: str | None = None, access: Access = EVERYONE, as_of: str | None = None
    ) -> dict[str, Any]:
        return _history.explain(self, memory_id, tenant=tenant, access=access, as_of=as_of)

    # -- the Memory API pair -------------------------------------------------------------

    def memory_save(
        self, *, tenant: str, agent: str, key: str, content: str, access: Access = EVERYONE
    ) -> dict[str, Any]:
        """``/memory/save``: the memory (tenant, agent, key), a new version each time."""
        return _memory_api.save(self, tenant=tenant, agent=agent, key=key, content=content, access=access)

    def memory_load(
        self, *, tenant: str, agent: str, history: bool = False, access: Access = EVERYONE
    ) -> dict[str, Any]:
        """``/memory/load``: every key of an agent; texts only while they may be used."""
        return _memory_api.load(self, tenant=tenant, agent=agent, history=history, access=access)

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
