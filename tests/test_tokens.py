"""Consistency tokens (#58): an agent key, on every face it reaches, is
answered tokens it can pass back but not count or order with, the log's
figures are for staff only, and the store's secret is made once and shared
by every node, on both backends. Then the feed's cursor beyond the head and
a 405's ``Allow``."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import structlog
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client
from memwarden.engine import OPERATOR, InvalidInput, KeyStore, Principal, StaleView, Warden
from memwarden.engine._tokens import MAX_GIVEN, Positions, Tokens, is_token

from ._http_server import Server, save_body, start_server
from .backends import Backend
from .console.test_console_http import signed_in

# the names under which an answer could give a log position
POSITIONS = {"seq", "last_seq", "head", "head_seq", "view_position", "position"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, backend: Backend) -> Iterator[Server]:
    running = start_server(backend.db(tmp_path_factory.mktemp("tokens"), "tokens.db"), "--no-scheduler")
    yield running
    running.proc.terminate()
    running.proc.wait(timeout=30)


def counted(answer: Any, path: str = "") -> list[str]:
    """Every place in an answer that gives a log position as a number."""
    found: list[str] = []
    if isinstance(answer, dict):
        for key, value in answer.items():
            if key in POSITIONS and isinstance(value, int) and not isinstance(value, bool):
                found.append(f"{path}.{key}")
            found.extend(counted(value, f"{path}.{key}"))
    elif isinstance(answer, list):
        for index, value in enumerate(answer):
            found.extend(counted(value, f"{path}[{index}]"))
    return found


def decoded(server: Server, token: str) -> int:
    """The seq a token stands for, as the store that issued it reads it."""
    with Warden(server.db) as w:
        return w.tokens.position(token, "seq")


def test_an_agent_key_is_answered_tokens_it_cannot_count_with(server: Server) -> None:
    with server.client("agent") as agent, server.client("agent2") as other, server.client("auditor") as auditor:
        first = agent.post("/v1/memories", json=save_body("tk-a", ttl="6h", event_id="tk-a-1"))
        for n in range(3):  # another tenant's writes, between two of this one's
            assert other.post("/v1/memories", json=save_body(f"tk-o{n}", tenant="globex", ttl="6h")).status_code == 201
        answers = {
            "save": first.json(),
            "again": agent.post("/v1/memories", json=save_body("tk-a", ttl="6h", event_id="tk-a-1")).json(),
            "batch": agent.post("/v1/memories/batch", json={"memories": [save_body("tk-b", ttl="6h")]}).json(),
            "get": agent.get("/v1/memories/tk-a").json(),
            "query": agent.get("/v1/memories", params={"tenant": "acme", "all": True}).json(),
            "search": agent.post("/v1/memories/search", json={"tenant": "acme", "query": "tk", "mode": "text"}).json(),
            "verify": agent.post("/v1/memories/tk-a/verify").json(),
            "explain": agent.get("/v1/memories/tk-a/explain").json(),
            "key": agent.post("/memory/save", json={"agent": "bot", "key": "k", "content": '{"t": 1}'}).json(),
            "health": agent.get("/healthz").json(),
        }
        assert all(not counted(a) for a in answers.values()), {k: counted(a) for k, a in answers.items()}
        saved, again = answers["save"]["seq"], answers["again"]["seq"]
        assert is_token(saved) and is_token(again) and is_token(answers["batch"]["saved"][0]["seq"])
        # the same write, answered twice: two tokens, nothing in them to compare
        assert saved != again and decoded(server, saved) == decoded(server, again)
        assert answers["get"]["last_seq"] is None and all(m["last_seq"] is None for m in answers["query"]["memories"])
        assert is_token(answers["explain"]["seq"]) and all(s["seq"] is None for s in answers["explain"]["history"])
        assert is_token(answers["search"]["seq"]) and is_token(answers["key"]["seq"])
        # staff read the whole log: seqs, the same positions the tokens stand for
        staff = auditor.get("/v1/memories/tk-a/explain").json()
        assert [s["seq"] for s in staff["history"]][:1] == [decoded(server, saved)]
        assert isinstance(auditor.get("/v1/memories/tk-a").json()["last_seq"], int)


def test_a_token_passed_back_reads_and_a_bad_one_is_refused_naming_min_seq(server: Server, tmp_path: Path) -> None:
    with server.client("agent") as agent, server.client("security") as security:
        one = agent.post("/v1/memories", json=save_body("tk-r1", ttl="6h")).json()["seq"]
        two = agent.post("/v1/memories", json=save_body("tk-r2", ttl="6h")).json()["seq"]
        assert agent.get("/v1/memories/tk-r1", params={"min_seq": one}).status_code == 200
        both = agent.get("/v1/memories", params={"tenant": "acme", "min_seq": [one, two], "ids": ["tk-r1", "tk-r2"]})
        assert both.status_code == 200 and len(both.json()["memories"]) == 2
        searched = agent.post(
            "/v1/memories/search", json={"tenant": "acme", "query": "tk", "mode": "text", "min_seq": [two]}
        )
        assert searched.status_code == 200, searched.text
        with Warden(tmp_path / "another.db") as another:
            foreign = another.tokens.issue(1)
        raw = bytearray(base64.urlsafe_b64decode(one[4:]))
        raw[-1] ^= 1
        altered = "mwt_" + base64.urlsafe_b64encode(bytes(raw)).decode()
        forged = "mwt_" + base64.urlsafe_b64encode(bytes(36)).decode()
        for bad, says in (
            (foreign, "not a token this server issued"),
            (altered, "not a token this server issued"),
            (forged, "not a token this server issued"),
            ("mwt_short", "not a consistency token"),
            ("1", "this key is given tokens, not seqs"),  # a seq: an agent key may not probe the head with one
            ([one] * (MAX_GIVEN + 1), f"at most {MAX_GIVEN}"),
        ):
            for refused in (
                agent.get("/v1/memories/tk-r1", params={"min_seq": bad}),
                agent.get("/v1/memories", params={"tenant": "acme", "min_seq": bad}),
                agent.post(
                    "/v1/memories/search", json={"tenant": "acme", "query": "tk", "mode": "text", "min_seq": bad}
                ),
            ):
                assert refused.status_code == 422 and refused.json()["field"] == "min_seq", (bad, refused.text)
                assert says in refused.json()["problem"]
        # a security key reads seqs and may give either
        seq = decoded(server, two)
        assert security.get("/v1/memories/tk-r2", params={"min_seq": seq}).json()["last_seq"] == seq
        assert security.get("/v1/memories/tk-r2", params={"min_seq": two}).status_code == 200


def test_a_token_beyond_the_head_is_answered_at_once_telling_no_position(server: Server) -> None:
    head = server.head()
    with Warden(server.db) as w:  # as a store restored from an older backup would see a client's token
        ahead = w.tokens.issue(head + 1000)
    with server.client("agent") as agent, server.client("auditor") as auditor:
        refused = agent.get("/v1/memories", params={"tenant": "acme", "min_seq": ahead})
        body = refused.json()
        assert refused.status_code == 409 and body["error"] == "stale_view" and body["field"] == "min_seq"
        assert body["ahead"] is True and "have" not in body and "need" not in body
        assert not re.search(r"\d", body["problem"]), "no position in the words either"
        assert "retry-after" not in refused.headers, "no wait brings it"
        staff = auditor.get("/v1/memories", params={"tenant": "acme", "min_seq": head + 1000}).json()
        assert (staff["ahead"], staff["need"]) == (True, head + 1000)


def test_a_stale_view_tells_an_agent_no_position() -> None:
    agent = Positions(Principal("k", "agent", ("acme",)), lambda: Tokens(bytes(32)))
    staff = Positions(Principal("s", "auditor"), lambda: Tokens(bytes(32)))
    with pytest.raises(StaleView) as hidden, agent.waiting():
        raise StaleView(812, 1415)
    assert hidden.value.details() == {"ahead": False} and "812" not in str(hidden.value)
    with pytest.raises(StaleView) as told, staff.waiting():
        raise StaleView(812, 1415)
    assert told.value.details() == {"have": 812, "need": 1415, "ahead": False}
    # a staff key gives seqs (or tokens); an agent key only tokens; none beyond the bound
    assert staff.taken(["7", 9, staff.shown(3)]) == 9 and staff.shown(5) == 5
    for bad in (True, -1, 2**63, "x", 1.5):
        with pytest.raises(InvalidInput):
            staff.taken(bad)
    assert agent.taken([agent.shown(5), agent.shown(3)]) == 5 and agent.taken(None) is None
    with pytest.raises(InvalidInput):
        agent.taken(5)


def refused(result: Any) -> tuple[str, str]:
    """A tool's refusal: its error and field, from the API's JSON after the SDK's words."""
    body = json.loads(result.content[0].text.split(": ", 1)[1])
    return body["error"], body["field"]


def test_mcp_answers_an_agent_key_tokens(server: Server) -> None:
    async def main() -> None:
        async with (
            httpx2.AsyncClient(headers={"x-api-key": server.keys["agent2"]}, timeout=30) as http,
            McpClient(streamable_http_client(f"{server.url}/mcp", http_client=http)) as mcp,
        ):
            saved = await mcp.call_tool("memory_save", save_body("tk-mcp", tenant="globex", ttl="6h"))
            seq = json.loads(saved.content[0].text)["seq"]
            assert is_token(seq)
            got = await mcp.call_tool("memory_get", {"memory_id": "tk-mcp", "min_seq": seq})
            view = json.loads(got.content[0].text)
            assert view["usable"] and view["last_seq"] is None
            listed = await mcp.call_tool("memory_query", {"tenant": "globex", "min_seq": [seq]})
            assert not listed.is_error and not counted(json.loads(listed.content[0].text))
            forged = await mcp.call_tool("memory_get", {"memory_id": "tk-mcp", "min_seq": "mwt_" + "A" * 48})
            assert forged.is_error and refused(forged) == ("invalid_input", "min_seq")
            by_seq = await mcp.call_tool("memory_get", {"memory_id": "tk-mcp", "min_seq": 1})
            assert by_seq.is_error and refused(by_seq) == ("invalid_input", "min_seq")

    asyncio.run(main())


def test_the_operators_figures_are_for_staff(server: Server) -> None:
    anyone = httpx.Client(base_url=server.url, timeout=30)
    with anyone, server.client("agent") as agent, server.client("auditor") as auditor:
        assert anyone.get("/metrics").status_code == 401 and anyone.get("/metrics").json()["field"] == "x-api-key"
        assert agent.get("/metrics").status_code == 403
        bearer = {"authorization": f"Bearer {server.keys['auditor']}"}  # as Prometheus sends a credential
        for scraped in (auditor.get("/metrics"), anyone.get("/metrics", headers=bearer)):
            assert scraped.status_code == 200 and "memwarden_log_head" in scraped.text
        assert anyone.get("/healthz").json() == {"ok": True} and agent.get("/healthz").json() == {"ok": True}
        assert auditor.get("/healthz").json()["head_seq"] == server.head()
        for ready in (anyone.get("/readyz").json(), agent.get("/readyz").json()):
            assert "ready" in ready and not counted(ready)
        assert isinstance(auditor.get("/readyz").json()["head_seq"], int)


def test_the_console_shows_an_agent_key_no_seq(server: Server) -> None:
    with server.client("agent") as agent:
        assert agent.post("/v1/memories", json=save_body("tk-page", ttl="6h")).status_code == 201
    with signed_in(server, "agent") as page:
        shown = page.get("/console/memory", params={"tenant": "acme", "id": "tk-page"})
        assert shown.status_code == 200 and not re.search(r"seq \d|>Seq<", shown.text)
        then = page.get("/console/memory", params={"tenant": "acme", "id": "tk-page", "as_of": "2999-01-01T00:00:00Z"})
        assert not re.search(r"seq \d|mwt_", then.text)
    with signed_in(server, "auditor") as page:
        assert re.search(r"seq \d", page.get("/console/memory", params={"tenant": "acme", "id": "tk-page"}).text)


# -- the secret: made once, in the store, shared by every node, never logged -----------------------


def test_the_secret_is_made_once_and_every_node_reads_the_others_tokens(tmp_path: Path, backend: Backend) -> None:
    db = backend.db(tmp_path, "secret.db")
    Warden(db).close()  # the store exists; its secret not yet
    nodes = [Warden(db) for _ in range(4)]
    try:
        made: list[Tokens] = []
        start = threading.Barrier(len(nodes))

        def first_token(node: Warden) -> None:
            start.wait()
            made.append(node.tokens)

        with structlog.testing.capture_logs() as logged:
            threads = [threading.Thread(target=first_token, args=(n,)) for n in nodes]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert len(made) == len(nodes)
        for issuer in nodes:  # each node's token reads on every other: one secret, kept first by one of them
            token = issuer.tokens.issue(41)
            assert all(reader.tokens.position(token, "min_seq") == 41 for reader in nodes)
        with nodes[0].reading() as view:
            secret = view.side().server_secrets("consistency_tokens").get("consistency_tokens")
        assert secret is not None and len(secret) == 32
        for shown in (secret.hex(), base64.b64encode(secret).decode(), repr(nodes[0].tokens)):
            assert shown not in str(logged) or shown == repr(nodes[0].tokens)
        assert secret.hex() not in repr(nodes[0].tokens)
        export = tmp_path / "log.jsonl"
        nodes[0].export(export, caller=OPERATOR)
        assert secret.hex() not in export.read_text(encoding="utf-8"), "no event holds it"
    finally:
        for node in nodes:
            node.close()
    with Warden(db) as again:  # opened again: the same secret, not a new one
        assert again.tokens.position(Tokens(secret).issue(7), "min_seq") == 7


def test_a_staff_caller_never_makes_the_secret(tmp_path: Path, backend: Backend) -> None:
    db = backend.db(tmp_path, "staff.db")
    with Warden(db) as w:
        key = KeyStore(w).create("agent", tenants=["acme"], caller=OPERATOR)[1]
        staff = w.acting_as(OPERATOR)
        saved = staff.save(**save_body("s-1", ttl="6h"))
        assert isinstance(saved.seq, int) and staff.get("s-1", min_seq=saved.seq).usable
        with w.reading() as view:
            assert view.side().server_secrets("consistency_tokens").get("consistency_tokens") is None
        agent = w.acting_as(key)
        token = agent.save(**save_body("s-2", ttl="6h", scope={"tenant": "acme"})).seq
        assert is_token(token) and agent.get("s-2", min_seq=token).usable
        with w.reading() as view:
            assert view.side().server_secrets("consistency_tokens").get("consistency_tokens") is not None


# -- the feed and the router ----------------------------------------------------------------------


def test_a_feed_cursor_beyond_the_head_is_refused_at_once(server: Server) -> None:
    head = server.head()
    # a wait of 60 s on a client that gives up after 20: an answer that waited would time out
    with httpx.Client(base_url=server.url, headers={"x-api-key": server.keys["auditor"]}, timeout=20) as c:
        refused = c.get("/v1/events", params={"after": head + 50, "wait": 60})
        assert refused.status_code == 422 and refused.json()["field"] == "after"
        assert f"seq {head}" in refused.json()["problem"]
        assert c.get("/v1/events", params={"after": head, "wait": 0}).json() == {"events": [], "head": head}


def test_a_405_allows_what_the_api_documents_there(server: Server) -> None:
    with server.client("auditor") as c:
        paths = c.get("/openapi.json").json()["paths"]
        for path, operations in paths.items():
            documented = sorted(m.upper() for m in operations if m in ("get", "post", "put", "patch", "delete"))
            concrete = re.sub(r"\{[^}]+\}", "x", path)
            for method in ("DELETE", "PATCH", "OPTIONS"):
                answer = c.request(method, concrete)
                assert answer.status_code == 405, (method, path, answer.status_code)
                assert answer.headers["allow"] == ", ".join(documented), (method, path, answer.headers["allow"])
        # the console's pages too (no OpenAPI there): a wrong method is 405, not "no such endpoint"
        console = c.request("PUT", "/console/memories")
        assert console.status_code == 405 and console.headers["allow"] == "GET"
