"""Taking memories out: revocations and erasure (policy versions: ``_policy_change``)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from typing import Any

from memwarden.events import MemoryErased, RevocationIssued, Selector, check_storable, format_ts, new_id
from memwarden.projections import SETTLED, LineageQuery, RevocationQuery, RevocationRow, Selected

from . import _metrics
from ._core import Core, log
from ._derivation import rows_for
from ._errors import InvalidInput, RevocationNotFound, UserNotFound
from ._limits import MAX_PAGE, normal_url
from ._rights import Principal, confine_tenant, operation
from ._validation import build, when
from ._views import ErasureResult, RevocationResult


@operation("revoke")
def revoke(
    core: Core,
    selector: Selector | dict[str, Any],
    *,
    reason: str,
    by: str | None = None,
    effective_at: datetime | str | None = None,
    caller: Principal,
) -> RevocationResult:
    """Take everything ``selector`` covers out of every read path, at
    commit. ``by`` names who asked for it (default: the caller)."""
    by = by or caller.actor
    sel = _selector(selector)
    effective = when("effective_at", effective_at) or core.clock.now()
    event = build(
        RevocationIssued,
        revocation_id=new_id("rev_"),
        selector=sel,
        reason=reason,
        issued_by=by,
        effective_at=effective,
        actor=by,
    )
    with core.transaction() as tx:
        seq = tx.append([event])[0]
        (row,) = tx.view.revocation_records(RevocationQuery(event.revocation_id))
        covered = row.covered or 0
        cascaded = sum(1 for r in tx.recorded if r.type == "memory.invalidated")
    _metrics.REVOCATIONS.inc()
    log.warning(
        "revocation_issued", revocation_id=event.revocation_id, seq=seq, covered=covered, cascaded=cascaded, by=by
    )
    for listener in list(core.revocation_listeners):
        try:
            listener(event.revocation_id)
        except Exception:  # a listener must never undo or hide a committed revocation
            log.exception("revocation_listener_failed", revocation_id=event.revocation_id)
    return RevocationResult(event.revocation_id, seq, covered, format_ts(effective), cascaded)


@operation("revoke")
def preview_revocation(
    core: Core, selector: Selector | dict[str, Any], *, effective_at: datetime | str | None = None, caller: Principal
) -> dict[str, Any]:
    """A dry run of ``revoke``: how many memories, in which tenants, the
    selector would take out if issued now. Nothing is written. The count
    is the fold's own statement, so it is what ``covered`` would say."""
    sel = _selector(selector)
    effective = format_ts(when("effective_at", effective_at) or core.clock.now())
    with core.reading() as view:
        direct = [c.key for c in view.covered(Selected(sel.model_dump(mode="json")))]
        tenants = Counter(tenant for tenant, _ in direct)
        # the cascade: what is drawn from those and still holds, invalidated with them
        below = {k.key for k in view.lineage(LineageQuery("down", tuple(direct)))} - set(direct)
        cascaded = sum(1 for r in rows_for(view, sorted(below)) if r.status not in SETTLED)
    return {
        "dry_run": True,
        "selector": sel.model_dump(mode="json", exclude_defaults=True),
        "effective_at": effective,
        "everything": sel.everything,
        "covered": len(direct),
        "cascaded": cascaded,
        "tenants": [{"tenant": tenant, "covered": count} for tenant, count in sorted(tenants.items())],
    }


def _selector(selector: Selector | dict[str, Any]) -> Selector:
    """The selector as it is recorded: its ``source_prefix`` spelled as
    sources are (``normal_url``), so no other spelling of a host escapes it."""
    if isinstance(selector, Selector):
        selector = selector.model_dump(exclude_defaults=True)
    if not isinstance(selector, dict):
        raise InvalidInput("selector", "must be an object of the fields a revocation covers")
    prefix = selector.get("source_prefix")
    if isinstance(prefix, str):
        selector = {**selector, "source_prefix": normal_url("selector.source_prefix", prefix)}
    return build(Selector, "selector", **selector)


@operation("review")
def revocation(core: Core, revocation_id: str, *, caller: Principal) -> dict[str, Any]:
    with core.reading() as view:
        found = view.revocation_records(RevocationQuery(revocation_id))
    if not found:
        raise RevocationNotFound(revocation_id)
    return _revocation_out(found[0])


@operation("review")
def revocations(core: Core, *, limit: int = 100, offset: int = 0, caller: Principal) -> list[dict[str, Any]]:
    """Revocations, newest first, with their read-back state."""
    if not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidInput("limit", f"must be between 1 and {MAX_PAGE}")
    if not isinstance(offset, int) or offset < 0:
        raise InvalidInput("offset", "must be 0 or more")
    with core.reading() as view:
        return [_revocation_out(r) for r in view.revocation_records(RevocationQuery(limit=limit, offset=offset))]


def _revocation_out(record: RevocationRow) -> dict[str, Any]:
    row = record.as_dict()
    row["selector"] = json.loads(row["selector"])
    row["leaked_ids"] = json.loads(row["leaked_ids"]) if row["leaked_ids"] else []
    return row


# -- erasure ------------------------------------------------------------------------


@operation("erase")
def erase(
    core: Core,
    *,
    memory_id: str | None = None,
    user: str | None = None,
    tenant: str | None = None,
    reason: str,
    actor: str | None = None,
    caller: Principal,
) -> ErasureResult:
    """Destroy the texts of a memory (or of all of a user's memories, in
    ``tenant`` when given): its summary and content, every version.

    Exactly what it names: another memory holding the very same words
    keeps them (texts are kept per memory, never shared). The events
    stay, so the chain still verifies and explain shows that the memory
    existed and was erased; the texts leave the text store, the text
    index, free pages (secure_delete) and the WAL (checkpoint).
    """
    if (memory_id is None) == (user is None):
        raise InvalidInput("memory_id", "give exactly one of memory_id or user")
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInput("reason", "is required")
    if memory_id is not None and (not isinstance(memory_id, str) or not memory_id):
        raise InvalidInput("memory_id", "must be a memory's id: non-empty text")  # no memory has another
    if user is not None:
        check_storable("user", user)  # named, as a tenant is: no store holds such a name
    if tenant is not None:
        # a tenant the key may not use is refused as a save or a listing in it is (403): the
        # answer tells of the key, not of any memory (a missing id in a tenant of its own is 404)
        confine_tenant(caller, tenant)
    with core.transaction() as tx:
        if memory_id is not None:
            rows = [core.find_row(tx.view, memory_id, tenant=tenant, access=caller.access)]
        elif user is not None:  # always, one of the two being given
            rows = tx.view.memories(caller.access, user=user, tenant=tenant)
            if not rows:
                raise UserNotFound(user, tenant)
        targets = sorted((r.tenant, r.memory_id, r.checksum, r.version) for r in rows if r.status != "erased")
        events = [
            MemoryErased(
                tenant=t, memory_id=m, reason=reason, content_checksum=c, version=v, actor=actor or caller.actor
            )
            for t, m, c, v in targets
        ]
        # the text store destroys the texts as the events append (its
        # subscriber), and the projection drops them from the text index
        tx.append(events)
        tx.view.purge_text_index()
    log.warning("memories_erased", count=len(events), memory_id=memory_id, user=user, tenant=tenant)
    return ErasureResult(len(events), tx.erasure_cleared is not False)
