"""The security routes: revocations (and their read-back and dry run),
policy versions, the tenants a key may see, erasures; and the sinks, the
copies outside memwarden that revocations must reach."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from memwarden.engine import MAX_PAGE, SYSTEM, Principal, Warden, readback_records, settle_committed
from starlette.concurrency import run_in_threadpool

from . import _responses as R
from ._guard import Caller
from ._models import EraseBody, PolicyBody, RedeliverBody, RevokeBody
from ._responses import documented


def install_security_routes(
    app: FastAPI, warden: Warden, read_back_now: Callable[[str, Principal], dict[str, Any]]
) -> None:
    """``read_back_now``: a committed revocation's read-back, for a caller
    waiting on it (``wait``)."""

    @app.post("/v1/revocations", tags=["security"], **documented(R.Revocation, 201))
    def revoke(body: RevokeBody, who: Caller) -> dict[str, Any]:
        """Take a scope out of every read path, at commit. It covers what was
        saved before it commits and does not block later saves: a memory
        fetched after it is usable; only a save of content fetched at or
        before it is refused. With ``wait``, the answer carries the
        read-back too (once committed, a revocation is answered with its
        result whatever the read-back meets)."""
        selector = body.selector.model_dump(exclude_none=True, exclude_defaults=True)
        result = warden.revoke(selector, reason=body.reason, caller=who)
        data = result.as_dict()
        if body.wait:
            data["readback"] = read_back_now(result.revocation_id, who)
            if warden.sinks:  # the copies outside memwarden, as they stand after one try
                data["sinks"], problem = settle_committed(warden, result.revocation_id, caller=who)
                if problem is not None:  # committed all the same: said beside the lines
                    data["sinks_error"] = problem
        return data

    @app.post("/v1/revocations/dry-run", tags=["security"], **documented(R.RevocationPreview))
    def revoke_dry_run(body: RevokeBody, who: Caller) -> dict[str, Any]:
        """How many memories, in which tenants, the revocation would take out
        now; nothing is written."""
        selector = body.selector.model_dump(exclude_none=True, exclude_defaults=True)
        return warden.preview_revocation(selector, caller=who)

    @app.get("/v1/revocations", tags=["security"], **documented(R.Revocations))
    def revocations(
        who: Caller,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
        offset: Annotated[int, Query(ge=0, le=2**31)] = 0,
    ) -> dict[str, Any]:
        """Revocations, newest first, each with its read-back state."""
        return {"revocations": warden.revocations(limit=limit, offset=offset, caller=who)}

    @app.get("/v1/revocations/{revocation_id}", tags=["security"], **documented(R.Revocation, 200, 404))
    def revocation(revocation_id: str, who: Caller) -> dict[str, Any]:
        return warden.revocation(revocation_id, caller=who)

    @app.get("/v1/revocations/{revocation_id}/readback", tags=["security"], **documented(R.Readback, 200, 404))
    def readback(revocation_id: str, who: Caller) -> dict[str, Any]:
        """The read-back confirmation records of a revocation."""
        return readback_records(warden, revocation_id, caller=who)

    @app.post("/v1/policies/{policy}", tags=["security"], **documented(R.PolicySet))
    def set_policy(policy: str, body: PolicyBody, who: Caller) -> dict[str, Any]:
        """Make the version current; the answer says how many memories it
        retired. The version already current is a no-op (``unchanged``)."""
        return warden.change_policy(policy, body.version, caller=who)

    @app.post("/v1/policies/{policy}/dry-run", tags=["security"], **documented(R.PolicyPreview))
    def policy_dry_run(policy: str, body: PolicyBody, who: Caller) -> dict[str, Any]:
        """What making the version current would retire now, per tenant; nothing is written."""
        return warden.preview_policy(policy, body.version, caller=who)

    @app.get("/v1/policies", tags=["memories"], **documented(R.Policies))
    def policies(who: Caller) -> dict[str, Any]:
        """The current version of every policy."""
        return {"policies": warden.policies(caller=who)}

    @app.get("/v1/tenants", tags=["memories"], **documented(R.Tenants))
    def tenants(who: Caller) -> dict[str, Any]:
        """The tenants this key may see: those holding memories it may read
        (up to 1,000), and an agent key's own."""
        return {"tenants": warden.tenants(caller=who)}

    @app.post("/v1/erasures", tags=["security"], **documented(R.Erased, 200, 404))
    def erase(body: EraseBody, who: Caller) -> dict[str, Any]:
        """A deletion request: the text is destroyed, the history stays."""
        return warden.erase(
            memory_id=body.memory_id, user=body.user, tenant=body.tenant, reason=body.reason, caller=who
        ).as_dict()


def install_sink_routes(app: FastAPI, warden: Warden) -> None:
    @app.get("/v1/sinks", tags=["security"], **documented(R.Sinks))
    def sinks(who: Caller) -> dict[str, Any]:
        """Every sink of the policy file, what it receives, and how its line of notices stands."""
        return {"sinks": warden.sinks_status(caller=who)}

    @app.post("/v1/sinks/{name}/test", tags=["security"], **documented(R.SinkTest, 200, 404))
    def test_sink(name: str, who: Caller) -> dict[str, Any]:
        """Whether the sink answers now, and its round trip (nothing is delivered)."""
        return warden.test_sink(name, caller=who)

    @app.post("/v1/sinks/redeliver", tags=["security"], **documented(R.Redelivered, 200, 404))
    def redeliver(body: RedeliverBody, who: Caller) -> dict[str, Any]:
        """Put a notice (a dead letter, or one delivered) back in its sink's line."""
        return warden.redeliver(body.notice_id, sink=body.sink, caller=who)

    @app.post("/v1/sinks/{name}/ack", tags=["security"], **documented(R.SinkAck, 200, 404))
    async def sink_ack(name: str, request: Request) -> dict[str, Any]:
        """A sink's acknowledgement of a notice (``ack = true``): the body
        ``{"type": "ack", "notice_id", "removed": {tenant: [ids]}}`` signed as
        Standard Webhooks specifies with the sink's secret, which is its
        credential (no API key). A forged, stale or replayed one is refused (401)."""
        body = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        return await run_in_threadpool(warden.sink_ack, name, body, headers, caller=SYSTEM)
