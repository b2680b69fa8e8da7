"""What must be re-verified now: a read of the views, apart from the
re-verification itself (``_verify``), which fetches and writes events."""

from __future__ import annotations

from collections.abc import Iterable

from memwarden.projections import Access

from ._core import Core
from ._rights import Principal, operation
from ._views import DueItem


@operation("read")
def due(warden: Core, *, limit: int | None = None, caller: Principal) -> list[DueItem]:
    """What must be re-verified now, in precedence: an invalidated memory is
    listed as ``revoked`` (the record format's word), one past its expiry as
    ``expired``, then failed checks (``unknown``) and older policy versions.
    Every statement is confined to what ``caller`` may see."""
    return due_of(warden, caller.access, limit=limit)


def due_of(
    warden: Core, access: Access, *, kinds: Iterable[str] | None = None, limit: int | None = None
) -> list[DueItem]:
    """``due`` under ``access``, of memories of ``kinds`` when given (the
    scheduler's re-verification: only the kinds whose policy opts in)."""
    now = warden.now()
    items: dict[tuple[str, str], DueItem] = {}
    with warden.reading() as view:
        rows = view.due(access, now, kinds)
    for row in rows:  # the first reason a memory comes with counts
        items.setdefault((row.memory_id, row.tenant), DueItem(row.memory_id, row.source_url, row.reason, row.tenant))
    ordered = sorted(items)  # by memory id, then tenant
    return [items[k] for k in (ordered[:limit] if limit is not None else ordered)]
