"""What stands between a request and the Warden: keys, body size, and
errors answered as JSON that names the field."""

from __future__ import annotations

import secrets
from typing import Annotated, Any

import structlog
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from memwarden.engine import (
    BatchRefused,
    ChecksumMismatch,
    InvalidInput,
    KeyStore,
    MemoryErased,
    MemoryIdTaken,
    MemoryNotFound,
    Principal,
    RevocationNotFound,
    RevokedScope,
    StaleView,
    TooLarge,
)
from memwarden.events import DATABASE_ERRORS, EventRowDamaged, StorageError
from memwarden.projections import ProjectionDamaged
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = structlog.get_logger("memwarden.http")

# a seq in a query: bounded so that it always fits SQLite's integers
Seq = Annotated[int, Query(ge=0, le=2**62)]


class Denied(PermissionError):
    def __init__(self, status: int, problem: str) -> None:
        super().__init__(problem)
        self.status = status
        self.problem = problem


class BodyLimit:
    """Refuses request bodies over ``limit`` bytes before they are parsed,
    whether or not a Content-Length was sent."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _too_large(send, self.limit)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _BodyTooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except _BodyTooLarge:
            await _too_large(send, self.limit)


class _BodyTooLarge(Exception):
    pass


async def _too_large(send: Send, limit: int) -> None:
    body = (
        f'{{"error":"too_large","field":"body","problem":"the request body is larger than {limit} bytes"}}'
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


# -- what a key may do: each route asks before it calls the Warden ---------------


def require(who: Principal, *roles: str, request: Request | None = None) -> None:
    """403 unless the key's role is one of ``roles``."""
    if who.role not in roles:
        log.warning(
            "denied",
            status=403,
            key_id=who.key_id,
            role=who.role,
            path=request.url.path if request else None,
            reason="role",
        )
        raise Denied(403, f"the {who.role} role may not do this (needs {' or '.join(roles)})")


def tenant_ok(who: Principal, tenant: str | None, request: Request | None = None) -> None:
    """403 unless the key may read ``tenant``."""
    if not who.reads_tenant(tenant):
        log.warning(
            "denied",
            status=403,
            key_id=who.key_id,
            tenant=tenant,
            reason="tenant",
            path=request.url.path if request else None,
        )
        raise Denied(403, f"this key is not bound to tenant {tenant!r}")


def one_tenant(who: Principal, tenant: str | None, request: Request) -> str:
    """The tenant a Memory API call is in: named, or the key's only one."""
    if tenant is None:
        if who.role != "agent":
            raise InvalidInput("tenant", "is required for security and auditor keys")
        if len(who.tenants) != 1:
            raise InvalidInput("tenant", "this key has several tenants: name one (?tenant=)")
        tenant = who.tenants[0]
    tenant_ok(who, tenant, request)
    return tenant


def principal(request: Request) -> Principal:
    """The caller, from its ``x-api-key``; 401 without a valid one."""
    key = request.headers.get("x-api-key")
    if key is not None and not key.isascii():  # no key is: compare_digest would refuse to compare it
        key = ""
    state = request.app.state
    if key is not None and secrets.compare_digest(key, state.internal_key):
        return state.internal
    found = state.keys.authenticate(key)
    if found is None:
        # the key itself is never logged
        log.warning("denied", status=401, path=request.url.path, reason="no key" if not key else "unknown key")
        raise Denied(401, "a valid x-api-key header is required")
    return found


Caller = Annotated[Principal, Depends(principal)]


def error(status: int, code: str, problem: str, field: str | None = None, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": code, "field": field, "problem": problem, **extra}, status_code=status)


def with_body_limit(app: FastAPI, limit: int) -> FastAPI:
    """``app`` behind ``BodyLimit``: oversized bodies are refused before parsing."""
    app.add_middleware(BodyLimit, limit=limit)
    return app


def install_error_handlers(app: FastAPI) -> None:
    """Every refusal as JSON: a code, the field at fault and the problem."""

    @app.exception_handler(Denied)
    async def _denied(request: Request, exc: Denied) -> JSONResponse:
        code = "unauthorized" if exc.status == 401 else "forbidden"
        return error(exc.status, code, exc.problem, "x-api-key" if exc.status == 401 else None)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": ("body",), "msg": "invalid request"}
        field = ".".join(str(p) for p in first["loc"])
        return error(
            422,
            "invalid_input",
            str(first["msg"]),
            field,
            errors=[{"field": ".".join(str(p) for p in e["loc"]), "problem": str(e["msg"])} for e in errors],
        )

    @app.exception_handler(ChecksumMismatch)
    async def _checksum(request: Request, exc: ChecksumMismatch) -> JSONResponse:
        return error(422, "checksum_mismatch", exc.problem, exc.field, given=exc.given, actual=exc.actual)

    @app.exception_handler(BatchRefused)
    async def _batch(request: Request, exc: BatchRefused) -> JSONResponse:
        return error(422, "batch_refused", exc.problem, "memories", errors=exc.problems)

    @app.exception_handler(InvalidInput)
    async def _input(request: Request, exc: InvalidInput) -> JSONResponse:
        return error(422, "invalid_input", exc.problem, exc.field)

    @app.exception_handler(TooLarge)
    async def _too_big(request: Request, exc: TooLarge) -> JSONResponse:
        return error(413, "too_large", exc.problem, exc.field)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # FastAPI's own refusals (a body that is not JSON, an unknown route)
        # in the same shape as ours
        codes = {400: "invalid_input", 404: "not_found", 405: "method_not_allowed", 413: "too_large"}
        field = "body" if exc.status_code in (400, 413) else None
        problem = str(exc.detail)
        if exc.status_code == 400 and "parsing the body" in problem:
            problem = "the body is not valid JSON (UTF-8, nested at most a few hundred levels)"
        response = error(exc.status_code, codes.get(exc.status_code, "error"), problem, field)
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        return response

    @app.exception_handler(ValueError)
    async def _value(request: Request, exc: ValueError) -> JSONResponse:
        return error(422, "invalid_input", str(exc))

    @app.exception_handler(RevokedScope)
    async def _revoked(request: Request, exc: RevokedScope) -> JSONResponse:
        return error(409, "revoked_scope", str(exc), "fetched_at", revocation_id=exc.revocation_id)

    @app.exception_handler(MemoryErased)
    async def _erased(request: Request, exc: MemoryErased) -> JSONResponse:
        return error(409, "erased", str(exc), "memory_id")

    @app.exception_handler(MemoryIdTaken)
    async def _taken(request: Request, exc: MemoryIdTaken) -> JSONResponse:
        return error(409, "id_taken", str(exc), "memory_id")

    @app.exception_handler(PermissionError)
    async def _forbidden(request: Request, exc: PermissionError) -> JSONResponse:
        return error(403, "forbidden", str(exc))

    @app.exception_handler(MemoryNotFound)
    async def _missing(request: Request, exc: MemoryNotFound) -> JSONResponse:
        return error(404, "not_found", str(exc), "memory_id")

    @app.exception_handler(RevocationNotFound)
    async def _missing_rev(request: Request, exc: RevocationNotFound) -> JSONResponse:
        return error(404, "not_found", str(exc), "revocation_id")

    @app.exception_handler(StaleView)
    async def _stale(request: Request, exc: StaleView) -> JSONResponse:
        # the caller knows of a seq this view has not applied: not a fault of
        # the server, and worth retrying shortly
        response = error(409, "stale_view", str(exc), "min_seq")
        response.headers["Retry-After"] = "1"
        return response

    @app.exception_handler(ProjectionDamaged)
    async def _view_damaged(request: Request, exc: ProjectionDamaged) -> JSONResponse:
        log.error("projection_damaged", where=exc.where, error=str(exc), path=request.url.path)
        return error(503, "projection_damaged", str(exc))

    @app.exception_handler(EventRowDamaged)
    async def _damaged(request: Request, exc: EventRowDamaged) -> JSONResponse:
        # a ValueError, but not the caller's: the server's own log is damaged
        log.error("log_damaged", seq=exc.seq, error=str(exc), path=request.url.path)
        return error(503, "log_damaged", str(exc))

    @app.exception_handler(StorageError)
    async def _storage(request: Request, exc: StorageError) -> JSONResponse:
        log.error("storage_error", error=str(exc), path=request.url.path)
        return error(507, "storage", str(exc))

    async def _database(request: Request, exc: Exception) -> JSONResponse:
        log.error("database_error", error=str(exc), path=request.url.path)
        return error(503, "database", "the database could not answer; see the server log")

    for database_error in DATABASE_ERRORS:
        app.add_exception_handler(database_error, _database)


class McpAuth:
    """The MCP endpoint takes the same keys as the rest of the API."""

    def __init__(self, app: ASGIApp, keys: KeyStore) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") != "/mcp":
            # everything the API does not route ends here: answer in JSON like the rest
            body = b'{"error":"not_found","field":"path","problem":"no such endpoint"}'
            await send(
                {"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": body})
            return
        if scope["type"] == "http":
            key = dict(scope.get("headers") or []).get(b"x-api-key")
            if self.keys.authenticate(key.decode("latin-1") if key else None) is None:
                log.warning("denied", status=401, path=scope.get("path"), reason="mcp without a valid key")
                body = b'{"error":"unauthorized","field":"x-api-key","problem":"a valid x-api-key header is required"}'
                await send(
                    {"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"application/json")]}
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
