"""What a replaced store took out, carried into the store that replaces it.

A backup holds its store as it was when it was taken: whatever was taken
out after that (a memory erased, a scope revoked, a key revoked, a policy
version retired) is in the store the restore replaces, not in the backup.
A restore (``_restore``) reads all of it from the replaced store
(``TakenOut.of``) and carries it into the restored store (``carry``) in one
transaction, before anything reads it:

* each erasure mark: the memory erased again (a ``memory.erased`` event)
  where the backup holds a version so erased, the mark kept otherwise;
* each revocation the restored store does not hold: a new
  ``revocation.issued`` with the same selector and effective time, so it
  covers every version the original covered (all recorded before it, and
  every later save fetched at or before its effective time), its reason
  naming the original (``re-applied at restore: revocation rev_…: …``);
* each memory invalidated there directly (its source changed, a record
  said so), at a version this store holds usable: invalidated again, for
  the same reason (what was drawn from it follows, as at any invalidation);
* each key revoked there and active here: revoked here, at its time;
* each policy change past the version current here: made again, in order,
  so the versions the replaced store retired are retired here too.

Each is compared with what the restored store holds, never counted twice:
a revocation by its original id (its own, or the one a re-applied one
names) and selector, so restoring the same backup again, or reapplying
twice, re-applies each exactly once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from memwarden.events import MemoryErased, MemoryInvalidated, RevocationIssued, Selector, new_id, version_key
from memwarden.projections import SETTLED

from ._core import Core, log
from ._errors import InvalidInput
from ._rights import SYSTEM
from ._validation import build
from ._versions import change, version_of

# what a re-applied erasure's or revocation's reason begins with (the original's follows)
REAPPLIED = "re-applied at restore: "
# a re-applied revocation's reason: the prefix, then the revocation it carries
_REVOCATION = re.compile(rf"^{re.escape(REAPPLIED)}revocation (\S+): ")
# (tenant, memory_id, the last version erased)
Mark = tuple[str, str, int]


class TakenOut:
    """What a store took out: its erasure marks (each with the reason of the
    last erasure its log records for that memory), its revocations in the
    order issued, its direct invalidations, its revoked keys and each
    policy's versions in order."""

    def __init__(
        self,
        marks: Iterable[Mark] = (),
        reasons: dict[tuple[str, str], str] | None = None,
        revocations: Iterable[dict[str, Any]] = (),
        revoked_keys: Iterable[tuple[str, str]] = (),
        policies: dict[str, list[str]] | None = None,
        invalidations: Iterable[dict[str, Any]] = (),
    ) -> None:
        self.marks = list(marks)
        self.reasons = reasons or {}
        self.revocations = list(revocations)
        self.revoked_keys = list(revoked_keys)  # (key_id, revoked_at)
        self.policies = policies or {}  # policy: [the version before its first change, each version made current]
        self.invalidations = list(invalidations)  # payloads, none a cascade's (the fold makes those again)

    @classmethod
    def of(cls, core: Core) -> TakenOut:
        reasons: dict[tuple[str, str], str] = {}
        revocations: list[dict[str, Any]] = []
        invalidations: list[dict[str, Any]] = []
        policies: dict[str, list[str]] = {}
        types = ("memory.erased", "revocation.issued", "memory.invalidated", "policy.version_changed")
        for event in core.log.read(types=types):
            p = event.payload
            if event.type == "memory.invalidated":
                if p.get("caused_by") is None:
                    invalidations.append(p)
            elif event.type == "memory.erased":
                reasons[(p["tenant"], p["memory_id"])] = str(p.get("reason") or "")
            elif event.type == "revocation.issued":
                revocations.append(p)
            else:
                versions = policies.setdefault(p["policy"], [version_key(p["previous_version"])])
                versions.append(version_key(p["version"]))
        with core.reading() as view:
            keys = [(k.key_id, k.revoked_at) for k in view.side().keys() if k.revoked_at is not None]
        return cls(core.texts.erasure_marks(), reasons, revocations, keys, policies, invalidations)


def carry(core: Core, taken: TakenOut, *, replaced: str) -> dict[str, int]:
    """Carry ``taken`` into ``core``'s store in one transaction: how many
    memories were erased again (events), how many erasure marks were carried
    for versions it holds no memory at (no event), how many revocations,
    invalidations, key revocations and policy changes were made again."""
    known = _known_revocations(core)
    erased: list[MemoryErased] = []
    carried = revocations = invalidations = keys = policies = 0
    with core.transaction(size=max(len(taken.marks), 1)) as tx:
        for tenant, memory_id, through in taken.marks:
            if tx.texts.erased_through(tenant, memory_id) >= through:
                continue  # the restored store knew of it already
            rows = tx.view.memories(SYSTEM.access, memory_id=memory_id, tenant=tenant)
            row = rows[0] if rows else None
            if row is not None and row.status != "erased" and row.version <= through:
                why = taken.reasons.get((tenant, memory_id)) or "erased"
                erased.append(
                    MemoryErased(
                        tenant=tenant,
                        memory_id=memory_id,
                        # said once, however many restores carried it
                        reason=(why if why.startswith(REAPPLIED) else f"{REAPPLIED}{why}")[:4096],
                        content_checksum=row.checksum,
                        version=row.version,
                        actor="restore",
                    )
                )
            else:
                tx.texts.erase_through(tenant, memory_id, through)
                carried += 1
        if erased:
            tx.append(erased)
            tx.view.purge_text_index()
        # revocations after the erasures, as issued: each covers what the original did
        again = []
        for p in taken.revocations:
            origin, selector = _origin(p), _selector_text(p["selector"])
            if (origin, selector) in known:
                continue
            known.add((origin, selector))
            reason = str(p["reason"])
            again.append(
                build(
                    RevocationIssued,
                    revocation_id=new_id("rev_"),
                    selector=build(Selector, "selector", **p["selector"]),
                    reason=(reason if _REVOCATION.match(reason) else f"{REAPPLIED}revocation {origin}: {reason}")[
                        :4096
                    ],
                    issued_by=p["issued_by"],
                    effective_at=p["effective_at"],
                    actor="restore",
                )
            )
        if again:
            tx.append(again)
            revocations = len(again)
        for p in taken.invalidations:
            invalidations += _invalidate(tx, p)
        for key_id, revoked_at in taken.revoked_keys:
            keys += bool(tx.view.revoke_key(key_id, revoked_at))  # only a key held here and active
        for policy, versions in sorted(taken.policies.items()):
            policies += _carry_policy(tx, policy, versions)
    if carried and not erased:
        core.store.after_erasure()  # the destroyed texts leave the files too (an erasure's commit does it)
    done = {
        "erasures_reapplied": len(erased),
        "erasure_marks_carried": carried,
        "revocations_reapplied": revocations,
        "invalidations_reapplied": invalidations,
        "key_revocations_reapplied": keys,
        "policy_changes_reapplied": policies,
    }
    if any(done.values()):
        log.warning("taken_out_reapplied", replaced=replaced, **done)
    return done


def _invalidate(tx: Any, p: dict[str, Any]) -> int:
    """Invalidate again the version ``p`` (a ``memory.invalidated``) names
    if this store holds it, current and not settled: 1 if it did."""
    rows = tx.view.memories(SYSTEM.access, memory_id=p["memory_id"], tenant=p["tenant"])
    if not rows or rows[0].version != p["version"] or rows[0].status in SETTLED:
        return 0
    detail = str(p.get("detail") or "")
    tx.append(
        [
            MemoryInvalidated(
                tenant=p["tenant"],
                memory_id=p["memory_id"],
                version=p["version"],
                reason=p["reason"],
                detail=(detail if detail.startswith(REAPPLIED) else f"{REAPPLIED}{detail}")[:4096],
                new_checksum=p.get("new_checksum"),
                actor="restore",
            )
        ]
    )
    return 1


def _carry_policy(tx: Any, policy: str, versions: list[str]) -> int:
    """Make current again, in order, each version of ``policy`` the replaced
    store moved to after the one current here (all of them when it never was
    at that one: its history and the backup's parted); a version this store
    refuses (retired here, or a number below its highest) is passed over."""
    here = version_key(version_of(tx.view, policy))
    if here == versions[-1]:
        return 0
    after = len(versions) - versions[::-1].index(here) if here in versions else 0
    made = 0
    for version in versions[after:]:
        if version_key(version_of(tx.view, policy)) == version:
            continue
        try:
            event = change(tx.view, policy, version, actor="restore")
        except InvalidInput:
            continue  # this store is past it already
        tx.append([event])
        made += 1
    return made


def _known_revocations(core: Core) -> set[tuple[str, str]]:
    """(original id, selector) of every revocation ``core``'s store holds."""
    return {
        (_origin(e.payload), _selector_text(e.payload["selector"])) for e in core.log.read(types=("revocation.issued",))
    }


def _origin(payload: dict[str, Any]) -> str:
    """The revocation ``payload`` carries: the one a re-applied revocation names, or itself."""
    found = _REVOCATION.match(str(payload["reason"]))
    return found.group(1) if found else str(payload["revocation_id"])


def _selector_text(selector: dict[str, Any]) -> str:
    return json.dumps(selector, sort_keys=True, separators=(",", ":"))
