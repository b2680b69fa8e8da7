"""The HTTP clients and the in-process Warden behind one protocol
(``memwarden.engine.Memories``): the same contract, run against a Warden
acting as a key and against ``memwarden.client.Client`` and ``AsyncClient``
driving a live server as that key, on both backends. Then what only the
clients have: read-your-writes, retries where they are safe, and none where
they are not."""

from __future__ import annotations

import asyncio
import inspect
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from memwarden.client import AsyncClient, Client
from memwarden.engine import (
    OPERATOR,
    BatchRefused,
    ErasureResult,
    Forbidden,
    Found,
    InvalidInput,
    KeyStore,
    Memories,
    MemoryNotFound,
    MemoryView,
    SaveResult,
    ScopeNotAllowed,
    Warden,
)
from memwarden.engine._tokens import is_token

from ._http_server import Server, start_server


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, backend: Any) -> Iterator[Server]:
    running = start_server(backend.db(tmp_path_factory.mktemp("client"), "client.db"), "--no-scheduler")
    yield running
    running.proc.terminate()
    running.proc.wait(timeout=30)


class Blocking:
    """An ``AsyncClient`` driven from blocking test code: each operation
    awaited on the client's own event loop, so the contract written once for
    ``Memories`` runs against the async client unchanged (its attributes,
    ``seq`` and ``http``, are the client's own)."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self.loop = asyncio.new_event_loop()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.client, name)
        if not inspect.iscoroutinefunction(found):
            return found

        def awaited(*args: Any, **kwargs: Any) -> Any:
            return self.loop.run_until_complete(found(*args, **kwargs))

        return awaited

    def __enter__(self) -> Blocking:
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.run_until_complete(self.client.aclose())
        self.loop.close()


# each client, as blocking test code drives it
CLIENTS: dict[str, Callable[..., Any]] = {
    "http": Client,
    "async": lambda *args, **kwargs: Blocking(AsyncClient(*args, **kwargs)),
}


@pytest.fixture(params=["in_process", *CLIENTS])
def face(request: pytest.FixtureRequest, live: Server) -> Iterator[tuple[Memories, Memories, str]]:
    """(as the bound agent key, as the security key, a unique id prefix)."""
    prefix = f"{request.param}-{uuid.uuid4().hex[:8]}"
    if request.param in CLIENTS:
        connect = CLIENTS[request.param]
        with connect(live.url, live.keys["agent"]) as agent, connect(live.url, live.keys["security"]) as security:
            yield agent, security, prefix
        return
    with Warden(live.db) as w:
        keys = KeyStore(w)
        agent_key, security_key = keys.authenticate(live.keys["agent"]), keys.authenticate(live.keys["security"])
        assert agent_key is not None and security_key is not None
        yield w.acting_as(agent_key), w.acting_as(security_key), prefix


def fields(memory_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "memory_id": memory_id,
        "kind": "external_fact",
        "summary": f"{memory_id} 회의 요약",
        "content": "목요일 오후 3시 🙂",
        "source_url": f"https://calendar.example/{memory_id}",
        "scope": {"tenant": "acme"},
        "ttl": "6h",
        **extra,
    }


def test_a_save_and_its_reads_answer_the_engine_types(face: tuple[Memories, Memories, str]) -> None:
    agent, _, prefix = face
    saved = agent.save(**fields(f"{prefix}-a"))
    assert isinstance(saved, SaveResult) and saved.tenant == "acme" and saved.checksum.startswith("sha256:")
    view = agent.get(f"{prefix}-a")
    assert isinstance(view, MemoryView) and view.usable and view.content == "목요일 오후 3시 🙂"
    assert view.scope["agent"] == "bot", "the bound key's agent was filled in by the engine"
    found = agent.query(tenant="acme", text="회의", ids=[f"{prefix}-a"])
    assert [v.memory_id for v in found] == [f"{prefix}-a"]
    assert agent.explain(f"{prefix}-a")["history"][0]["event"] == "memory.saved"
    many = agent.save_many([fields(f"{prefix}-b"), fields(f"{prefix}-c")])
    assert [r.memory_id for r in many] == [f"{prefix}-b", f"{prefix}-c"]
    # an agent key is given tokens on every face: none equal, none to order or count with
    assert all(is_token(r.seq) for r in (saved, *many)) and len({saved.seq, *(r.seq for r in many)}) == 3
    assert view.last_seq is None and agent.explain(f"{prefix}-a")["history"][0]["seq"] is None
    erased = agent.erase(memory_id=f"{prefix}-c", reason="the agent forgets its own note")
    assert erased == ErasureResult(1, True)
    assert agent.get(f"{prefix}-c").reason == "erased"


def test_refusals_are_the_engine_errors_with_their_fields(face: tuple[Memories, Memories, str]) -> None:
    agent, security, prefix = face
    with pytest.raises(MemoryNotFound) as missing:
        agent.get(f"{prefix}-never")
    assert missing.value.memory_id == f"{prefix}-never"
    with pytest.raises(ScopeNotAllowed) as wall:
        agent.save(**fields(f"{prefix}-x", scope={"tenant": "globex"}))
    assert wall.value.field == "scope.tenant"
    with pytest.raises(InvalidInput) as bad:
        agent.save(**fields(f"{prefix}-y", source_url="not a url"))
    assert bad.value.field == "source_url"
    with pytest.raises(BatchRefused) as batch:
        agent.save_many([fields(f"{prefix}-z"), fields(f"{prefix}-w", kind="no such kind", ttl=None)])
    assert [(p["index"], p["field"]) for p in batch.value.problems] == [(1, "kind")]
    with pytest.raises(Forbidden, match="agent role may not do this"):
        agent.revoke({"tenant": "acme"}, reason="an agent may not revoke")
    # what a security key may do, the same on both faces
    preview = security.preview_revocation({"ids": [f"{prefix}-none"]})
    assert preview["covered"] == 0 and security.policies() == {}


def test_a_revocation_through_either_face_takes_the_memory_out(face: tuple[Memories, Memories, str]) -> None:
    agent, security, prefix = face
    agent.save(**fields(f"{prefix}-r"))
    result = security.revoke({"tenant": "acme", "ids": [f"{prefix}-r"]}, reason="leaked")
    assert result.covered == 1
    assert security.revocation(result.revocation_id)["covered"] == 1
    view = agent.get(f"{prefix}-r")
    assert (view.usable, view.reason, view.summary, view.content) == (False, "revoked", None, None)
    assert agent.tenants() == ["acme"]


def test_search_answers_what_is_usable_now_by_words_and_by_vector(face: tuple[Memories, Memories, str]) -> None:
    agent, security, prefix = face
    word, user = f"z{prefix.rsplit('-', 1)[1]}", prefix  # the user keeps the other faces' memories out
    scope = {"tenant": "acme", "user": user}
    agent.save(**fields(f"{prefix}-deploy", summary=f"{word} 배포 승인", scope=scope, embedding=[1.0, 0.1, 0.1]))
    agent.save(**fields(f"{prefix}-lunch", summary=f"{word} 점심", scope=scope, embedding=[0.1, 1.0, 0.1]))
    by_words = agent.search(tenant="acme", query=word, mode="text", user=user)
    assert all(isinstance(f, Found) and isinstance(f.view, MemoryView) for f in by_words)
    assert sorted(f.view.memory_id for f in by_words) == [f"{prefix}-deploy", f"{prefix}-lunch"]
    assert all(f.found_by == ("text",) and f.view.content == "목요일 오후 3시 🙂" for f in by_words)
    near = agent.search(tenant="acme", vector=[1.0, 0.1, 0.1], mode="vector", user=user)
    assert [f.view.memory_id for f in near] == [f"{prefix}-deploy", f"{prefix}-lunch"]
    assert near[0].similarity == pytest.approx(1.0) and near[0].score > near[1].score
    security.revoke({"tenant": "acme", "ids": [f"{prefix}-deploy"]}, reason="leaked")
    after = agent.search(tenant="acme", vector=[1.0, 0.1, 0.1], mode="vector", user=user)
    assert [f.view.memory_id for f in after] == [f"{prefix}-lunch"], "a revoked memory is never found"
    after = agent.search(tenant="acme", query=word, mode="text", user=user)
    assert [f.view.memory_id for f in after] == [f"{prefix}-lunch"]
    with pytest.raises(InvalidInput) as bad:
        agent.search(tenant="acme", query="   ", mode="text")
    assert bad.value.field == "query"


def test_a_query_narrowed_by_its_content_and_id_prefix_answers_alike(face: tuple[Memories, Memories, str]) -> None:
    """``where`` (the JSON content's conditions) and ``id_prefix`` reach
    the query through every face, NaN and infinities included, and count
    before ``limit`` and ``offset``."""
    agent, _, prefix = face
    values = {"a": {"n": 1, "tag": "ops"}, "b": {"n": 2.5, "tag": "life"}, "c": {"n": 4, "tag": "ops"}}
    for key, value in values.items():
        agent.save(**fields(f"{prefix}/{key}", content=json.dumps(value)))
    agent.save(**fields(f"{prefix}x/d", content=json.dumps({"n": 3, "tag": "ops"})))  # a sibling prefix
    asked = {"tenant": "acme", "id_prefix": [f"{prefix}/"]}
    assert [v.memory_id for v in agent.query(**asked, where={"tag": "ops"})] == [f"{prefix}/c", f"{prefix}/a"]
    assert [v.memory_id for v in agent.query(**asked, where={"tag": "ops"}, limit=1, offset=1)] == [f"{prefix}/a"]
    assert len(agent.query(**asked, where={"n": {"$lt": float("inf"), "$gt": 1}})) == 2
    assert agent.query(**asked, where={"n": {"$eq": float("nan")}}) == []
    with pytest.raises(InvalidInput) as bad:
        agent.query(**asked, where={"n": {"$near": 1}})
    assert bad.value.field == "where"


def test_several_vectors_a_memory_through_every_face(face: tuple[Memories, Memories, str]) -> None:
    """``embeddings``: a version's several vectors (each field of an item
    embedded apart, issue 59), by save and by batch; a search answers the
    memory once, at its closest vector's similarity."""
    agent, _, prefix = face
    scope = {"tenant": "acme", "user": prefix}
    agent.save(**fields(f"{prefix}-item", scope=scope, embeddings=[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
    agent.save_many([fields(f"{prefix}-other", scope=scope, embeddings=[[0.0, 0.0, 1.0], [0.5, 0.5, 0.1]])])
    for q, first in (([0.05, 1.0, 0.0], "item"), ([1.0, 0.05, 0.0], "item"), ([0.0, 0.1, 1.0], "other")):
        near = agent.search(tenant="acme", vector=q, mode="vector", user=prefix)
        assert near[0].view.memory_id == f"{prefix}-{first}", q
        assert len({f.view.memory_id for f in near}) == len(near) == 2
        assert near[0].similarity == pytest.approx(max(q) / sum(x * x for x in q) ** 0.5, abs=1e-5)
    with pytest.raises(InvalidInput) as bad:
        agent.save(**fields(f"{prefix}-bad", scope=scope, embeddings=[[1.0, 0.0, 0.0], [1.0, 0.0]]))
    assert bad.value.field == "embeddings"


@pytest.mark.parametrize("kind", list(CLIENTS))
def test_the_client_reads_its_own_writes_on_any_node(live: Server, kind: str) -> None:
    with CLIENTS[kind](live.url, live.keys["agent"]) as mw:
        saved = mw.save(**fields(f"ryw-{uuid.uuid4().hex[:8]}"))
        assert mw.seq == saved.seq
        sent: list[httpx.Request] = []

        async def record(request: httpx.Request) -> None:
            sent.append(request)

        mw.http.event_hooks["request"] = [record if kind == "async" else sent.append]
        mw.get(saved.memory_id)
        mw.query(tenant="acme", ids=[saved.memory_id])
        mw.search(tenant="acme", query="회의", mode="text")
        assert len(sent) == 3
        assert all(dict(r.url.params)["min_seq"] == str(saved.seq) for r in sent[:2])
        assert json.loads(sent[2].content)["min_seq"] == saved.seq, "a search's body carries it"
        # a later write takes its place: sent after the first was answered, it is the newer
        again = mw.save(**fields(f"ryw-{uuid.uuid4().hex[:8]}"))
        mw.get(again.memory_id)
        assert is_token(again.seq) and again.seq != saved.seq
        assert sent[-1].url.params.get_list("min_seq") == [again.seq] and mw.positions == (again.seq,)


class LosesAnswers(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """A network that delivers each request and loses the first answer of
    the kinds named: the server acted, the client never heard (for the
    blocking client and the async one alike)."""

    def __init__(self, lose: set[tuple[str, str]]) -> None:
        self.inner = httpx.HTTPTransport()
        self.ainner = httpx.AsyncHTTPTransport()
        self.lose = set(lose)
        self.sent: list[tuple[str, str]] = []

    def _lost(self, request: httpx.Request) -> bool:
        key = (request.method, request.url.path)
        self.sent.append(key)
        if key not in self.lose:
            return False
        self.lose.discard(key)
        return True

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if self._lost(request):
            response.read()
            raise httpx.ReadError("the answer was lost", request=request)
        return response

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.ainner.handle_async_request(request)
        if self._lost(request):
            await response.aread()
            raise httpx.ReadError("the answer was lost", request=request)
        return response


@pytest.mark.parametrize("kind", list(CLIENTS))
def test_a_save_whose_answer_was_lost_is_sent_again_and_kept_once(live: Server, kind: str) -> None:
    memory_id = f"retry-{uuid.uuid4().hex[:8]}"
    network = LosesAnswers({("POST", "/v1/memories")})
    with CLIENTS[kind](live.url, live.keys["agent"], transport=network, backoff=0.01) as mw:
        head = live.head()
        saved = mw.save(**fields(memory_id))
        assert network.sent.count(("POST", "/v1/memories")) == 2, "sent again after the lost answer"
        assert live.head() == head + 1, "kept once: the event id made the second send the first's answer"
        with Warden(live.db) as w:  # the token stands for the save's seq, as the store reads it
            assert w.positions(OPERATOR).taken(saved.seq) == head + 1
        assert mw.get(memory_id).version == 1


@pytest.mark.parametrize("kind", list(CLIENTS))
def test_a_revocation_is_never_sent_twice(live: Server, kind: str) -> None:
    network = LosesAnswers({("POST", "/v1/revocations")})
    with CLIENTS[kind](live.url, live.keys["security"], transport=network, backoff=0.01) as mw:
        head = live.head()
        with pytest.raises(httpx.ReadError):
            mw.revoke({"ids": [f"none-{uuid.uuid4().hex[:8]}"]}, reason="once")
        assert network.sent.count(("POST", "/v1/revocations")) == 1
        assert live.head() == head + 1, "it was issued, once; the caller learns it from the revocation list"


def test_the_async_client_answers_as_the_blocking_one(live: Server) -> None:
    memory_id = f"async-{uuid.uuid4().hex[:8]}"

    async def main() -> tuple[SaveResult, MemoryView, list[MemoryView]]:
        async with AsyncClient(live.url, live.keys["agent"]) as mw:
            saved = await mw.save(**fields(memory_id))
            return saved, await mw.get(memory_id), await mw.query(tenant="acme", ids=[memory_id])

    saved, view, found = asyncio.run(main())
    assert view.usable and view.version == saved.version and [v.memory_id for v in found] == [memory_id]
    with Client(live.url, live.keys["agent"]) as blocking:
        assert blocking.get(memory_id) == view


def test_the_async_client_holds_at_most_max_in_flight_requests_open() -> None:
    """Thousands of requests gathered at once wait in the client, a few at a
    time in the connection pool (whose queue httpcore scans whole per request)."""
    open_now, peak = 0, 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal open_now, peak
        open_now += 1
        peak = max(peak, open_now)
        await asyncio.sleep(0.001)
        open_now -= 1
        return httpx.Response(200, json={"memories": [], "truncated": False, "next_offset": None})

    async def main() -> list[Any]:
        async with AsyncClient("http://mw.test", "key", transport=httpx.MockTransport(handler), max_in_flight=8) as mw:
            return await asyncio.gather(*[mw.query(tenant="acme") for _ in range(200)])

    answers = asyncio.run(main())
    assert len(answers) == 200 and all(a == [] for a in answers)
    assert peak == 8
