"""The HTTP server: the Warden over FastAPI, with API keys and roles.

Every endpoint checks the caller's key (``x-api-key``) and role, then calls
the Warden; no rule is decided here that the Warden does not decide.
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Annotated, Any

import httpx
from fastapi import FastAPI, Query, Request
from memwarden.engine import (
    KeyStore,
    Principal,
    Scheduler,
    Warden,
    readback_records,
    refuse_local_source,
)

from . import _http_responses as R
from ._http_audit import install_audit_routes
from ._http_guard import (
    Caller,
    Denied,
    McpAuth,
    Seq,
    install_error_handlers,
    one_tenant,
    require,
    tenant_ok,
    with_body_limit,
)
from ._http_models import EraseBody, MemoryApiSave, PolicyBody, RevokeBody, SaveBody, SaveManyBody
from ._http_responses import documented
from .console import install_console


def create_app(
    warden: Warden,
    *,
    max_content: int | None = None,
    scheduler: bool = True,
    scheduler_interval: float = 30.0,
    self_url: str | None = None,
    allow_local_sources: bool = False,
    mcp: bool = True,
) -> FastAPI:
    """The ASGI app. ``self_url`` lets the embedded scheduler read revocations
    back through this server's own query endpoint."""
    if max_content is not None:  # serve --max-content: the one content limit, for every face
        warden.limits = dataclasses.replace(warden.limits, max_content_bytes=max_content)
    if allow_local_sources:  # development: file and git sources, and local addresses
        warden.fetchers = warden.fetchers.allowing_local()
    keys = KeyStore(warden)
    internal_key = "mw_internal_" + secrets.token_urlsafe(24)
    internal = Principal("internal", "security", internal=True)
    jobs: Scheduler | None = None
    mcp_server = None
    if mcp:
        from .mcp import build_server

        mcp_server = build_server(warden, authenticate=keys.authenticate, allow_local_sources=allow_local_sources)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        nonlocal jobs
        async with contextlib.AsyncExitStack() as stack:
            if mcp_server is not None:
                await stack.enter_async_context(mcp_server.session_manager.run())
            if scheduler:
                jobs = Scheduler(
                    warden,
                    interval=scheduler_interval,
                    http_path=_http_read_path(self_url, internal_key) if self_url else None,
                )
                jobs.start_async()
            try:
                yield
            finally:
                if jobs is not None:
                    jobs.stop(wait=True)

    app = FastAPI(
        title="memwarden",
        version="0.1.0",
        summary="Decides whether an AI agent may use a remembered fact now.",
        lifespan=lifespan,
        docs_url=None,  # served below from the package's own files: they work offline
        redoc_url=None,
    )
    app.state.warden = warden
    app.state.keys = keys

    app.state.internal_key = internal_key
    app.state.internal = internal
    install_error_handlers(app)

    # -- memories -------------------------------------------------------------------------

    def save_fields(body: SaveBody, who: Principal) -> dict[str, Any]:
        """``save``'s arguments from a body: a bound key's agent filled in
        where the body names none (one naming another agent is the engine's
        to refuse, naming scope.agent)."""
        scope = body.scope.model_dump(exclude_none=True)
        if who.agent is not None:
            scope.setdefault("agent", who.agent)
        return dict(
            memory_id=body.memory_id,
            kind=body.kind,
            summary=body.summary,
            content=body.content,
            source_url=body.source_url,
            scope=scope,
            fetched_at=body.fetched_at,
            expires_at=body.expires_at,
            ttl=body.ttl,
            verified_at=body.verified_at,
            source=body.source,
            branch=body.branch,
            policy=body.policy,
            revocation_version=body.revocation_version,
            checksum=body.checksum,
            cache_key=body.cache_key.model_dump() if body.cache_key else None,
            actor=f"key:{who.key_id}",
            event_id=body.event_id,
            derived_from=body.derived_from,
        )

    def sources_allowed(fields: Mapping[str, Any]) -> None:
        if not allow_local_sources:
            refuse_local_source(fields["source_url"], fields.get("source"))

    @app.post("/v1/memories", tags=["memories"], **documented(R.Saved, 201, 409))
    def save_memory(body: SaveBody, who: Caller, request: Request) -> dict[str, Any]:
        """Record a memory (agents, in their own tenants)."""
        require(who, "agent", request=request)
        tenant_ok(who, body.scope.tenant, request)
        if who.agent is not None and body.scope.agent not in (None, who.agent):
            raise Denied(403, f"this key saves only as agent {who.agent!r}")
        fields = save_fields(body, who)
        sources_allowed(fields)
        return warden.save(**fields, access=who.access).as_dict()

    @app.post("/v1/memories/batch", tags=["memories"], **documented(R.SavedMany, 201, 409))
    def save_memories(body: SaveManyBody, who: Caller, request: Request) -> dict[str, Any]:
        """Record many memories in one transaction, all or none: a refusal
        (422 ``batch_refused``) lists each refused memory by index and field."""
        require(who, "agent", request=request)
        fields = [save_fields(item, who) for item in body.memories]
        return {"saved": [r.as_dict() for r in warden.save_many(fields, access=who.access, check=sources_allowed)]}

    @app.get("/v1/memories", tags=["memories"], **documented(R.Memories, 200, 409))
    def query_memories(
        who: Caller,
        request: Request,
        tenant: str,
        project: str | None = None,
        permission: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        tool: str | None = None,
        kind: str | None = None,
        text: str | None = None,
        all: bool = False,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
        min_seq: Seq | None = None,
        content: bool = True,
        ids: Annotated[list[str] | None, Query()] = None,
    ) -> dict[str, Any]:
        """Usable memories in a scope (``all=true``: every memory and why not)."""
        tenant_ok(who, tenant, request)
        # a bound key's agent is applied (and another agent refused) by the query itself
        views = warden.query(
            tenant=tenant,
            project=project,
            permission=permission,
            user=user,
            agent=agent,
            tool=tool,
            kind=kind,
            text=text,
            include_unusable=all,
            limit=limit,
            min_seq=min_seq,
            with_content=content,
            ids=ids,
            access=who.access,
        )
        return {"memories": [v.as_dict() for v in views]}

    # ids may hold "/" (sent as %2F): the routes take the rest of the path,
    # and the plain read is declared last so ".../explain" is not read as an id
    @app.post("/v1/memories/{memory_id:path}/verify", tags=["memories"], **documented(R.Verifications, 200, 404))
    def verify_memory(
        memory_id: str, who: Caller, request: Request, tenant: str | None = None, accept: bool = False
    ) -> dict[str, Any]:
        """Re-check a memory against its source."""
        require(who, "agent", "security", request=request)
        return {"results": [warden.verify(memory_id, tenant=tenant, access=who.access, accept=accept).as_dict()]}

    @app.get("/v1/memories/{memory_id:path}/explain", tags=["auditors"], **documented(R.Explanation, 200, 404))
    def explain_memory(
        memory_id: str, who: Caller, tenant: str | None = None, as_of: str | None = None
    ) -> dict[str, Any]:
        """The memory's history and why it is (not) usable."""
        return warden.explain(memory_id, tenant=tenant, access=who.access, as_of=as_of)

    @app.get("/v1/memories/{memory_id:path}", tags=["memories"], **documented(R.Memory, 200, 404, 409))
    def get_memory(
        memory_id: str, who: Caller, tenant: str | None = None, min_seq: Seq | None = None
    ) -> dict[str, Any]:
        """One memory, its text checked now; ``usable`` says whether to use it.
        A memory outside the key's rights is 404, as one that does not exist;
        ``tenant`` names it where the id is in more than one of the key's tenants."""
        return warden.get(memory_id, tenant=tenant, access=who.access, min_seq=min_seq).as_dict()

    @app.get("/v1/due", tags=["memories"], **documented(R.Due))
    def due(who: Caller, limit: Annotated[int | None, Query(ge=1, le=2**31)] = None) -> dict[str, Any]:
        """What must be re-verified now (for an agent key: in its rights only)."""
        return {"due": [i.as_dict() for i in warden.due(limit=limit, access=who.access)]}

    # -- security --------------------------------------------------------------------------

    @app.post("/v1/revocations", tags=["security"], **documented(R.Revocation, 201))
    def revoke(body: RevokeBody, who: Caller, request: Request) -> dict[str, Any]:
        """Take a scope out of every read path, at commit."""
        require(who, "security", request=request)
        selector = body.selector.model_dump(exclude_none=True, exclude_defaults=True)
        result = warden.revoke(selector, reason=body.reason, by=f"key:{who.key_id}")
        data = result.as_dict()
        if body.wait:
            readback = Scheduler(warden, http_path=_http_read_path(self_url, internal_key) if self_url else None)
            data["readback"] = readback.read_back(result.revocation_id)
        return data

    @app.post("/v1/revocations/dry-run", tags=["security"], **documented(R.RevocationPreview))
    def revoke_dry_run(body: RevokeBody, who: Caller, request: Request) -> dict[str, Any]:
        """How many memories, in which tenants, the revocation would take out
        now; nothing is written."""
        require(who, "security", request=request)
        selector = body.selector.model_dump(exclude_none=True, exclude_defaults=True)
        return warden.preview_revocation(selector)

    @app.get("/v1/revocations", tags=["security"], **documented(R.Revocations))
    def revocations(
        who: Caller,
        request: Request,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
        offset: Annotated[int, Query(ge=0, le=2**31)] = 0,
    ) -> dict[str, Any]:
        """Revocations, newest first, each with its read-back state."""
        require(who, "security", "auditor", request=request)
        return {"revocations": warden.revocations(limit=limit, offset=offset)}

    @app.get("/v1/revocations/{revocation_id}", tags=["security"], **documented(R.Revocation, 200, 404))
    def revocation(revocation_id: str, who: Caller, request: Request) -> dict[str, Any]:
        require(who, "security", "auditor", request=request)
        return warden.revocation(revocation_id)

    @app.get("/v1/revocations/{revocation_id}/readback", tags=["security"], **documented(R.Readback, 200, 404))
    def readback(revocation_id: str, who: Caller, request: Request) -> dict[str, Any]:
        """The read-back confirmation records of a revocation."""
        require(who, "security", "auditor", request=request)
        return readback_records(warden, revocation_id)

    @app.post("/v1/policies/{policy}", tags=["security"], **documented(R.PolicySet))
    def set_policy(policy: str, body: PolicyBody, who: Caller, request: Request) -> dict[str, Any]:
        require(who, "security", request=request)
        seq = warden.set_policy(policy, body.version, actor=f"key:{who.key_id}")
        return {"policy": policy, "version": body.version, "seq": seq}

    @app.post("/v1/erasures", tags=["security"], **documented(R.Erased, 200, 404))
    def erase(body: EraseBody, who: Caller, request: Request) -> dict[str, Any]:
        """A deletion request: the text is destroyed, the history stays."""
        require(who, "security", request=request)
        return {
            "erased": warden.erase(
                memory_id=body.memory_id,
                user=body.user,
                tenant=body.tenant,
                reason=body.reason,
                actor=f"key:{who.key_id}",
            )
        }

    install_audit_routes(app, warden)

    # -- the Memory API pair --------------------------------------------------------------------

    @app.post("/memory/save", tags=["memory api"], **documented(R.KeySaved, 200, 409))
    def memory_save(body: MemoryApiSave, who: Caller, request: Request, tenant: str | None = None) -> dict[str, Any]:
        """Save a key's content (a new version if the key exists)."""
        require(who, "agent", request=request)
        tenant = one_tenant(who, tenant, request)
        if who.agent is not None and body.agent != who.agent:
            raise Denied(403, f"this key saves only as agent {who.agent!r}")
        return warden.memory_save(
            tenant=tenant, agent=body.agent, key=body.key, content=body.content, access=who.access
        )

    @app.get("/memory/load", tags=["memory api"], **documented(R.KeysLoaded))
    def memory_load(
        who: Caller, request: Request, agent: str, tenant: str | None = None, history: bool = False
    ) -> dict[str, Any]:
        """Every key of an agent; content only while it may be used."""
        tenant = one_tenant(who, tenant, request)
        if who.agent is not None and agent != who.agent:
            raise Denied(403, f"this key reads only agent {who.agent!r}")
        return warden.memory_load(tenant=tenant, agent=agent, history=history, access=who.access)

    # -- the console and the API's own documentation, from the package's files ---------------

    def console_read_back(revocation_id: str) -> dict[str, Any]:
        readback = Scheduler(warden, http_path=_http_read_path(self_url, internal_key) if self_url else None)
        return readback.read_back(revocation_id)

    install_console(app, warden, keys, read_back=console_read_back)

    @app.get("/healthz", tags=["operations"], response_model=None, responses={200: {"model": R.Health}})
    def health() -> dict[str, Any]:
        return {"ok": True, "head_seq": warden.head_seq()}

    if mcp_server is not None:
        app.mount(
            "/",
            McpAuth(
                mcp_server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True),
                keys,
            ),
        )
    # JSON may escape each byte of content as six (\u00XX): room for that
    return with_body_limit(app, warden.limits.max_content_bytes * 6 + 64 * 1024)


def _http_read_path(base_url: str, key: str) -> Callable[[str, list[str]], list[str]]:
    """The scheduler's read-back through this server's own query endpoint."""

    def visible(tenant: str, ids: list[str]) -> list[str]:
        found: list[str] = []
        for start in range(0, len(ids), 100):  # keep the request line short
            chunk = ids[start : start + 100]
            response = httpx.get(
                f"{base_url}/v1/memories",
                params={"tenant": tenant, "ids": chunk, "limit": len(chunk), "content": "false"},
                headers={"x-api-key": key},
                timeout=30,
            )
            response.raise_for_status()
            found.extend(m["memory_id"] for m in response.json()["memories"])
        return found

    return visible
