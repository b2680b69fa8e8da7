"""The HTTP server: the Warden over FastAPI, with API keys and roles.

Every endpoint names its caller (from ``x-api-key``) and calls the Warden,
which decides what that caller may do (``memwarden.engine._rights``): no
role is checked and no tenant narrowed here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import secrets
import threading
from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any

import httpx
from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse
from memwarden.engine import (
    MAX_PAGE,
    SYSTEM,
    InvalidInput,
    KeyStore,
    Principal,
    Scheduler,
    Warden,
    may,
    metrics,
    read_back_committed,
    readback_records,
    refuse_local_source,
    settle_committed,
)
from memwarden.events import get_logger
from starlette.concurrency import run_in_threadpool

from ..console import install_console
from . import _responses as R
from ._audit import install_audit_routes
from ._fair import PER_LANE, FairShare, Lanes
from ._guard import Caller, McpAuth, MinSeq, install_error_handlers, optional_caller, with_body_limit
from ._models import (
    EraseBody,
    MemoryApiSave,
    PolicyBody,
    RedeliverBody,
    RevokeBody,
    SaveBody,
    SaveManyBody,
    Unchecked,
    parsed,
)
from ._ops import RequestId, install_operations
from ._responses import documented
from ._search import install_search_routes

log = get_logger("memwarden.http")


def where_of(text: str | None) -> Any:
    """A query's ``where`` as the query string carries it: JSON text (the
    client's encoder writes a NaN or an infinity as Python's json does)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidInput("where", f"is not JSON: {exc}") from None


def create_app(
    warden: Warden,
    *,
    max_content: int | None = None,
    scheduler: bool = True,
    scheduler_interval: float = 30.0,
    self_url: str | None = None,
    allow_local_sources: bool = False,
    mcp: bool = True,
    per_key: int = PER_LANE,
) -> FastAPI:
    """The ASGI app. ``self_url`` lets the embedded scheduler read revocations
    back through this server's own query endpoint; ``per_key``: requests one
    caller has running at once (``FairShare``)."""
    if max_content is not None:  # serve --max-content: the one content limit, for every face
        # an answer holds at least one memory of the largest content (Limits.from_settings' rule)
        answer = max(warden.limits.max_answer_bytes, max_content)
        warden.limits = dataclasses.replace(warden.limits, max_content_bytes=max_content, max_answer_bytes=answer)
    if allow_local_sources:  # development: file and git sources, and local addresses
        warden.fetchers = warden.fetchers.allowing_local()
    # a large batch's preparation gives the requests beside it half the interpreter
    warden.large_write_share = 0.5
    keys = KeyStore(warden)
    internal_key = "mw_internal_" + secrets.token_urlsafe(24)
    internal = Principal("internal", "security", internal=True)  # this server reading itself back
    http_path = _SelfReader(self_url, internal_key) if self_url else None
    jobs: Scheduler | None = None
    mcp_server = None
    if mcp:
        from ..mcp import build_server

        mcp_server = build_server(warden, authenticate=keys.authenticate, allow_local_sources=allow_local_sources)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        nonlocal jobs
        async with contextlib.AsyncExitStack() as stack:
            if http_path is not None:
                stack.callback(http_path.close)
            if mcp_server is not None:
                await stack.enter_async_context(mcp_server.session_manager.run())
            if scheduler:
                jobs = Scheduler(
                    warden,
                    interval=scheduler_interval,
                    http_path=http_path,
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

    app.state.lanes = Lanes(per_lane=per_key)
    app.state.internal_key = internal_key
    app.state.internal = internal
    install_error_handlers(app)

    # -- memories -------------------------------------------------------------------------

    def save_fields(body: SaveBody) -> dict[str, Any]:
        """``save``'s arguments from a body (the caller's scope is the engine's to check)."""
        return dict(
            memory_id=body.memory_id,
            kind=body.kind,
            summary=body.summary,
            content=body.content,
            source_url=body.source_url,
            scope=body.scope.model_dump(exclude_none=True),
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
            event_id=body.event_id,
            derived_from=body.derived_from,
            embedding=body.embedding,
            embeddings=body.embeddings,
        )

    def sources_allowed(fields: Mapping[str, Any]) -> None:
        if not allow_local_sources:
            refuse_local_source(fields["source_url"], fields.get("source"))

    @app.post("/v1/memories", tags=["memories"], **documented(R.Saved, 201, 409))
    def save_memory(body: SaveBody, who: Caller) -> dict[str, Any]:
        """Record a memory (agents, in their own tenants)."""
        fields = save_fields(body)
        sources_allowed(fields)
        return warden.positions(who).saved(warden.save(**fields, caller=who)).as_dict()

    @app.post("/v1/memories/batch", tags=["memories"], **documented(R.SavedMany, 201, 409))
    def save_memories(body: Annotated[SaveManyBody, Unchecked], who: Caller) -> JSONResponse:
        """Record many memories in one transaction, all or none: a refusal
        (422 ``batch_refused``) lists each refused memory by index and field."""
        # checked and answered here, in the worker thread: the event loop only reads the bytes
        fields = [save_fields(item) for item in parsed(SaveManyBody, body).memories]
        saved = warden.save_many(fields, caller=who, check=sources_allowed)
        positions = warden.positions(who)
        return JSONResponse({"saved": [positions.saved(r).as_dict() for r in saved]}, status_code=201)

    @app.get("/v1/memories", tags=["memories"], **documented(R.Memories, 200, 409))
    def query_memories(
        who: Caller,
        tenant: str,
        project: str | None = None,
        permission: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        tool: str | None = None,
        kind: str | None = None,
        text: str | None = None,
        all: bool = False,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
        min_seq: MinSeq = None,
        content: bool = True,
        ids: Annotated[list[str] | None, Query()] = None,
        status: str | None = None,
        offset: Annotated[int, Query(ge=0, le=100_000)] = 0,
        id_prefix: Annotated[list[str] | None, Query()] = None,
        where: str | None = None,
    ) -> dict[str, Any]:
        """Usable memories in a scope (``all=true``: every memory and why not);
        ``status`` narrows to the view's stored status, ``offset`` skips that
        many answers (a page of a listing); ``id_prefix`` (repeatable) keeps
        the ids starting with one, ``where`` (a JSON object, LangGraph's
        filter language) the memories whose JSON content passes it, both
        counted before ``limit`` and ``offset``. An answer holds at most
        ``limits.max_answer_bytes`` of content: past it, ``truncated`` is true
        and the next page starts at ``next_offset``."""
        positions = warden.positions(who)
        with positions.waiting():
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
                min_seq=positions.taken(min_seq),
                with_content=content,
                ids=ids,
                status=status,
                offset=offset,
                id_prefix=id_prefix,
                where=where_of(where),
                caller=who,
            )
        return {"memories": [positions.memory(v.as_dict()) for v in views], **views.told()}

    install_search_routes(app, warden)

    # ids may hold "/" (sent as %2F): the routes take the rest of the path,
    # and the plain read is declared last so ".../explain" is not read as an id
    @app.post("/v1/memories/{memory_id:path}/verify", tags=["memories"], **documented(R.Verifications, 200, 404))
    def verify_memory(memory_id: str, who: Caller, tenant: str | None = None, accept: bool = False) -> dict[str, Any]:
        """Re-check a memory against its source."""
        verified = warden.verify(memory_id, tenant=tenant, caller=who, accept=accept)
        return {"results": [warden.positions(who).verified(verified).as_dict()]}

    @app.get("/v1/memories/{memory_id:path}/explain", tags=["auditors"], **documented(R.Explanation, 200, 404))
    def explain_memory(
        memory_id: str, who: Caller, tenant: str | None = None, as_of: str | None = None
    ) -> dict[str, Any]:
        """The memory's history and why it is (not) usable (for an agent key,
        its steps in order without their seqs, and ``seq`` a token)."""
        return warden.positions(who).explained(warden.explain(memory_id, tenant=tenant, caller=who, as_of=as_of))

    @app.get("/v1/memories/{memory_id:path}", tags=["memories"], **documented(R.Memory, 200, 404, 409))
    def get_memory(memory_id: str, who: Caller, tenant: str | None = None, min_seq: MinSeq = None) -> dict[str, Any]:
        """One memory, its text checked now; ``usable`` says whether to use it.
        A memory outside the key's rights is 404, as one that does not exist;
        ``tenant`` names it where the id is in more than one of the key's tenants."""
        positions = warden.positions(who)
        with positions.waiting():
            view = warden.get(memory_id, tenant=tenant, caller=who, min_seq=positions.taken(min_seq))
        return positions.memory(view.as_dict())

    @app.get("/v1/due", tags=["memories"], **documented(R.Due))
    def due(who: Caller, limit: Annotated[int | None, Query(ge=1, le=2**31)] = None) -> dict[str, Any]:
        """What must be re-verified now (for an agent key: in its rights only)."""
        return {"due": [i.as_dict() for i in warden.due(limit=limit, caller=who)]}

    # -- security --------------------------------------------------------------------------

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

    # -- sinks: the copies outside memwarden ---------------------------------------------------

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

    install_audit_routes(app, warden)

    # -- the Memory API pair --------------------------------------------------------------------

    @app.post("/memory/save", tags=["memory api"], **documented(R.KeySaved, 200, 409))
    def memory_save(body: MemoryApiSave, who: Caller, tenant: str | None = None) -> dict[str, Any]:
        """Save a key's content (a new version if the key exists)."""
        saved = warden.memory_save(tenant=tenant, agent=body.agent, key=body.key, content=body.content, caller=who)
        return warden.positions(who).answer(saved)

    @app.get("/memory/load", tags=["memory api"], **documented(R.KeysLoaded))
    def memory_load(who: Caller, agent: str, tenant: str | None = None, history: bool = False) -> dict[str, Any]:
        """Every key of an agent; content only while it may be used."""
        return warden.memory_load(tenant=tenant, agent=agent, history=history, caller=who)

    # -- the console and the API's own documentation, from the package's files ---------------

    def read_back_now(revocation_id: str, who: Principal) -> dict[str, Any]:
        """A committed revocation's read-back, for a caller waiting on it: its
        record, or the state it is in when the read-back could not run now
        (the scheduler goes on trying)."""
        return read_back_committed(warden, revocation_id, caller=who, http=http_path)

    install_console(app, warden, keys, read_back=read_back_now)

    @app.get("/healthz", tags=["operations"], response_model=None, responses={200: {"model": R.Health}})
    def health(request: Request) -> dict[str, Any]:
        """Whether the server answers; with a security or auditor key, the log's head too."""
        who = optional_caller(request)
        return {"ok": True, "head_seq": warden.head_seq()} if who is not None and may(who, "review") else {"ok": True}

    def scheduler_alive() -> bool | None:
        if not scheduler:
            return None
        lag = metrics.scheduler_lag()
        # alive: it has run, and not longer ago than a few of its intervals
        return jobs is not None and lag is not None and lag < 3 * scheduler_interval + 10

    install_operations(app, warden, scheduler_alive)

    if mcp_server is not None:
        app.mount(
            "/",
            McpAuth(
                mcp_server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True),
                keys,
                list(app.router.routes),
            ),
        )
    app.add_middleware(FairShare, lanes=app.state.lanes)
    app.add_middleware(RequestId)
    return with_body_limit(app, warden.limits.longest_body)


class _SelfReader:
    """The scheduler's read-back through this server's own query endpoint.

    One client for the server's life: a client made for each request sets
    up its TLS context each time, interpreter time every agent request
    would wait behind."""

    def __init__(self, base_url: str, key: str) -> None:
        self._base_url, self._key = base_url, key
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None

    def _open(self) -> httpx.Client:
        with self._lock:  # made again after a close: an app may be started more than once (tests)
            if self._client is None:
                self._client = httpx.Client(base_url=self._base_url, headers={"x-api-key": self._key}, timeout=30)
            return self._client

    def __call__(self, tenant: str, ids: list[str]) -> list[tuple[str, int]]:
        client = self._open()
        found: list[tuple[str, int]] = []
        for start in range(0, len(ids), 100):  # keep the request line short
            chunk = ids[start : start + 100]
            response = client.get(
                "/v1/memories", params={"tenant": tenant, "ids": chunk, "limit": len(chunk), "content": "false"}
            )
            response.raise_for_status()
            found.extend((m["memory_id"], m["version"]) for m in response.json()["memories"])
        return found

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
