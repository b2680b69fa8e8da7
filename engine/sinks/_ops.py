"""What staff do with sinks: list them with their lines' state, test one,
put a notice back in line, see a revocation's read-back per sink, and fill
a Redis sink as agents' hot cache."""

from __future__ import annotations

from typing import Any

from .._core import Core
from .._errors import InvalidInput, SinkNotFound, SinkUnavailable
from .._limits import MAX_PAGE
from .._reading import query
from .._revoking import revocation
from .._rights import SYSTEM, Principal, operation
from ._clients import RedisSink
from ._worker import SinkWorker, sink_line


@operation("review")
def sinks(core: Core, *, caller: Principal) -> list[dict[str, Any]]:
    """Every configured sink, what it receives, and how its line stands."""
    with core.reading() as view:
        outbox = view.outbox()
        counts = outbox.counts()
        out = []
        for spec in core.sinks:
            states = counts.get(spec.name, {})
            out.append(
                {
                    **spec.describe(),
                    "pending": states.get("pending", 0),
                    "delivered": states.get("delivered", 0),
                    "dead": states.get("dead", 0),
                    "last_error": outbox.last_error(spec.name) if states.get("pending") or states.get("dead") else None,
                }
            )
    return out


@operation("confirm")
def test_sink(core: Core, name: str, *, caller: Principal) -> dict[str, Any]:
    """Whether sink ``name`` answers now (a Redis PING; a webhook sink's
    probe, signed, asking about no ids), and its round trip."""
    worker = SinkWorker(core)
    try:
        spec = worker.spec(name)
        try:
            ms = worker.client(spec).ping()
        except (SinkUnavailable, InvalidInput) as exc:
            return {"sink": name, "ok": False, "round_trip_ms": None, "problem": str(exc)}
        return {"sink": name, "ok": True, "round_trip_ms": round(ms, 3), "problem": None}
    finally:
        worker.close()


@operation("confirm")
def redeliver(core: Core, notice_id: str, *, sink: str | None = None, caller: Principal) -> dict[str, Any]:
    """Put notice ``notice_id`` (a dead letter, or one delivered) back in
    its sink's line, from its first attempt (to every sink it went to,
    unless ``sink`` is named); its read-backs look again once it is delivered."""
    if not isinstance(notice_id, str) or not notice_id.startswith("ntc_"):
        raise InvalidInput("notice_id", "must be a notice id (ntc_...)")
    if sink is not None:
        SinkWorker(core).spec(sink)  # an unknown sink is named as such
    with core.store.outbox() as outbox:
        requeued = outbox.redeliver(notice_id, sink)
    if not requeued:
        raise SinkNotFound("notice_id", notice_id)
    return {"notice_id": notice_id, "sink": sink, "requeued": requeued}


@operation("review")
def sink_notices(
    core: Core, *, sink: str | None = None, state: str | None = None, limit: int = 100, caller: Principal
) -> list[dict[str, Any]]:
    """Notices newest first (dead letters with ``state="dead"``). A sink
    named is one of the policy file's, or one notices were written for
    before it left the file: any other name is a typo, answered as such
    rather than as an empty list."""
    if state not in (None, "pending", "delivered", "dead"):
        raise InvalidInput("state", "must be pending, delivered or dead")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE:
        raise InvalidInput("limit", f"must be between 1 and {MAX_PAGE}")
    with core.reading() as view:
        found = view.outbox().notices(sink, state, limit)
        if sink is not None and not found and all(spec.name != sink for spec in core.sinks):
            if not view.outbox().notices(sink, None, 1):
                raise SinkNotFound("sink", sink)
        return found


@operation("review")
def sink_readbacks(core: Core, revocation_id: str, *, caller: Principal) -> list[dict[str, Any]]:
    """Each sink's read-back of a revocation, as it stands."""
    revocation(core, revocation_id, caller=caller)  # an unknown one is named as such
    with core.reading() as view:
        return [sink_line(r) for r in view.outbox().readbacks(revocation_id)]


@operation("review")
def sink_leaks(core: Core, *, caller: Principal) -> int:
    """Read-backs that found a sink still holding covered ids (and still do)."""
    with core.reading() as view:
        return view.outbox().leaks_found()


@operation("confirm")
def settle_sinks(core: Core, revocation_id: str, *, wait: float = 0.0, caller: Principal) -> list[dict[str, Any]]:
    """Deliver and read back a revocation's sinks now (for up to ``wait``
    seconds): their states as they stand (``revoke --wait``)."""
    worker = SinkWorker(core)
    try:
        return worker.settle(revocation_id, wait)
    finally:
        worker.close()


@operation("operate")
def fill_cache(core: Core, name: str, *, tenant: str, limit: int = 10_000, caller: Principal) -> dict[str, Any]:
    """Put ``tenant``'s usable memories (up to ``limit``) into Redis sink
    ``name``, each under its full key and expiring no later than its
    ``expires_at``: the hot cache agents read, which revocations clear."""
    worker = SinkWorker(core)
    try:
        spec = worker.spec(name)
        client = worker.client(spec)
        if not isinstance(client, RedisSink):
            raise InvalidInput("sink", f"{name!r} is a {spec.kind} sink; only a redis sink is filled")
        if not spec.covers(tenant):
            raise InvalidInput("tenant", f"sink {name!r} does not receive tenant {tenant!r}")
        put = 0
        offset = 0
        page = 1000
        while offset < limit:
            found = query(
                core, tenant=tenant, limit=min(page, limit - offset), offset=offset, with_content=True, caller=SYSTEM
            )
            put += client.fill(found)
            offset += len(found)
            if len(found) < page and not found.truncated:  # short only at the end, or at the size bound
                break
        return {"sink": name, "tenant": tenant, "put": put}
    finally:
        worker.close()
