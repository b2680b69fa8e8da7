"""The auditors' routes: the past view, the chain's proof, the counters and
the event feed. Security and auditor keys only; none names a tenant's
memories beyond what those roles may read everywhere."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from memwarden.engine import MAX_PAGE, Warden

from . import _responses as R
from ._fair import stepped_out
from ._guard import Caller, Seq
from ._responses import documented
from ._waiting import HeadWatch


def install_audit_routes(app: FastAPI, warden: Warden) -> None:
    watch = app.state.head_watch = HeadWatch(warden)

    @app.get("/v1/replay", tags=["auditors"], **documented(R.Replay))
    def replay(
        who: Caller,
        as_of: str | None = None,
        seq: Seq | None = None,
        tenant: str | None = None,
        include_unusable: Annotated[bool, Query(alias="all")] = False,
        limit: Annotated[int | None, Query(ge=1, le=MAX_PAGE)] = None,
        after: str | None = None,
    ) -> Any:
        """The usable view as it was then (with ``all``, every memory and why
        it was or was not usable). With ``limit``, one page and its ``next``
        cursor for ``after``; without, the whole view, streamed."""
        if limit is None and after is None:
            chunks = warden.replay_stream(
                as_of=as_of, seq=seq, tenant=tenant, include_unusable=include_unusable, caller=who
            )
            return StreamingResponse((c.encode() for c in chunks), media_type="application/json")
        return warden.replay(
            as_of=as_of, seq=seq, tenant=tenant, include_unusable=include_unusable, after=after, limit=limit, caller=who
        )

    @app.get("/v1/audit/verify", tags=["auditors"], **documented(R.AuditReport))
    def audit_verify(who: Caller, against: str | None = None) -> JSONResponse:
        data = warden.audit_verify(against, caller=who)
        return JSONResponse(data, status_code=200)

    @app.get("/v1/audit/head", tags=["auditors"], **documented(R.Head))
    def audit_head(who: Caller) -> dict[str, Any]:
        return warden.audit_head(caller=who)

    @app.get("/v1/stats", tags=["auditors"], **documented(R.Stats))
    def stats(who: Caller) -> dict[str, Any]:
        return {"weeks": warden.stats(caller=who)}

    @app.get("/v1/events", tags=["auditors"], **documented(R.Events, 200, 429))
    async def events(
        who: Caller,
        request: Request,
        after: Seq = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 500,
        wait: Annotated[float, Query(ge=0, le=60)] = 0,
    ) -> dict[str, Any]:
        """Events after a seq, for downstream caches: long-polls up to ``wait``
        seconds when there is nothing new yet. An ``after`` beyond the log's
        head is refused at once (422, naming ``after`` and the head): no wait
        would bring its events. Seqs, not tokens: these keys read the whole log."""
        deadline = time.monotonic() + wait
        seen = after  # the head up to which this caller has nothing to read
        while True:
            head = watch.head
            batch = await asyncio.to_thread(warden.events_after, after, limit, caller=who)
            left = deadline - time.monotonic()
            if batch or left <= 0 or await request.is_disconnected():
                return {"events": batch, "head": warden.head_seq()}
            seen = max(seen, head)
            # woken when any process appends, holding no thread (a few
            # seconds at most, to notice a client that went away)
            async with stepped_out(request):
                await watch.wait_past(seen, min(left, 5.0), key=who.key_id)
