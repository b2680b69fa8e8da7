"""A fair share for each caller (#38): a few large bodies at a time; one
key's flood runs as a bounded number of requests at a time and never
delays another key's request; a
key past its queue is answered 429 with a JSON body; an invented key buys
no lane of its own; waiting for the log gives the slot back; the probes
answer whatever floods."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from memwarden.engine import metrics
from memwarden.engine.faces.http._fair import FairShare, Lanes, stepped_out
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


class Probe:
    """An app whose requests take ``hold`` seconds and count how many run at once, per lane."""

    def __init__(self, lanes: Lanes, hold: float = 0.05) -> None:
        self.lanes = lanes
        self.hold = hold
        self.running: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.total_peak = 0

    def app(self) -> Any:
        async def work(request: Request) -> JSONResponse:
            name = request.headers.get("x-api-key", "?")
            self.running[name] = self.running.get(name, 0) + 1
            self.peak[name] = max(self.peak.get(name, 0), self.running[name])
            self.total_peak = max(self.total_peak, sum(self.running.values()))
            await asyncio.sleep(self.hold)
            self.running[name] -= 1
            return JSONResponse({"ok": True})

        async def wait(request: Request) -> JSONResponse:
            async with stepped_out(request):
                await asyncio.sleep(float(request.query_params["s"]))
            return JSONResponse({"ok": True})

        async def health(request: Request) -> JSONResponse:
            return JSONResponse({"ok": True})

        routes = [Route("/work", work), Route("/wait", wait), Route("/healthz", health)]
        return FairShare(Starlette(routes=routes), self.lanes)


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test", timeout=30)


def test_a_flood_runs_per_lane_at_a_time_and_another_key_does_not_wait() -> None:
    lanes = Lanes(per_lane=4)
    lanes.known("mw_a_secret", "a")
    lanes.known("mw_b_secret", "b")
    probe = Probe(lanes, hold=0.1)

    async def run() -> int:
        async with client(probe.app()) as c:
            flood = [asyncio.create_task(c.get("/work", headers={"x-api-key": "mw_a_secret"})) for _ in range(40)]
            await asyncio.sleep(0.05)  # paces only: the flood gets in first
            other = await c.get("/work", headers={"x-api-key": "mw_b_secret"})
            flood_done = sum(t.done() for t in flood)
            answers = await asyncio.gather(*flood)
            assert other.status_code == 200 and all(a.status_code == 200 for a in answers)
            return flood_done

    flood_done = asyncio.run(run())
    assert probe.peak["mw_a_secret"] == 4  # ten rounds of four, never more at once
    # the other key ran at once, not after the flood's ten rounds of four: counted in the flood's
    # rounds, not in seconds (behind the flood, all forty would be done)
    assert flood_done < 20, flood_done


def test_a_lane_past_its_queue_is_answered_429_as_json() -> None:
    lanes = Lanes(per_lane=2, queue=3)
    lanes.known("mw_a_secret", "a")
    probe = Probe(lanes, hold=0.2)
    shed_before = metrics.REQUESTS_SHED._value.get()

    async def run() -> list[httpx.Response]:
        async with client(probe.app()) as c:
            return await asyncio.gather(*(c.get("/work", headers={"x-api-key": "mw_a_secret"}) for _ in range(8)))

    answers = asyncio.run(run())
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] * 5 + [429] * 3
    busy = next(a for a in answers if a.status_code == 429)
    assert busy.json()["error"] == "too_many_requests" and busy.headers["retry-after"] == "1"
    assert metrics.REQUESTS_SHED._value.get() - shed_before == 3


def test_invented_keys_share_their_peers_lane() -> None:
    lanes = Lanes(per_lane=2)
    probe = Probe(lanes, hold=0.05)
    app = probe.app()
    # every request shows a key never seen valid: they all run in the peer's one lane
    assert lanes.lane_of({"type": "http", "headers": [(b"x-api-key", b"mw_x_1")], "client": ("10.0.0.9", 1)}) == (
        "peer:10.0.0.9"
    )

    async def run() -> None:
        async with client(app) as c:
            await asyncio.gather(*(c.get("/work", headers={"x-api-key": f"mw_{i}_s"}) for i in range(10)))

    asyncio.run(run())
    assert probe.total_peak == 2  # ten keys, one lane of two
    lanes.known("mw_x_1", "x")
    assert lanes.lane_of({"type": "http", "headers": [(b"x-api-key", b"mw_x_1")], "client": ("10.0.0.9", 1)}) == "key:x"


def test_waiting_gives_the_slot_back_and_probes_always_answer() -> None:
    lanes = Lanes(per_lane=1)
    lanes.known("mw_a_secret", "a")
    probe = Probe(lanes)

    async def run() -> None:
        async with client(probe.app()) as c:
            key = {"x-api-key": "mw_a_secret"}
            waits = [asyncio.create_task(c.get("/wait", params={"s": 1.0}, headers=key)) for _ in range(20)]
            await asyncio.sleep(0.1)  # paces only: the waits get in first
            # twenty long waits hold no slot: the lane of one still serves this key's work while they wait
            assert (await c.get("/work", headers=key)).status_code == 200
            assert not any(w.done() for w in waits)
            assert (await c.get("/healthz", headers=key)).status_code == 200
            assert all(w.status_code == 200 for w in await asyncio.gather(*waits))

    asyncio.run(run())


def test_a_few_large_bodies_are_read_at_a_time_whoever_sends_them() -> None:
    from memwarden.engine.faces.http._guard import BodyLimit

    inside = {"now": 0, "peak": 0}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        inside["now"] += 1
        inside["peak"] = max(inside["peak"], inside["now"])
        await asyncio.sleep(0.05)
        inside["now"] -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    guarded = BodyLimit(app, limit=10_000, large=1_000, at_once=2)

    async def run() -> None:
        async with client(guarded) as c:

            async def chunks() -> Any:
                for _ in range(5):
                    yield b"x" * 1_000

            declared = [c.post("/", content=b"x" * 5_000) for _ in range(6)]  # with a Content-Length
            streamed = [c.post("/", content=chunks()) for _ in range(3)]  # without: counted as it arrives
            answers = await asyncio.gather(*declared, *streamed)
            assert all(a.status_code == 200 for a in answers)
            oversized = await c.post("/", content=b"x" * 20_000)
            assert oversized.status_code == 413

    asyncio.run(run())
    assert inside["peak"] == 2
    assert guarded.slots()._value == 2
