"""What an operator's tools read from a running server: Prometheus metrics
at ``/metrics``, readiness at ``/readyz`` (beside ``/healthz``), and a
request id, in and out as ``x-request-id``, bound into every log line of
its request. The probes are kept out of the OpenAPI document: they are the
load balancer's and Prometheus's, not an API client's.

Every figure here counts what all tenants do (the log's head, saves,
revocations, gate decisions), so the figures are for a security or auditor
key (``x-api-key``, or ``Authorization: Bearer``, as Prometheus's scrape
config sends one): ``/metrics`` refuses anyone else, and the probes answer
anyone whether the server is up and ready, without the figures."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from memwarden.engine import Forbidden, Unauthorized, Warden, may, metrics
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._guard import optional_caller

# a caller's id is kept only when it is short and printable: it goes into every log line
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


class RequestId:
    """ASGI middleware: the request's ``x-request-id`` (or a new one) bound
    into structlog's context for the request and sent back."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        request_id = given if _REQUEST_ID.fullmatch(given) else secrets.token_hex(8)

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
            await send(message)

        with structlog.contextvars.bound_contextvars(request_id=request_id):
            await self.app(scope, receive, sending)


def install_operations(app: FastAPI, warden: Warden, scheduler_alive: Callable[[], bool | None]) -> None:
    """``/metrics`` and ``/readyz``. ``scheduler_alive``: None when the
    server runs without its scheduler (then readiness does not ask)."""

    @app.get("/metrics", include_in_schema=False)
    def scrape(request: Request) -> Response:
        who = optional_caller(request)
        if who is None:
            raise Unauthorized("/metrics needs a security or auditor key (x-api-key, or Authorization: Bearer)")
        if not may(who, "review"):
            raise Forbidden("/metrics counts every tenant's writes: it is for security and auditor keys")
        with warden.reading() as view:
            metrics.VIEW_POSITION.set(view.position())
        metrics.HEAD.set(warden.head_seq())
        lag = metrics.scheduler_lag()
        if lag is not None:
            metrics.SCHEDULER_LAG.set(lag)
        return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)

    @app.get("/readyz", include_in_schema=False)
    def ready(request: Request) -> JSONResponse:
        checks: dict[str, Any] = {}
        try:
            head = warden.head_seq()
            with warden.reading() as view:
                position = view.position()
            checks["store"] = True
            checks["view_caught_up"] = position >= head
            checks["view_position"], checks["head_seq"] = position, head
        except Exception as exc:  # an unreachable store is the answer, not an error
            checks["store"], checks["view_caught_up"] = False, False
            checks["problem"] = type(exc).__name__
        alive = scheduler_alive()
        if alive is not None:
            checks["scheduler_alive"] = alive
        ok = bool(checks["store"] and checks["view_caught_up"] and alive is not False)
        who = optional_caller(request)
        if who is None or not may(who, "review"):  # the positions count every tenant's writes
            checks.pop("view_position", None)
            checks.pop("head_seq", None)
        return JSONResponse({"ready": ok, **checks}, status_code=200 if ok else 503)
