"""The usability gate: the one place that decides whether a memory may be used."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
}
REASONS = tuple(ACTIONS)


@dataclass(frozen=True, slots=True)
class Decision:
    usable: bool
    reason: str | None = None
    action: str = "none"
    detail: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"usable": self.usable, "reason": self.reason, "action": self.action, "detail": self.detail}


USABLE = Decision(True)


def _no(reason: str, detail: str | None = None) -> Decision:
    return Decision(False, reason, ACTIONS[reason], detail)


def decide(row: dict[str, Any], *, now: str, policy_version: int, content_ok: bool | None = None) -> Decision:
    """Usable iff the projection holds it usable, it is checked under the
    current version of its policy, ``now < expires_at``, and (when the
    content was read) its bytes hash to its checksum.

    ``now`` is canonical timestamp text. Expiry is judged here, at read
    time, so it holds whether or not a scheduler has written the expiry.
    A revocation is in the row's status from the moment it commits (the
    projection applies it in the same transaction).
    """
    status = row["status"]
    if status == "erased":
        return _no("erased")
    if status == "revoked":
        return _no("revoked", f"revoked by {row.get('revoked_by')}")
    if status == "quarantined" or content_ok is False:
        return _no("integrity_failed", "the stored text does not match its checksum")
    if status == "invalidated":
        why = row.get("invalidation_reason") or "invalidated"
        return _no(why, None) if why in ACTIONS else _no("invalidated", why)
    if status == "unknown":
        return _no("unknown", "the last re-verification against the source failed")
    if row["revocation_version"] != policy_version:
        return _no(
            "policy_changed",
            f"checked under {row['policy']} version {row['revocation_version']}, current is {policy_version}",
        )
    expires_at = row.get("expires_at")
    if status == "expired" or (expires_at is not None and now >= expires_at):
        return _no("expired", f"expired at {expires_at}")
    return USABLE
