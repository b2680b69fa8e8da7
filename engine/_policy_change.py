"""Policy versions changed like revocations: a dry run that says what a
change would retire (per tenant, the Memory API entries among them), the
change itself answering how many it retired, and naming the version already
current as a no-op, so a script that states the desired version may run
again."""

from __future__ import annotations

from typing import Any

from memwarden.events import version_key, version_value
from memwarden.projections import CheckedUnder, ViewReader

from ._core import Core, log
from ._errors import InvalidInput
from ._rights import Principal, operation
from ._versions import change, parse_version, version_of


def _policy_name(policy: Any) -> str:
    if not isinstance(policy, str) or not policy or any(c.isspace() or ord(c) < 32 for c in policy):
        raise InvalidInput("policy", "must be a non-empty name without spaces or control characters")
    return policy


def _retiring(view: ViewReader, policy: str) -> dict[str, Any]:
    """What leaving the current version of ``policy`` retires now."""
    counts: dict[str, list[int]] = {}  # tenant -> [retired, of those the Memory API's], by tenant
    for row in view.covered(CheckedUnder(policy, version_key(version_of(view, policy)))):
        count = counts.setdefault(row.tenant, [0, 0])
        count[0] += 1
        count[1] += row.kind == "agent_memory"
    return {
        "retired": sum(c[0] for c in counts.values()),
        "memory_api": sum(c[1] for c in counts.values()),
        "tenants": [{"tenant": t, "retired": c[0], "memory_api": c[1]} for t, c in sorted(counts.items())],
    }


@operation("set_policy")
def preview_policy(core: Core, policy: str, version: int | str, *, caller: Principal) -> dict[str, Any]:
    """A dry run of ``change_policy``: how many memories, in which tenants,
    making ``version`` current would retire now. Nothing is written; a
    change the rule refuses is refused here as it would be there."""
    policy = _policy_name(policy)
    version = parse_version(version, "version")
    with core.reading() as view:
        current = version_of(view, policy)
        unchanged = version_key(current) == version_key(version)
        if not unchanged:
            change(view, policy, version, actor=caller.actor)  # refused as the change would be
        found = {"retired": 0, "memory_api": 0, "tenants": []} if unchanged else _retiring(view, policy)
    return {"dry_run": True, "policy": policy, "version": version, "current": current, "unchanged": unchanged, **found}


@operation("set_policy")
def change_policy(
    core: Core, policy: str, version: int | str, *, actor: str | None = None, caller: Principal
) -> dict[str, Any]:
    """Make ``version`` current (``set_policy``) and say how many memories it
    retired; naming the version already current writes nothing and answers
    ``unchanged`` with the seq that made it current."""
    policy = _policy_name(policy)
    version = parse_version(version, "version")
    with core.reading() as view:
        if version_key(version_of(view, policy)) == version_key(version):
            return {
                "policy": policy,
                "version": version,
                "seq": view.policy(policy).seq,
                "retired": 0,
                "memory_api": 0,
                "tenants": [],
                "unchanged": True,
            }
    seq, found = _change(core, policy, version, actor or caller.actor)
    return {"policy": policy, "version": version, "seq": seq, **found, "unchanged": False}


@operation("set_policy")
def set_policy(core: Core, policy: str, version: int | str, *, actor: str | None = None, caller: Principal) -> int:
    """Make ``version`` current and retire the version before it for good:
    memories checked under it stop being usable until re-verified, and
    no later change can make it current again (see ``_versions``). Strict:
    the version already current is refused (``change_policy`` takes it as
    a no-op)."""
    return _change(core, _policy_name(policy), version, actor or caller.actor)[0]


def _change(core: Core, policy: str, version: int | str, actor: str) -> tuple[int, dict[str, Any]]:
    with core.transaction() as tx:
        event = change(tx.view, policy, version, actor=actor)
        found = _retiring(tx.view, policy)  # counted in the transaction that retires them
        seq = tx.append([event])[0]
    log.warning("policy_version_changed", policy=policy, version=version, seq=seq, retired=found["retired"])
    return seq, found


@operation("read")
def policies(core: Core, *, caller: Principal) -> dict[str, int | str]:
    with core.reading() as view:
        return {policy: version_value(v) for policy, v in view.policies().items()}
