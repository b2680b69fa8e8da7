"""A client that checks (#58): an answer is believed only as the answer to
what was asked (the tenant, the id, a position a server can issue), a
position beyond the log's head costs one refused read and is forgotten, a
redirect is followed only within the base URL's origin, and the positions
of writes in flight together are all carried to the next read. Hostile
servers are ``httpx.MockTransport``s; the rest is a real server on loopback."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from memwarden.client import AsyncClient, Client, UntrustedAnswer
from memwarden.engine import InvalidInput, StaleView, Warden
from memwarden.engine._tokens import is_token

from ._http_server import Server, start_server
from .test_client import CLIENTS, fields

BASE = "http://memwarden.test:8077"
KEY = "mw_0123456789ab_secret"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(tmp_path_factory.mktemp("checks") / "checks.db", "--no-scheduler")
    yield running
    running.proc.terminate()
    running.proc.wait(timeout=30)


def memory(memory_id: str, tenant: str = "acme", **extra: Any) -> dict[str, Any]:
    """A memory as a server answers it."""
    return {
        "memory_id": memory_id,
        "version": 1,
        "status": "usable",
        "usable": True,
        "reason": None,
        "action": "use",
        "detail": None,
        "kind": "external_fact",
        "summary": "요약",
        "checksum": "sha256:" + "0" * 64,
        "content": "내용",
        "scope": {"tenant": tenant, "project": None, "permission": None, "user": None, "agent": None, "tool": None},
        "source_url": "https://src.example/x",
        "fetched_at": "2026-01-05T09:00:00Z",
        "expires_at": None,
        "verified_at": None,
        "policy": "default",
        "revocation_version": 1,
        "derived_from": [],
        "last_seq": None,
        **extra,
    }


def saved(memory_id: str, tenant: str = "acme", seq: Any = "mwt_" + "A" * 48) -> dict[str, Any]:
    return {
        "memory_id": memory_id,
        "version": 1,
        "checksum": "sha256:" + "0" * 64,
        "seq": seq,
        "expires_at": None,
        "tenant": tenant,
    }


class Hostile:
    """A server that answers each request with what ``answer`` makes of it,
    and remembers every request it was sent."""

    def __init__(self, answer: Callable[[httpx.Request], httpx.Response]) -> None:
        self.answer = answer
        self.sent: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return self.answer(request)


def each_client(server: Hostile) -> Iterator[Any]:
    """The blocking client and the async one (driven blocking), both on ``server``."""
    from .test_client import Blocking

    yield Client(BASE, KEY, transport=httpx.MockTransport(server), retries=0)
    yield Blocking(AsyncClient(BASE, KEY, transport=httpx.MockTransport(server), retries=0))


def test_an_answer_of_another_tenant_or_id_is_refused() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/memories" and request.method == "POST":
            return httpx.Response(201, json=saved(json.loads(request.content)["memory_id"], tenant="globex"))
        if request.url.path == "/v1/memories":
            return httpx.Response(200, json={"memories": [memory("m1"), memory("m2", tenant="globex")]})
        if request.url.path == "/v1/memories/search":
            return httpx.Response(200, json={"results": [memory("m2", tenant="globex", score=1.0, found_by=["text"])]})
        return httpx.Response(200, json=memory("someone-else"))

    for mw in each_client(Hostile(answer)):
        with mw:
            with pytest.raises(UntrustedAnswer) as tenant:
                mw.save(**fields("m1"))
            assert tenant.value.field == "answer.tenant" and "globex" in str(tenant.value)
            assert mw.positions == (), "nothing of a refused answer is kept"
            with pytest.raises(UntrustedAnswer) as other:
                mw.get("m1", tenant="acme")
            assert other.value.field == "answer.memory_id"
            with pytest.raises(UntrustedAnswer) as listed:
                mw.query(tenant="acme")
            assert listed.value.field == "memories[1].scope.tenant"
            with pytest.raises(UntrustedAnswer) as found:
                mw.search(tenant="acme", query="x", mode="text")
            assert found.value.field == "results[0].scope.tenant"
            with pytest.raises(UntrustedAnswer) as unasked:
                mw.query(tenant="acme", ids=["m1"])
            assert unasked.value.field == "memories[1].scope.tenant"


def test_a_position_no_server_issues_is_refused_and_never_sent() -> None:
    bad = iter([2**70, "mwt_short", True, None, "812"])

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(201, json=saved(json.loads(request.content)["memory_id"], seq=next(bad)))
        if request.url.path == "/v1/memories/broken":
            return httpx.Response(200, json={"memory_id": "broken", "status": "usable"})  # a record cut short
        return httpx.Response(200, json=memory("m1", unknown_to_this_client="a newer server's field"))

    server = Hostile(answer)
    with Client(BASE, KEY, transport=httpx.MockTransport(server), retries=0) as mw:
        for _ in range(5):
            with pytest.raises(UntrustedAnswer) as refused:
                mw.save(**fields("m1"))
            assert refused.value.field == "answer.seq"
        assert mw.positions == () and mw.seq is None
        assert mw.get("m1").memory_id == "m1", "a field the client does not know is left out"
        assert "min_seq" not in server.sent[-1].url.params, "no refused position poisons a later read"
        with pytest.raises(UntrustedAnswer) as short:  # not a TypeError from the record's constructor
            mw.get("broken")
        assert short.value.field == "answer.version" and short.value.status == 502


def test_a_redirect_is_followed_only_within_the_origin() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/v1/memories/elsewhere":
            return httpx.Response(307, headers={"location": "https://attacker.example/v1/memories/elsewhere"})
        if path == "/v1/memories/moved":
            return httpx.Response(308, headers={"location": f"{BASE}/api/v1/memories/moved"})
        if path == "/v1/memories/loop":
            return httpx.Response(307, headers={"location": "/v1/memories/loop"})
        if path == "/v1/memories" and request.method == "POST":
            return httpx.Response(303, headers={"location": "/v1/memories/m1"})
        if path == "/api/v1/memories/moved" and request.url.host == "memwarden.test":
            return httpx.Response(200, json=memory("moved"))
        return httpx.Response(404, json={"error": "not_found", "field": "path", "problem": "no such endpoint"})

    for mw in each_client(server := Hostile(answer)):
        with mw:
            with pytest.raises(UntrustedAnswer) as away:
                mw.get("elsewhere")
            assert away.value.field == "location" and "attacker.example" in str(away.value)
            assert all(r.url.host == "memwarden.test" for r in server.sent), "the key went nowhere else"
            assert mw.get("moved").memory_id == "moved", "within the origin: followed"
            assert server.sent[-1].url.path == "/api/v1/memories/moved" and server.sent[-1].headers["x-api-key"] == KEY
            with pytest.raises(UntrustedAnswer, match="more than 5 times"):
                mw.get("loop")
            with pytest.raises(UntrustedAnswer, match="turns a POST into a GET"):
                mw.save(**fields("m1"))


@pytest.mark.parametrize("kept", ["ahead", "foreign"])
def test_a_position_no_read_can_honour_costs_one_read_then_is_forgotten(
    live: Server, kept: str, tmp_path: Path
) -> None:
    """A save answered with a position the store cannot honour: one beyond
    its log's head (a store restored from an older backup, or a false
    server), or one another store issued (another store behind the same
    address). The next read is refused once, at once, and the client drops it."""
    if kept == "ahead":
        with Warden(live.db) as w:
            bad = w.tokens.issue(live.head() + 10**6)
    else:
        with Warden(tmp_path / "another.db") as other:
            bad = other.tokens.issue(1)

    class Rewrites(httpx.BaseTransport, httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner, self.ainner = httpx.HTTPTransport(), httpx.AsyncHTTPTransport()

        def rewritten(self, request: httpx.Request, response: httpx.Response) -> httpx.Response:
            if request.method != "POST":
                return response
            body = {**json.loads(response.content), "seq": bad}
            return httpx.Response(response.status_code, json=body, request=request)

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            response = self.inner.handle_request(request)
            response.read()
            return self.rewritten(request, response)

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response = await self.ainner.handle_async_request(request)
            await response.aread()
            return self.rewritten(request, response)

    for kind, connect in CLIENTS.items():
        with connect(live.url, live.keys["agent"], transport=Rewrites()) as mw:
            memory_id = f"ahead-{kind}-{uuid.uuid4().hex[:6]}"
            assert mw.save(**fields(memory_id)).seq == bad and mw.positions == (bad,)
            with pytest.raises(StaleView if kept == "ahead" else InvalidInput) as refused:
                mw.get(memory_id)
            assert refused.value.field == "min_seq"
            if kept == "ahead":
                assert refused.value.ahead is True and "no wait brings it" in str(refused.value)
            assert mw.positions == ()
            assert mw.get(memory_id).usable, "the next read is answered"


def test_writes_in_flight_together_are_all_read_after(live: Server) -> None:
    async def main() -> None:
        async with AsyncClient(live.url, live.keys["agent"]) as mw:
            sent: list[httpx.Request] = []

            async def record(request: httpx.Request) -> None:
                sent.append(request)

            mw.http.event_hooks["request"] = [record]
            ids = [f"flight-{uuid.uuid4().hex[:8]}" for _ in range(3)]
            together = await asyncio.gather(*(mw.save(**fields(i)) for i in ids))
            # none was sent after another was answered: none is known to be the newest
            assert sorted(mw.positions) == sorted(s.seq for s in together) and all(is_token(p) for p in mw.positions)
            found = await mw.query(tenant="acme", ids=ids)
            assert sorted(sent[-1].url.params.get_list("min_seq")) == sorted(s.seq for s in together)
            assert sorted(v.memory_id for v in found) == sorted(ids)
            later = await mw.save(**fields(f"flight-{uuid.uuid4().hex[:8]}"))
            assert mw.positions == (later.seq,), "a write sent after they were answered is newer than all"
            await mw.search(tenant="acme", query="회의", mode="text")
            assert json.loads(sent[-1].content)["min_seq"] == later.seq

    asyncio.run(main())
