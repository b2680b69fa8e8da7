"""The usability gate: the one place that decides whether a memory may be used."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

# reason -> what the agent should do about it
ACTIONS = {
    "expired": "reverify",
    "policy_changed": "reverify",
    "source_changed": "reverify",
    "invalidated": "reverify",
    "unknown": "treat_as_unknown",
    "revoked": "treat_as_unknown",
    "integrity_failed": "treat_as_unknown",
    "erased": "none",
    "not_found": "none",
    "derived_from_unusable": "treat_as_unknown",
    "expired_evidence": "reverify",
}
REASONS = tuple(ACTIONS)
# the gate's answers in this process, by reason: plain counts under a lock
# (what a Prometheus counter's ``inc`` takes too), which ``_metric_families``
# serves as memwarden_gate_decisions_total when /metrics is asked; every
# read counts, and a command line that reads need not import prometheus_client
_DECISIONS: Counter[str] = Counter()
_COUNTING = threading.Lock()


def decisions() -> dict[str, int]:
    """The gate's answers so far in this process, by reason (usable: allowed)."""
    with _COUNTING:
        return dict(_DECISIONS)


@dataclass(frozen=True, slots=True)
class Decision:
    usable: bool
    reason: str | None = None
    action: str = "none"
    detail: str | None = None
    parent: str | None = None  # the evidence the detail names, if it names one

    def as_dict(self) -> dict[str, Any]:
        return {"usable": self.usable, "reason": self.reason, "action": self.action, "detail": self.detail}


USABLE = Decision(True)


class ParentState(NamedTuple):
    """A memory's evidence as the gate sees it."""

    memory_id: str
    wanted: int  # the version the memory was drawn from
    current: int | None  # the parent's version now (None: it does not exist)
    decision: Decision | None  # the gate's answer for the parent
    agent: str | None = None  # the parent's agent: who may be told its state (``_rights.told_of``)


class GateRow(Protocol):
    """What the gate reads of a memory's row: ``MemoryRow`` (every column)
    and ``ViewRow`` (as the agent query selects it) both are one."""

    @property
    def status(self) -> str: ...
    @property
    def revoked_by(self) -> str | None: ...
    @property
    def invalidation_reason(self) -> str | None: ...
    @property
    def policy(self) -> str: ...
    @property
    def revocation_version(self) -> int | str: ...
    @property
    def expires_at(self) -> str | None: ...


def _no(reason: str, detail: str | None = None, parent: str | None = None) -> Decision:
    return Decision(False, reason, ACTIONS[reason], detail, parent)


def decide(
    row: GateRow,
    *,
    now: str,
    policy_version: int | str,
    content_ok: bool | None = None,
    parents: Sequence[ParentState] = (),
) -> Decision:
    """The gate's answer (``_decide``), counted by reason for ``/metrics``."""
    decision = _decide(row, now=now, policy_version=policy_version, content_ok=content_ok, parents=parents)
    reason = decision.reason or "usable"
    with _COUNTING:
        _DECISIONS[reason] += 1
    return decision


def _decide(
    row: GateRow,
    *,
    now: str,
    policy_version: int | str,
    content_ok: bool | None,
    parents: Sequence[ParentState],
) -> Decision:
    """Usable iff the projection holds it usable, it is checked under the
    current version of its policy, ``now < expires_at``, (when the content
    was read) its bytes hash to its checksum, and every memory it was
    derived from is itself usable at the version it was drawn from: a
    summary never outlives its evidence.

    ``now`` is canonical timestamp text. Expiry is judged here, at read
    time, so it holds whether or not a scheduler has written the expiry.
    A revocation is in the row's status from the moment it commits (the
    projection applies it in the same transaction).
    """
    status = row.status
    if status == "erased":
        return _no("erased")
    if status == "revoked":
        return _no("revoked", f"revoked by {row.revoked_by}")
    if status == "quarantined" or content_ok is False:
        return _no("integrity_failed", "the stored text does not match its checksum")
    evidence = _evidence(parents) if parents else None
    if status == "invalidated":
        why = row.invalidation_reason or "invalidated"
        if why == "derived_from_unusable":
            if evidence is not None:
                return _no(why, evidence.detail, evidence.parent)
            return _no(why, "evidence was taken away (see explain)")
        return _no(why, None) if why in ACTIONS else _no("invalidated", why)
    if status == "unknown":
        return _no("unknown", "the last re-verification against the source failed")
    # version keys compare as text: 7 and "7" are one version
    if str(row.revocation_version) != str(policy_version):
        return _no(
            "policy_changed",
            f"checked under {row.policy} version {row.revocation_version}, current is {policy_version}",
        )
    if evidence is not None:
        return evidence
    expires_at = row.expires_at
    if status == "expired" or (expires_at is not None and now >= expires_at):
        return _no("expired", f"expired at {expires_at}")
    return USABLE


def _evidence(parents: Sequence[ParentState]) -> Decision | None:
    """Why the evidence does not hold, naming the first parent at fault; a
    parent that merely expired makes the memory wait (``expired_evidence``)."""
    waiting: Decision | None = None
    for p in parents:
        if p.current is None or p.decision is None:
            return _no("derived_from_unusable", f"parent {p.memory_id} does not exist", p.memory_id)
        if p.current != p.wanted:
            return _no(
                "derived_from_unusable",
                f"parent {p.memory_id} is at version {p.current}, this was drawn from version {p.wanted}",
                p.memory_id,
            )
        if not p.decision.usable:
            if p.decision.reason in ("expired", "expired_evidence"):
                waiting = waiting or _no("expired_evidence", f"parent {p.memory_id}: {p.decision.reason}", p.memory_id)
            else:
                return _no("derived_from_unusable", f"parent {p.memory_id}: {p.decision.reason}", p.memory_id)
    return waiting
