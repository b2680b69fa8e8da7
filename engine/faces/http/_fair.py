"""A fair share of the server for each caller: every key (or, before it has
shown a valid key, every peer address) works in its own lane, at most
``per_lane`` requests at a time; the rest wait their turn as sleeping
coroutines, up to ``queue`` of them, and beyond that are answered 429.

Why lanes and not a request rate: the server is one process, and what one
caller's requests take from another's is the interpreter's time while they
run. A flood from one key (300 long-polls re-asking the feed, a loop of
large batches) then runs beside an agent's requests as ``per_lane`` of them,
whatever its size, while an agent that asks one thing at a time never
waits on its own lane. Waiting for the log to move does not hold the lane
(``stepped_out``): a thousand open long-polls cost nothing until they read.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI reads PER_LANE without loading the web stack (or Prometheus)
    from starlette.requests import Request
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

PER_LANE = 8
QUEUE = 1000
_KNOWN_KEYS = 10_000  # keys remembered as valid (the least recently seen forgotten first)


class _Lane:
    def __init__(self, per_lane: int) -> None:
        import asyncio  # here, not above: the command line reads PER_LANE, and asyncio costs it 50 ms

        self.slots = asyncio.Semaphore(per_lane)
        self.queued = 0  # waiting for a slot (a request stepped out to wait for the log is not)
        self.users = 0  # in the lane at all, to forget an idle lane


class Lanes:
    """The lanes of one server, and the keys it has seen to be valid."""

    def __init__(self, *, per_lane: int = PER_LANE, queue: int = QUEUE) -> None:
        self.per_lane = per_lane
        self.queue = queue
        self._lanes: dict[str, _Lane] = {}
        self._known: OrderedDict[bytes, str] = OrderedDict()

    def known(self, key: str, key_id: str) -> None:
        """``key`` was just authenticated as ``key_id``: its requests get that key's lane."""
        digest = _digest(key)
        self._known[digest] = key_id
        self._known.move_to_end(digest)
        while len(self._known) > _KNOWN_KEYS:
            self._known.popitem(last=False)

    def lane_of(self, scope: Scope) -> str:
        # a key not (yet) seen valid shares its peer's lane: inventing keys buys no new lanes
        key = dict(scope.get("headers") or []).get(b"x-api-key")
        if key is not None:
            key_id = self._known.get(_digest(key.decode("latin-1")))
            if key_id is not None:
                return "key:" + key_id
        client = scope.get("client")
        return "peer:" + (client[0] if client else "?")

    @contextlib.asynccontextmanager
    async def held(self, name: str) -> AsyncIterator[_Lane | None]:
        """A slot in lane ``name``; yields None (and holds nothing) when its queue is full."""
        lane = self._lanes.get(name)
        if lane is None:
            lane = self._lanes[name] = _Lane(self.per_lane)
        if lane.slots.locked() and lane.queued >= self.queue:
            yield None
            return
        lane.users += 1
        try:
            lane.queued += 1
            try:
                await lane.slots.acquire()
            finally:
                lane.queued -= 1
            try:
                yield lane
            finally:
                lane.slots.release()
        finally:
            lane.users -= 1
            if not lane.users:
                del self._lanes[name]


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("latin-1", "replace")).digest()


@contextlib.asynccontextmanager
async def stepped_out(request: Request) -> AsyncIterator[None]:
    """Gives the request's slot back while it waits (for the log to move), and takes it again after."""
    lane: _Lane | None = request.scope.get("memwarden.lane")
    if lane is None:
        yield
        return
    lane.slots.release()
    try:
        yield
    finally:
        await lane.slots.acquire()


class FairShare:
    """ASGI middleware: each request runs in its caller's lane (``Lanes``)."""

    def __init__(self, app: ASGIApp, lanes: Lanes) -> None:
        self.app = app
        self.lanes = lanes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in ("/healthz", "/readyz", "/metrics"):
            # probes answer whoever floods: a load balancer must see the server alive
            await self.app(scope, receive, send)
            return
        name = self.lanes.lane_of(scope)
        async with self.lanes.held(name) as lane:
            if lane is None:
                from memwarden.engine import metrics

                metrics.REQUESTS_SHED.inc()
                await _busy(send, self.lanes.per_lane + self.lanes.queue)
                return
            scope["memwarden.lane"] = lane
            await self.app(scope, receive, send)


async def _busy(send: Send, bound: int) -> None:
    body = (
        '{"error":"too_many_requests","field":null,"problem":'
        f'"this caller already has {bound} requests running or waiting; retry shortly"}}'
    ).encode()
    start: Message = {
        "type": "http.response.start",
        "status": 429,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"retry-after", b"1"),
        ],
    }
    await send(start)
    await send({"type": "http.response.body", "body": body})
