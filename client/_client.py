"""The HTTP client: ``memwarden.engine.Memories`` over a server, as its key.

Typed results (the engine's own ``MemoryView``, ``SaveResult``, ...), the
engine's errors raised as the same classes (``memwarden.engine.refusal_from``),
answers believed only once they answer what was asked (``_checks``),
read-your-writes (the positions of the client's last writes are carried to
each later read as ``min_seq``), redirects followed only within the base
URL's origin, and retries only where sending a request again is safe:
reads, and saves, which the client sends under an event id of its own.

An agent key is answered consistency tokens, which cannot be ordered, so
"the newest" is kept by when the answers came: a write's position replaces
every position whose answer came before that write was sent (its commit
is later than theirs); the positions of writes in flight together are all
kept, and a read sends each (at most ``MAX_GIVEN``), the server waiting
for the newest.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import httpx
from memwarden.engine import (
    DueItem,
    ErasureResult,
    Found,
    InvalidInput,
    MemoryView,
    Page,
    RevocationResult,
    SaveResult,
    StaleView,
    VerifyResult,
    refusal_from,
)
from memwarden.engine._tokens import MAX_GIVEN, MinSeq, Position

from . import _calls as calls
from ._calls import Call
from ._checks import UntrustedAnswer

# answers worth asking again for: the server or a proxy in front of it was
# briefly unable to answer, or the view was behind the caller's last write
RETRY_STATUS = frozenset({502, 503, 504})
# redirects followed for one request (each within the base URL's origin)
MAX_REDIRECTS = 5


class _Base:
    def __init__(self, base_url: str, key: str, *, retries: int, backoff: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.origin = _origin(httpx.URL(self.base_url))
        self.key = key
        self.retries = retries
        self.backoff = backoff
        self._clock = 0  # counts sends and answers: the order this client saw them in
        self._kept: list[tuple[int, Position]] = []  # (when its answer came, a write's position)

    @property
    def seq(self) -> Position | None:
        """The position of this client's last answered write (a token for an agent key), or None."""
        return self._kept[-1][1] if self._kept else None

    @property
    def positions(self) -> tuple[Position, ...]:
        """What the next read sends as ``min_seq``: the last write's position, and
        those of writes answered while it was in flight."""
        return tuple(p for _, p in self._kept)

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def _keep(self, position: Position, sent: int) -> None:
        """A write sent at ``sent`` was answered with ``position``: it follows every
        write answered before it was sent, whose positions it replaces."""
        later = [(at, p) for at, p in self._kept if at > sent]
        self._kept = [*later[-(MAX_GIVEN - 1) :], (self._tick(), position)]

    def _forget(self, positions: Sequence[Position]) -> None:
        self._kept = [(at, p) for at, p in self._kept if p not in positions]

    def _fresh(self, call: Call) -> tuple[Call, tuple[Position, ...]]:
        """``call`` with the kept positions as its ``min_seq`` (unless the caller gave
        one), and what was added: a GET in its query, a search in its body."""
        kept = self.positions
        if not kept:
            return call, ()
        given: Any = list(kept) if len(kept) > 1 else kept[0]
        if call.fresh and call.params.get("min_seq") is None:
            return dataclasses.replace(call, params={**call.params, "min_seq": given}), kept
        if call.fresh_body and call.body is not None and call.body.get("min_seq") is None:
            return dataclasses.replace(call, body={**call.body, "min_seq": given}), kept
        return call, ()

    def _request(self, call: Call) -> dict[str, Any]:
        params = {k: v for k, v in call.params.items() if v is not None}
        return {"method": call.method, "url": call.path, "params": params, "json": call.body}

    def _redirected(self, response: httpx.Response, hops: int) -> httpx.Request:
        """The request a redirect asks for, if the client may send it: the same
        method (a write is never turned into a read) within the base URL's
        origin (the key is sent with it); otherwise ``UntrustedAnswer``."""
        target = response.next_request
        where = response.headers.get("location", "")[:200]
        if target is None:
            raise UntrustedAnswer("location", f"of a {response.status_code} redirect is missing or unusable: {where!r}")
        if _origin(target.url) != self.origin:
            raise UntrustedAnswer(
                "location",
                f"redirects to {where!r}, outside {self.base_url}: the key is sent only to the base URL's "
                "origin (give the address the server is at as base_url)",
            )
        if target.method != response.request.method:
            raise UntrustedAnswer(
                "location", f"turns a {response.request.method} into a {target.method} ({response.status_code})"
            )
        if hops >= MAX_REDIRECTS:
            raise UntrustedAnswer("location", f"redirects more than {MAX_REDIRECTS} times")
        return target

    def _answer(self, call: Call, response: httpx.Response, sent: int, added: tuple[Position, ...]) -> Any:
        try:
            data = response.json()
        except ValueError:
            data = {"error": "error", "problem": response.text[:500]}
        if response.status_code >= 400:
            refused = refusal_from(response.status_code, data)
            ahead = isinstance(refused, StaleView) and refused.ahead
            unknown = isinstance(refused, InvalidInput) and refused.field == "min_seq"
            if added and (ahead or unknown):
                # positions beyond the log's head (a store restored from an older backup),
                # or that this store did not issue (another store behind the same address):
                # no read would ever be answered with them, so they cost this one read
                self._forget(added)
            raise refused
        if not 200 <= response.status_code < 300:
            raise UntrustedAnswer("status", f"{response.status_code} is no answer of this API")
        result = call.parse(data)
        if call.wrote is not None:
            positions = call.wrote(data)
            if positions:
                self._keep(positions[-1], sent)
        return result

    def _again(self, call: Call, attempt: int, response: httpx.Response | None) -> float | None:
        """How long to wait before sending ``call`` again, or None: give up."""
        if not call.idempotent or attempt >= self.retries:
            return None
        if response is not None:
            stale = response.status_code == 409 and response.headers.get("retry-after") is not None
            if response.status_code not in RETRY_STATUS and not stale:
                return None
        return self.backoff * 2**attempt


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, url.host, url.port or default


class Client(_Base):
    """memwarden over HTTP, as one key (blocking)."""

    def __init__(
        self,
        base_url: str,
        key: str,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.1,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, key, retries=retries, backoff=backoff)
        self.http = httpx.Client(
            base_url=self.base_url, headers={"x-api-key": key}, timeout=timeout, transport=transport
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, call: Call) -> httpx.Response:
        response = self.http.request(**self._request(call))
        hops = 0
        while response.is_redirect:
            target = self._redirected(response, hops)
            response = self.http.send(target)
            hops += 1
        return response

    def _run(self, call: Call) -> Any:
        call, added = self._fresh(call)
        sent = self._tick()
        attempt = 0
        while True:
            response = None
            try:
                response = self._send(call)
            except httpx.TransportError:
                if self._again(call, attempt, None) is None:
                    raise
            else:
                if self._again(call, attempt, response) is None or response.status_code < 400:
                    return self._answer(call, response, sent, added)
            time.sleep(self._again(call, attempt, response) or 0)
            attempt += 1

    # -- memwarden.engine.Memories ---------------------------------------------------------

    def save(self, **fields: Any) -> SaveResult:
        return self._run(calls.save(fields))

    def save_many(self, memories: Iterable[Mapping[str, Any]]) -> list[SaveResult]:
        return self._run(calls.save_many(memories))

    def get(self, memory_id: str, *, tenant: str | None = None, min_seq: MinSeq = None) -> MemoryView:
        return self._run(calls.get(memory_id, tenant, min_seq))

    def query(self, *, tenant: str, **filters: Any) -> list[MemoryView]:
        return self._run(calls.query(tenant, filters))

    def search(
        self, *, tenant: str, query: str | None = None, vector: Sequence[float] | None = None, **options: Any
    ) -> Page[Found]:
        """``Warden.search`` over ``POST /v1/memories/search`` (options: limit, mode,
        weights, the scope filters, include_hidden, min_seq, with_content)."""
        return self._run(calls.search(tenant, query, vector, options))

    def verify(self, memory_id: str, *, tenant: str | None = None, accept: bool = False) -> VerifyResult:
        return self._run(calls.verify(memory_id, tenant, accept))

    def due(self, *, limit: int | None = None) -> list[DueItem]:
        return self._run(calls.due(limit))

    def explain(self, memory_id: str, *, tenant: str | None = None, as_of: str | None = None) -> dict[str, Any]:
        return self._run(calls.explain(memory_id, tenant, as_of))

    def erase(
        self, *, memory_id: str | None = None, user: str | None = None, tenant: str | None = None, reason: str
    ) -> ErasureResult:
        return self._run(calls.erase(memory_id, user, tenant, reason))

    def revoke(self, selector: Mapping[str, Any], *, reason: str) -> RevocationResult:
        return self._run(calls.revoke(selector, reason))

    def preview_revocation(self, selector: Mapping[str, Any]) -> dict[str, Any]:
        return self._run(calls.preview_revocation(selector))

    def revocation(self, revocation_id: str) -> dict[str, Any]:
        return self._run(calls.revocation(revocation_id))

    def revocations(self, *, limit: int = 100, offset: int = 0) -> list[dict[str, Any]]:
        return self._run(calls.revocations(limit, offset))

    def set_policy(self, policy: str, version: int | str) -> Position | None:
        return self._run(calls.set_policy(policy, version))

    def policies(self) -> dict[str, int | str]:
        return self._run(calls.policies())

    def tenants(self) -> list[str]:
        return self._run(calls.tenants())

    def memory_save(self, *, agent: str, key: str, content: str, tenant: str | None = None) -> dict[str, Any]:
        return self._run(calls.memory_save(agent, key, content, tenant))

    def memory_load(self, *, agent: str, tenant: str | None = None, history: bool = False) -> dict[str, Any]:
        return self._run(calls.memory_load(agent, tenant, history))

    def audit_head(self) -> dict[str, Any]:
        return self._run(calls.audit_head())


class AsyncClient(_Base):
    """memwarden over HTTP, as one key (asyncio): ``Client``'s operations, awaited."""

    def __init__(
        self,
        base_url: str,
        key: str,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.1,
        transport: httpx.AsyncBaseTransport | None = None,
        max_in_flight: int = 32,
    ) -> None:
        super().__init__(base_url, key, retries=retries, backoff=backoff)
        self.http = httpx.AsyncClient(
            base_url=self.base_url, headers={"x-api-key": key}, timeout=timeout, transport=transport
        )
        # requests past this many wait here, each woken once, rather than in
        # the connection pool's queue, which httpcore scans whole for every
        # request it assigns (a cost that grows with the square of those queued)
        self._slots = asyncio.Semaphore(max_in_flight)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, call: Call) -> httpx.Response:
        response = await self.http.request(**self._request(call))
        hops = 0
        while response.is_redirect:
            target = self._redirected(response, hops)
            response = await self.http.send(target)
            hops += 1
        return response

    async def _run(self, call: Call) -> Any:
        call, added = self._fresh(call)
        sent = self._tick()
        attempt = 0
        while True:
            response = None
            try:
                async with self._slots:
                    response = await self._send(call)
            except httpx.TransportError:
                if self._again(call, attempt, None) is None:
                    raise
            else:
                if self._again(call, attempt, response) is None or response.status_code < 400:
                    return self._answer(call, response, sent, added)
            await asyncio.sleep(self._again(call, attempt, response) or 0)
            attempt += 1

    async def save(self, **fields: Any) -> SaveResult:
        return await self._run(calls.save(fields))

    async def save_many(self, memories: Iterable[Mapping[str, Any]]) -> list[SaveResult]:
        return await self._run(calls.save_many(memories))

    async def get(self, memory_id: str, *, tenant: str | None = None, min_seq: MinSeq = None) -> MemoryView:
        return await self._run(calls.get(memory_id, tenant, min_seq))

    async def query(self, *, tenant: str, **filters: Any) -> list[MemoryView]:
        return await self._run(calls.query(tenant, filters))

    async def search(
        self, *, tenant: str, query: str | None = None, vector: Sequence[float] | None = None, **options: Any
    ) -> Page[Found]:
        """``Warden.search`` over ``POST /v1/memories/search`` (options: limit, mode,
        weights, the scope filters, include_hidden, min_seq, with_content)."""
        return await self._run(calls.search(tenant, query, vector, options))

    async def verify(self, memory_id: str, *, tenant: str | None = None, accept: bool = False) -> VerifyResult:
        return await self._run(calls.verify(memory_id, tenant, accept))

    async def due(self, *, limit: int | None = None) -> list[DueItem]:
        return await self._run(calls.due(limit))

    async def explain(self, memory_id: str, *, tenant: str | None = None, as_of: str | None = None) -> dict[str, Any]:
        return await self._run(calls.explain(memory_id, tenant, as_of))

    async def erase(
        self, *, memory_id: str | None = None, user: str | None = None, tenant: str | None = None, reason: str
    ) -> ErasureResult:
        return await self._run(calls.erase(memory_id, user, tenant, reason))

    async def revoke(self, selector: Mapping[str, Any], *, reason: str) -> RevocationResult:
        return await self._run(calls.revoke(selector, reason))

    async def preview_revocation(self, selector: Mapping[str, Any]) -> dict[str, Any]:
        return await self._run(calls.preview_revocation(selector))

    async def revocation(self, revocation_id: str) -> dict[str, Any]:
        return await self._run(calls.revocation(revocation_id))

    async def revocations(self, *, limit: int = 100, offset: int = 0) -> list[dict[str, Any]]:
        return await self._run(calls.revocations(limit, offset))

    async def set_policy(self, policy: str, version: int | str) -> Position | None:
        return await self._run(calls.set_policy(policy, version))

    async def policies(self) -> dict[str, int | str]:
        return await self._run(calls.policies())

    async def tenants(self) -> list[str]:
        return await self._run(calls.tenants())

    async def memory_save(self, *, agent: str, key: str, content: str, tenant: str | None = None) -> dict[str, Any]:
        return await self._run(calls.memory_save(agent, key, content, tenant))

    async def memory_load(self, *, agent: str, tenant: str | None = None, history: bool = False) -> dict[str, Any]:
        return await self._run(calls.memory_load(agent, tenant, history))

    async def audit_head(self) -> dict[str, Any]:
        return await self._run(calls.audit_head())
