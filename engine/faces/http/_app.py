"""The HTTP server: the Warden over FastAPI, with API keys and roles.

Every endpoint names its caller (from ``x-api-key``) and calls the Warden,
which decides what that caller may do (``memwarden.engine._rights``): no
role is checked and no tenant narrowed here.
"""

from __future__ import annotations

import dataclasses
import secrets
from typing import Any

from fastapi import Depends, FastAPI, Request
from memwarden.engine import KeyStore, Principal, Warden, may, read_back_committed
from memwarden.events import get_logger

from ..console import install_console
from . import _responses as R
from ._audit import install_audit_routes
from ._embedded import Embedded, SelfReader
from ._fair import PER_LANE, FairShare, Lanes
from ._guard import McpAuth, install_error_handlers, known_query_only, optional_caller, with_body_limit
from ._memories import install_memory_api_routes, install_memory_routes
from ._ops import RequestId, install_operations
from ._security import install_security_routes, install_sink_routes

log = get_logger("memwarden.http")


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
    http_path = SelfReader(self_url, internal_key) if self_url else None
    mcp_server = None
    if mcp:
        from ..mcp import build_server

        mcp_server = build_server(warden, authenticate=keys.authenticate, allow_local_sources=allow_local_sources)
    embedded = Embedded(
        warden, scheduler=scheduler, interval=scheduler_interval, http_path=http_path, mcp_server=mcp_server
    )

    app = FastAPI(
        title="memwarden",
        version="0.1.0",
        summary="Decides whether an AI agent may use a remembered fact now.",
        lifespan=embedded.lifespan,
        docs_url=None,  # served below from the package's own files: they work offline
        redoc_url=None,
        dependencies=[Depends(known_query_only)],
    )
    app.state.warden = warden
    app.state.keys = keys

    app.state.lanes = Lanes(per_lane=per_key)
    app.state.internal_key = internal_key
    app.state.internal = internal
    install_error_handlers(app)

    def read_back_now(revocation_id: str, who: Principal) -> dict[str, Any]:
        """A committed revocation's read-back, for a caller waiting on it: its
        record, or the state it is in when the read-back could not run now
        (the scheduler goes on trying)."""
        return read_back_committed(warden, revocation_id, caller=who, http=http_path)

    # routes are matched (and documented) in the order they are added: the search
    # comes before a memory's own routes, which take the rest of the path
    install_memory_routes(app, warden, allow_local_sources=allow_local_sources)
    install_security_routes(app, warden, read_back_now)
    install_sink_routes(app, warden)
    install_audit_routes(app, warden)
    install_memory_api_routes(app, warden)

    # the console and the API's own documentation, from the package's files
    install_console(app, warden, keys, read_back=read_back_now)

    @app.get("/healthz", tags=["operations"], response_model=None, responses={200: {"model": R.Health}})
    def health(request: Request) -> dict[str, Any]:
        """Whether the server answers; with a security or auditor key, the log's head too."""
        who = optional_caller(request)
        return {"ok": True, "head_seq": warden.head_seq()} if who is not None and may(who, "review") else {"ok": True}

    install_operations(app, warden, embedded.scheduler_alive)

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
