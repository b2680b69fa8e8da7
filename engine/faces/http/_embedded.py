"""What runs beside the HTTP server for its life: the embedded scheduler,
MCP's session manager, and the scheduler's read-back through this server's
own query endpoint (``SelfReader``)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx
from fastapi import FastAPI
from memwarden.engine import Scheduler, Warden, metrics


class Embedded:
    """The app's lifespan: it starts what runs beside the server and stops
    it, and tells the readiness probe whether the scheduler is alive."""

    def __init__(
        self,
        warden: Warden,
        *,
        scheduler: bool,
        interval: float,
        http_path: SelfReader | None,
        mcp_server: Any | None,
    ) -> None:
        self.warden = warden
        self.scheduler = scheduler
        self.interval = interval
        self.http_path = http_path
        self.mcp_server = mcp_server
        self.jobs: Scheduler | None = None

    @contextlib.asynccontextmanager
    async def lifespan(self, app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if self.http_path is not None:
                stack.callback(self.http_path.close)
            if self.mcp_server is not None:
                await stack.enter_async_context(self.mcp_server.session_manager.run())
            if self.scheduler:
                self.jobs = Scheduler(
                    self.warden,
                    interval=self.interval,
                    http_path=self.http_path,
                )
                self.jobs.start_async()
            try:
                yield
            finally:
                if self.jobs is not None:
                    self.jobs.stop(wait=True)

    def scheduler_alive(self) -> bool | None:
        if not self.scheduler:
            return None
        lag = metrics.scheduler_lag()
        # alive: it has run, and not longer ago than a few of its intervals
        return self.jobs is not None and lag is not None and lag < 3 * self.interval + 10


class SelfReader:
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
