"""What stands between a request and the Warden: keys, body size, and
errors answered as JSON that names the field."""

from __future__ import annotations

import asyncio
import json
import secrets
from typing import Annotated, Any
from urllib.parse import unquote_to_bytes

import structlog
from fastapi import Depends, FastAPI, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import APIKeyHeader
from memwarden.engine import InvalidInput, KeyStore, Principal, Unauthorized, answer, field_problems
from memwarden.events import Refusal, get_logger
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = get_logger("memwarden.http")

# a seq in a query: bounded so that it always fits SQLite's integers
Seq = Annotated[int, Query(ge=0, le=2**62)]

# a read's min_seq: the positions earlier answers gave (``memwarden.engine._tokens``), checked
# by the engine's ``Positions``, which names the field
MinSeq = Annotated[
    list[str] | None,
    Query(
        description="at least as fresh as these: the seq an earlier answer gave (a consistency token, "
        "mwt_..., for an agent key; security and auditor keys may give seqs). Repeat it for several "
        "(at most 32): the read waits for the newest",
    ),
]


# a body past this many bytes is large: one at a time is read, parsed and
# served (the rest wait their turn), so that the server's peak memory is
# bounded by its largest request, not by how many clients send one together,
# and so that one batch's checks, not several, take the interpreter from the
# agents' requests
LARGE_BODY = 1024 * 1024
LARGE_AT_ONCE = 1


class BodyLimit:
    """Refuses request bodies over ``limit`` bytes before they are parsed,
    whether or not a Content-Length was sent; lets ``at_once`` large bodies
    (over ``large`` bytes, declared or counted as they arrive) in at a time."""

    def __init__(self, app: ASGIApp, limit: int, *, large: int = LARGE_BODY, at_once: int = LARGE_AT_ONCE) -> None:
        self.app = app
        self.limit = limit
        self.large = large
        self.at_once = at_once
        self._slots: asyncio.Semaphore | None = None  # made in the server's loop, on the first large body

    def slots(self) -> asyncio.Semaphore:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.at_once)
        return self._slots

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        size = int(declared) if declared is not None and declared.isdigit() else None
        if size is not None and size > self.limit:
            await _too_large(send, self.limit)
            return
        seen = 0
        holding = exceeded = started = False
        if size is not None and size > self.large:
            await self.slots().acquire()
            holding = True

        async def limited() -> Message:
            nonlocal seen, holding, exceeded
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    exceeded = True
                    raise _BodyTooLarge
                if seen > self.large and not holding:
                    await self.slots().acquire()
                    holding = True
            return message

        async def answering(message: Message) -> None:
            nonlocal started
            # a body past the limit (sent chunked, with no length to refuse it
            # by) fails the app's reading of it, which the app may answer as
            # a body it could not parse: the 413 below is the answer instead
            if exceeded and not started:
                return
            started = True
            await send(message)

        try:
            await self.app(scope, limited, answering)
        except _BodyTooLarge:
            pass
        finally:
            if holding:
                self.slots().release()
        if exceeded and not started:
            await _too_large(send, self.limit)


class PathText:
    """Refuses a request whose path or query escapes bytes that are not
    UTF-8 (``%FF``, ``%ED%A0%80``): decoded, they would become U+FFFD, and two
    names the caller sent differently would reach the log as one."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for field, raw in (("path", scope.get("raw_path") or b""), ("query", scope.get("query_string") or b"")):
                try:
                    unquote_to_bytes(raw.replace(b"+", b" ")).decode("utf-8")
                except UnicodeDecodeError:
                    found = answer(InvalidInput(field, "escapes bytes that are not UTF-8 text"))
                    assert found is not None
                    body = json.dumps(found.body()).encode()
                    await send(
                        {
                            "type": "http.response.start",
                            "status": found.status,
                            "headers": [
                                (b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()),
                            ],
                        }
                    )
                    await send({"type": "http.response.body", "body": body})
                    return
        await self.app(scope, receive, send)


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


# -- who asks: the key names the caller; what it may do is the engine's to decide ---------


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
        raise Unauthorized()
    structlog.contextvars.bind_contextvars(key_id=found.key_id)
    lanes = getattr(state, "lanes", None)
    if lanes is not None and key is not None:
        lanes.known(key, found.key_id)
    return found


def optional_caller(request: Request) -> Principal | None:
    """The caller a request's key names (``x-api-key``, or ``Authorization:
    Bearer``, as Prometheus sends a credential), or None without a valid
    one: for the operator's endpoints, whose answer is for anyone and whose
    figures are for staff."""
    key = request.headers.get("x-api-key")
    if key is None:
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        key = credentials.strip() if scheme.lower() == "bearer" else None
    return request.app.state.keys.authenticate(key) if key else None


API_KEY = APIKeyHeader(name="x-api-key", auto_error=False, description="An API key: `memwarden keys create`.")


def _caller(request: Request, _key: Annotated[str | None, Security(API_KEY)] = None) -> Principal:
    return principal(request)


Caller = Annotated[Principal, Depends(_caller)]


def error(status: int, code: str, problem: str, field: str | None = None, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": code, "field": field, "problem": problem, **extra}, status_code=status)


def answered(exc: BaseException, path: str) -> JSONResponse:
    """An engine error as the API answers it (``memwarden.engine.answer``)."""
    found = answer(exc)
    if found is None:
        raise exc
    if found.status >= 500:
        log.error(found.code, error=str(exc), path=path)
    elif found.status in (401, 403):
        log.warning("denied", status=found.status, path=path, reason=found.problem)
    response = JSONResponse(found.body(), status_code=found.status)
    if found.code == "stale_view" and not found.details.get("ahead"):
        # the caller knows of a seq this view has not applied: worth retrying shortly
        # (not one beyond the log's head, which no wait brings)
        response.headers["Retry-After"] = "1"
    return response


async def known_query_only(request: Request) -> None:
    """A query parameter the API's route does not take is refused, named: a
    misspelt filter (``projcet=``) would otherwise be dropped and widen the
    answer without a word, where a body's unknown field is refused already."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not request.url.path.startswith("/v1/"):
        return  # the console's pages read their forms' fields themselves
    # by the route's id in its own app's table: the app holds its routes, so an id is not reused under it
    known: dict[int, frozenset[str]] = request.app.state.__dict__.setdefault("query_names", {})
    taken = known.get(id(route))
    if taken is None:
        taken = known[id(route)] = _query_names(route)
    for name in request.query_params:
        if name not in taken:
            raise RequestValidationError(
                [{"loc": ("query", name), "msg": "is not a parameter of this route", "type": "extra_forbidden"}]
            )


def _query_names(route: APIRoute) -> frozenset[str]:
    names: set[str] = set()
    pending = [route.dependant]
    while pending:
        dependant = pending.pop()
        names.update(param.alias for param in dependant.query_params)
        pending.extend(dependant.dependencies)
    return frozenset(names)


def with_body_limit(app: FastAPI, limit: int) -> FastAPI:
    """``app`` behind ``BodyLimit``: oversized bodies are refused before parsing."""
    app.add_middleware(BodyLimit, limit=limit)
    app.add_middleware(PathText)
    return app


def install_error_handlers(app: FastAPI) -> None:
    """Every refusal as JSON: a code, the field at fault and the problem."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors() or [{"loc": ("body",), "msg": "invalid request", "type": ""}]
        if _not_json(errors):
            return error(
                400, "invalid_input", "the body is not valid JSON (UTF-8, nested at most a few hundred levels)", "body"
            )
        found = field_problems(errors, request=True, whole="body")
        return error(
            422,
            "invalid_input",
            found[0][1],
            found[0][0],
            errors=[{"field": field, "problem": problem} for field, problem in found],
        )

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

    async def _refused(request: Request, exc: Exception) -> JSONResponse:
        return answered(exc, request.url.path)

    for kind in (Refusal, ValueError):
        app.add_exception_handler(kind, _refused)


def _not_json(errors: Any) -> bool:
    """Whether the body could not be read as JSON at all (400, not 422)."""
    return any(e.get("type") == "json_invalid" for e in errors)


class McpAuth:
    """The MCP endpoint takes the same keys as the rest of the API. It is
    mounted at the root, so every request no route takes ends here: a path
    a route serves with other methods is 405 with ``Allow``, any other 404."""

    def __init__(self, app: ASGIApp, keys: KeyStore, routes: list[BaseRoute]) -> None:
        self.app = app
        self.keys = keys
        self.routes = _flat(routes)

    def allowed(self, scope: Scope) -> list[str]:
        """The methods of the resource the path names: the routes of the
        first path template that matches it, as the router chose it. Not
        every template that matches: ``/v1/memories/x/verify`` is the verify
        route (POST), though a memory id may also end in ``/verify`` (GET
        ``/v1/memories/{id}``), and ``Allow`` lists what the API documents there."""
        resource: str | None = None
        methods: set[str] = set()
        for route in self.routes:
            if route.matches(scope)[0] is Match.NONE:
                continue
            resource = resource or route.path
            if route.path == resource:
                methods.update(route.methods or ())
        return sorted(methods)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") != "/mcp":
            allowed = self.allowed(scope)
            if allowed:
                await _answer(
                    send,
                    405,
                    "method_not_allowed",
                    "method",
                    f"{scope.get('method')} is not allowed here",
                    [(b"allow", ", ".join(allowed).encode())],
                )
            else:
                await _answer(send, 404, "not_found", "path", "no such endpoint")
            return
        if scope["type"] == "http":
            key = dict(scope.get("headers") or []).get(b"x-api-key")
            if self.keys.authenticate(key.decode("latin-1") if key else None) is None:
                log.warning("denied", status=401, path=scope.get("path"), reason="mcp without a valid key")
                await _answer(send, 401, "unauthorized", "x-api-key", "a valid x-api-key header is required")
                return
        await self.app(scope, receive, send)


def _flat(routes: list[BaseRoute]) -> list[Route]:
    """Every route in the order the router tries them, those of an included
    router (the console's) among them: FastAPI keeps an included router
    whole (``original_router``), its routes' paths already prefixed."""
    flat: list[Route] = []
    for route in routes:
        if isinstance(route, Route):
            flat.append(route)
        elif (included := getattr(route, "original_router", None)) is not None:
            flat.extend(_flat(list(included.routes)))
    return flat


async def _answer(
    send: Send,
    status: int,
    code: str,
    field: str,
    problem: str,
    headers: list[tuple[bytes, bytes]] = (),  # type: ignore[assignment]
) -> None:
    body = json.dumps({"error": code, "field": field, "problem": problem}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})
