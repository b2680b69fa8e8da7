"""The Warden's operations for staff: what security staff do (revocation,
policy versions, erasure), the copies outside memwarden (``sinks``), and
what operators and auditors do with the store as a whole (its past, the
view's repair, the hash chain, its copies). A part of ``Warden``, which
adds what agents ask for; each method passes on to its module, imported
when first called (see ``_warden``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._core import Core

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from datetime import datetime
    from pathlib import Path

    from memwarden.events import Selector
    from memwarden.projections import CheckResult

    from ._rights import Principal
    from ._views import ErasureResult, RevocationResult


class StaffOperations(Core):
    """What security staff, operators and auditors ask of the Warden."""

    # -- what security staff do: revocation, policy versions, erasure ------------------

    def revoke(
        self,
        selector: Selector | dict[str, Any],
        *,
        reason: str,
        by: str | None = None,
        effective_at: datetime | str | None = None,
        caller: Principal,
    ) -> RevocationResult:
        """Take everything ``selector`` covers out of every read path, at commit."""
        from ._revoking import revoke

        return revoke(self, selector, reason=reason, by=by, effective_at=effective_at, caller=caller)

    def revocation(self, revocation_id: str, *, caller: Principal) -> dict[str, Any]:
        """One revocation with its read-back state."""
        from ._revoking import revocation

        return revocation(self, revocation_id, caller=caller)

    def revocations(self, *, limit: int = 100, offset: int = 0, caller: Principal) -> list[dict[str, Any]]:
        """Revocations, newest first, with their read-back state."""
        from ._revoking import revocations

        return revocations(self, limit=limit, offset=offset, caller=caller)

    def preview_revocation(
        self, selector: Selector | dict[str, Any], *, effective_at: datetime | str | None = None, caller: Principal
    ) -> dict[str, Any]:
        """A dry run of ``revoke``: how many memories, in which tenants, it would take out."""
        from ._revoking import preview_revocation

        return preview_revocation(self, selector, effective_at=effective_at, caller=caller)

    def set_policy(self, policy: str, version: int | str, *, actor: str | None = None, caller: Principal) -> int:
        """Make ``version`` of ``policy`` current and retire the version before it; the event's seq."""
        from ._policy_change import set_policy

        return set_policy(self, policy, version, actor=actor, caller=caller)

    def change_policy(
        self, policy: str, version: int | str, *, actor: str | None = None, caller: Principal
    ) -> dict[str, Any]:
        """Make ``version`` current (``set_policy``) and say how many memories it retired."""
        from ._policy_change import change_policy

        return change_policy(self, policy, version, actor=actor, caller=caller)

    def preview_policy(self, policy: str, version: int | str, *, caller: Principal) -> dict[str, Any]:
        """A dry run of ``change_policy``: how many memories, in which tenants, it would retire."""
        from ._policy_change import preview_policy

        return preview_policy(self, policy, version, caller=caller)

    def policies(self, *, caller: Principal) -> dict[str, int | str]:
        """Each policy's current version."""
        from ._policy_change import policies

        return policies(self, caller=caller)

    def erase(
        self,
        *,
        memory_id: str | None = None,
        user: str | None = None,
        tenant: str | None = None,
        reason: str,
        actor: str | None = None,
        caller: Principal,
    ) -> ErasureResult:
        """Destroy the texts of a memory, or of all of a user's memories."""
        from ._revoking import erase

        return erase(self, memory_id=memory_id, user=user, tenant=tenant, reason=reason, actor=actor, caller=caller)

    # -- the copies outside memwarden (``sinks``): the outbox, each sink's read-back ------

    def sinks_status(self, *, caller: Principal) -> list[dict[str, Any]]:
        """Every configured sink, what it receives, and how its line stands."""
        from .sinks._ops import sinks

        return sinks(self, caller=caller)

    def test_sink(self, name: str, *, caller: Principal) -> dict[str, Any]:
        """Whether sink ``name`` answers now."""
        from .sinks._ops import test_sink

        return test_sink(self, name, caller=caller)

    def redeliver(self, notice_id: str, *, sink: str | None = None, caller: Principal) -> dict[str, Any]:
        """Put notice ``notice_id`` back in its sink's line, from its first attempt."""
        from .sinks._ops import redeliver

        return redeliver(self, notice_id, sink=sink, caller=caller)

    def sink_notices(
        self, *, sink: str | None = None, state: str | None = None, limit: int = 100, caller: Principal
    ) -> list[dict[str, Any]]:
        """Notices newest first (dead letters with ``state="dead"``)."""
        from .sinks._ops import sink_notices

        return sink_notices(self, sink=sink, state=state, limit=limit, caller=caller)

    def sink_readbacks(self, revocation_id: str, *, caller: Principal) -> list[dict[str, Any]]:
        """Each sink's read-back of a revocation, as it stands."""
        from .sinks._ops import sink_readbacks

        return sink_readbacks(self, revocation_id, caller=caller)

    def settle_sinks(self, revocation_id: str, *, wait: float = 0.0, caller: Principal) -> list[dict[str, Any]]:
        """Deliver and read back a revocation's sinks now, for up to ``wait`` seconds."""
        from .sinks._ops import settle_sinks

        return settle_sinks(self, revocation_id, wait=wait, caller=caller)

    def sink_leaks(self, *, caller: Principal) -> int:
        """Read-backs that found a sink still holding covered ids (and still do)."""
        from .sinks._ops import sink_leaks

        return sink_leaks(self, caller=caller)

    def fill_cache(self, name: str, *, tenant: str, limit: int = 10_000, caller: Principal) -> dict[str, Any]:
        """Put ``tenant``'s usable memories into Redis sink ``name``, each expiring no later than it may be used."""
        from .sinks._ops import fill_cache

        return fill_cache(self, name, tenant=tenant, limit=limit, caller=caller)

    def sink_ack(self, name: str, body: bytes, headers: Mapping[str, str], *, caller: Principal) -> dict[str, Any]:
        """Accept sink ``name``'s signed acknowledgement of a notice."""
        from .sinks._acks import sink_ack

        return sink_ack(self, name, body, headers, caller=caller)

    # -- for auditors and operators: the past, the view's repair, the chain, copies --------

    def explain(
        self, memory_id: str, *, tenant: str | None = None, caller: Principal, as_of: str | None = None
    ) -> dict[str, Any]:
        """The memory's history, the status after each step, and the gate's answer at ``as_of``."""
        from ._past import explain

        return explain(self, memory_id, tenant=tenant, caller=caller, as_of=as_of)

    def replay(
        self,
        *,
        caller: Principal,
        as_of: str | None = None,
        seq: int | None = None,
        tenant: str | None = None,
        include_unusable: bool = False,
        after: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """The view as of a past point (one page of it with ``limit``)."""
        from ._past import replay

        return replay(
            self,
            caller=caller,
            as_of=as_of,
            seq=seq,
            tenant=tenant,
            include_unusable=include_unusable,
            after=after,
            limit=limit,
        )

    def replay_stream(
        self,
        *,
        caller: Principal,
        as_of: str | None = None,
        seq: int | None = None,
        tenant: str | None = None,
        include_unusable: bool = False,
    ) -> Iterator[str]:
        """``replay``'s whole answer as canonical JSON text, a memory at a time."""
        from ._past import replay_stream

        return replay_stream(
            self, caller=caller, as_of=as_of, seq=seq, tenant=tenant, include_unusable=include_unusable
        )

    def check_as_of(self, *, as_of: str | None = None, seq: int | None = None, caller: Principal) -> CheckResult:
        """The view as of a past point as the indexes answer it, against a full replay of the log."""
        from ._past import check_as_of

        return check_as_of(self, as_of=as_of, seq=seq, caller=caller)

    def rebuild(self, *, caller: Principal, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
        """Rebuild the view from the log."""
        from ._history import rebuild

        return rebuild(self, caller=caller, progress=progress)

    def check_projections(self, *, caller: Principal) -> CheckResult:
        """Rebuild from the log apart from the live view and compare the two."""
        from ._history import check_projections

        return check_projections(self, caller=caller)

    def audit_verify(
        self, against: str | None = None, *, caller: Principal, progress: Callable[[int], None] | None = None
    ) -> dict[str, Any]:
        """Check the whole hash chain (and, with ``against``, that it extends a head kept earlier)."""
        from ._history import audit_verify

        return audit_verify(self, against, caller=caller, progress=progress)

    def audit_head(self, *, caller: Principal) -> dict[str, Any]:
        """The log's head: its seq and hash, to keep elsewhere."""
        from ._history import audit_head

        return audit_head(self, caller=caller)

    def export(self, path: str | Path, *, caller: Principal, progress: Callable[[int], None] | None = None) -> int:
        """The log and every text not erased, in one file: a backup that ``import_log`` verifies."""
        from ._history import export_log

        return export_log(self, path, caller=caller, progress=progress)

    def import_log(
        self,
        path: str | Path,
        *,
        caller: Principal,
        against: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Verify a file's events and chain, then append those this log lacks."""
        from ._history import import_log

        return import_log(self, path, caller=caller, against=against, progress=progress)

    def migrate(self, to: str, *, caller: Principal) -> dict[str, Any]:
        """Copy this store (log, texts, keys, secrets) into the empty store ``to`` names, and check it."""
        from ._migrate import migrate

        return migrate(self, to, caller=caller)

    def backup(self, path: str | Path, *, caller: Principal) -> dict[str, Any]:
        """Copy the SQLite store to ``path`` (a new file) while it is in use."""
        from ._backup import backup

        return backup(self, path, caller=caller)

    def reapply(self, replaced: str, *, caller: Principal) -> dict[str, Any]:
        """Carry into this store what the store ``replaced`` names took out (a restore not made here)."""
        from ._restore import reapply

        return reapply(self, replaced, caller=caller)

    def reapply_erasures(self, replaced: str, *, caller: Principal) -> dict[str, Any]:
        """``reapply``'s name when it carried erasures alone."""
        from ._restore import reapply

        return reapply(self, replaced, caller=caller)
