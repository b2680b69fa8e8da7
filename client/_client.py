"""The HTTP client: ``memwarden.engine.Memories`` over a server, as its key.

Typed results (the engine's own ``MemoryView``, ``SaveResult``, ...), the
engine's errors raised as the same classes (``memwarden.engine.refusal_from``),
read-your-writes (every write's seq is carried to the next read as
``min_seq``), and retries only where sending a request again is safe: reads,
and saves, which the client sends under an event id of its own.
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
    MemoryView,
    RevocationResult,
    SaveResult,
    VerifyResult,
    refusal_from,
)

from . import _calls as calls
from ._calls import Call

# answers worth asking again for: the server or a proxy in front of it was
# briefly unable to answer, or the view was behind the caller's last write
RETRY_STATUS = frozenset({502, 503, 504})


class _Base:
    def __init__(self, base_url: str, key: str, *, retries: int, backoff: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.key = key
        self.retries = retries
        self.backoff = backoff
        self.seq = 0  # the highest seq this client's writes were answered with

    def _request(self, call: Call) -> dict[str, Any]:
        params = {k: v for k, v in call.params.items() if v is not None}
        if call.fresh and self.seq and "min_seq" not in params:
            params["min_seq"] = self.seq  # read your writes, on any node
        return {"method": call.method, "url": call.path, "params": params, "json": call.body}

    def _fresh(self, call: Call) -> Call:
        """A search's body carries ``min_seq`` (it is a POST: no query string to add it to)."""
        if self.seq and call.body is not None and "min_seq" not in call.body:
            return dataclasses.replace(call, body={**call.body, "min_seq": self.seq})
        return call

    def _answer(self, call: Call, response: httpx.Response) -> Any:
        try:
            data = response.json()
        except ValueError:
            data = {"error": "error", "problem": response.text[:500]}
        if response.status_code >= 400:
            raise refusal_from(response.status_code, data)
        if call.wrote is not None:
            self.seq = max([self.seq, *call.wrote(data)])
        return call.parse(data)

    def _again(self, call: Call, attempt: int, response: httpx.Response | None) -> float | None:
        """How long to wait before sending ``call`` again, or None: give up."""
        if not call.idempotent or attempt >= self.retries:
            return None
        if response is not None:
            stale = response.status_code == 409 and response.headers.get("retry-after") is not None
            if response.status_code not in RETRY_STATUS and not stale:
                return None
        return self.backoff * 2**attempt


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

    def _run(self, call: Call) -> Any:
        attempt = 0
        while True:
            response = None
            try:
                response = self.http.request(**self._request(call))
            except httpx.TransportError:
                if self._again(call, attempt, None) is None:
                    raise
            else:
                if self._again(call, attempt, response) is None or response.status_code < 400:
                    return self._answer(call, response)
            time.sleep(self._again(call, attempt, response) or 0)
            attempt += 1

    # -- memwarden.engine.Memories ---------------------------------------------------------

    def save(self, **fields: Any) -> SaveResult:
        return self._run(calls.save(fields))

    def save_many(self, memories: Iterable[Mapping[str, Any]]) -> list[SaveResult]:
        return self._run(calls.save_many(memories))

    def get(self, memory_id: str, *, tenant: str | None = None, min_seq: int | None = None) -> MemoryView:
        return self._run(calls.get(memory_id, tenant, min_seq))

    def query(self, *, tenant: str, **filters: Any) -> list[MemoryView]:
        return self._run(calls.query(tenant, filters))

    def search(
        self, *, tenant: str, query: str | None = None, vector: Sequence[float] | None = None, **options: Any
    ) -> list[Found]:
        """``Warden.search`` over ``POST /v1/memories/search`` (options: limit, mode,
        weights, the scope filters, include_hidden, min_seq, with_content)."""
        return self._run(self._fresh(calls.search(tenant, query, vector, options)))

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

    def set_policy(self, policy: str, version: int | str) -> int:
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

    async def _run(self, call: Call) -> Any:
        attempt = 0
        while True:
            response = None
            try:
                async with self._slots:
                    response = await self.http.request(**self._request(call))
            except httpx.TransportError:
                if self._again(call, attempt, None) is None:
                    raise
            else:
                if self._again(call, attempt, response) is None or response.status_code < 400:
                    return self._answer(call, response)
            await asyncio.sleep(self._again(call, attempt, response) or 0)
            attempt += 1

    async def save(self, **fields: Any) -> SaveResult:
        return await self._run(calls.save(fields))

    async def save_many(self, memories: Iterable[Mapping[str, Any]]) -> list[SaveResult]:
        return await self._run(calls.save_many(memories))

    async def get(self, memory_id: str, *, tenant: str | None = None, min_seq: int | None = None) -> MemoryView:
        return await self._run(calls.get(memory_id, tenant, min_seq))

    async def query(self, *, tenant: str, **filters: Any) -> list[MemoryView]:
        return await self._run(calls.query(tenant, filters))

    async def search(
        self, *, tenant: str, query: str | None = None, vector: Sequence[float] | None = None, **options: Any
    ) -> list[Found]:
        """``Warden.search`` over ``POST /v1/memories/search`` (options: limit, mode,
        weights, the scope filters, include_hidden, min_seq, with_content)."""
        return await self._run(self._fresh(calls.search(tenant, query, vector, options)))

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

    async def set_policy(self, policy: str, version: int | str) -> int:
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
