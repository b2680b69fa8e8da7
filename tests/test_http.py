"""The HTTP face on a real uvicorn server on 127.0.0.1, driven by httpx."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from memwarden.events import content_checksum

from . import _http_server
from ._http_server import Server, save_body, start_server
from .backends import Backend

server = _http_server.server  # the module's live server (a fixture)


def test_openapi_and_docs(server: Server) -> None:
    with server.client() as c:
        spec = c.get("/openapi.json").json()
        assert {"/v1/memories", "/memory/save", "/memory/load", "/v1/revocations", "/v1/events"} <= set(spec["paths"])
        assert c.get("/docs").status_code == 200


def test_memory_api_round_trip_byte_exact(server: Server) -> None:
    text = "# 작업 규칙\n- 금요일 배포 금지 🚫\n- naïve café\r\n"
    content = json.dumps(
        {
            "text": text,
            "checksum": content_checksum(text),
            "saved_at": "2026-01-05T09:00:00Z",
            "source": "https://git.example/acme/MEMORY.md",
            "branch": "main",
        },
        ensure_ascii=False,
    )
    with server.client("agent") as c:
        saved = c.post("/memory/save", json={"agent": "bot", "key": "MEMORY.md", "content": content})
        assert saved.status_code == 200, saved.text
        assert saved.json()["status"] == "saved" and saved.json()["key"] == "MEMORY.md"
        loaded = c.get("/memory/load", params={"agent": "bot"}).json()["memories"]
        entry = next(m for m in loaded if m["key_name"] == "MEMORY.md")
        assert entry["content"] == content and entry["status"] == "usable"
        assert entry["checksum"] == content_checksum(content) and entry["saved_at"].startswith("2026-01-05T09:00:00")
        # again: a new version, the older one kept
        c.post("/memory/save", json={"agent": "bot", "key": "MEMORY.md", "content": "plain text v2"})
        history = c.get("/memory/load", params={"agent": "bot", "history": 1}).json()["memories"]
        entry = next(m for m in history if m["key_name"] == "MEMORY.md")
        assert entry["content"] == "plain text v2" and [h["version"] for h in entry["history"]] == [1, 2]
        assert entry["history"][0]["content"] == content


def test_memory_api_checksum_mismatch_names_both_values(server: Server) -> None:
    wrong = "sha256:" + "1" * 64
    head = server.head()
    with server.client("agent") as c:
        response = c.post(
            "/memory/save",
            json={"agent": "bot", "key": "k", "content": json.dumps({"text": "hello", "checksum": wrong})},
        )
    assert response.status_code == 422
    body = response.json()
    assert (
        body["field"] == "content.checksum" and body["given"] == wrong and body["actual"] == content_checksum("hello")
    )
    assert wrong in body["problem"] and content_checksum("hello") in body["problem"]
    assert server.head() == head


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{not json", "body"),
        (b'{"agent": 5, "key": "k", "content": "c"}', "agent"),
        (b'{"agent": "bot", "key": "k", "content": "c", "extra": 1}', "extra"),
        (b'{"agent": "bot", "key": "k"}', "content"),
        (b'{"agent": "bot", "key": "two words", "content": "c"}', "key"),
        (b"[]", "body"),
    ],
)
def test_bad_bodies_are_4xx_naming_the_field_and_change_nothing(server: Server, body: bytes, field: str) -> None:
    head = server.head()
    with server.client("agent") as c:
        response = c.post("/memory/save", content=body, headers={"content-type": "application/json"})
    assert 400 <= response.status_code < 500
    assert response.json()["field"].startswith(field), response.json()
    assert server.head() == head


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/v1/policies/%ED%A0%80", "path"),  # an escaped lone surrogate
        ("/v1/policies/x%FFy", "path"),
        ("/v1/memories?tenant=acme&text=%FE", "query"),
    ],
)
def test_escapes_that_are_not_utf8_are_refused_not_replaced(server: Server, url: str, field: str) -> None:
    head = server.head()
    with server.client("security") as c:
        response = c.request("POST" if "policies" in url else "GET", url, json={"version": 2})
    # decoded, each would become U+FFFD, and x%FEy and x%FFy would name one policy
    assert response.status_code == 422 and response.json()["field"] == field, response.text
    assert server.head() == head


def test_oversized_bodies_and_content(server: Server) -> None:
    head = server.head()
    with server.client("agent") as c:
        too_big = c.post("/memory/save", json={"agent": "bot", "key": "big", "content": "x" * 1_300_000})
        assert too_big.status_code == 413 and too_big.json()["field"] == "body"
        just_over = c.post("/memory/save", json={"agent": "bot", "key": "big", "content": "가" * 70_000})
        assert just_over.status_code == 413 and just_over.json()["field"] == "content"
    assert server.head() == head


MATRIX = [
    # (method, path, body, {who: expected status})
    ("POST", "/v1/memories", save_body("m-acme"), {"agent": 201, "agent2": 403, "security": 403, "auditor": 403}),
    ("POST", "/v1/memories", save_body("m-globex", tenant="globex"), {"agent": 403, "agent2": 201, "auditor": 403}),
    # a batch names a key's other tenant per item (422 batch_refused), before any row of it is read
    (
        "POST",
        "/v1/memories/batch",
        {"memories": [save_body("m-batch-acme")]},
        {"agent": 201, "agent2": 422, "security": 403, "auditor": 403},
    ),
    ("GET", "/v1/memories?tenant=acme", None, {"agent": 200, "agent2": 403, "security": 200, "auditor": 200}),
    ("GET", "/v1/memories?tenant=globex", None, {"agent": 403, "agent2": 200, "multi": 200, "auditor": 200}),
    # another tenant's memory answers exactly as one that does not exist
    ("GET", "/v1/memories/m-acme", None, {"agent": 200, "agent2": 404, "multi": 200, "security": 200, "auditor": 200}),
    ("GET", "/v1/memories/m-globex", None, {"agent": 404, "agent2": 200, "multi": 200, "auditor": 200}),
    ("GET", "/v1/memories/m-acme/explain", None, {"agent": 200, "agent2": 404, "auditor": 200}),
    ("POST", "/v1/memories/m-acme/verify", None, {"agent2": 404, "auditor": 403}),
    ("GET", "/v1/due", None, {"agent": 200, "security": 200, "auditor": 200}),
    (
        "POST",
        "/v1/revocations",
        {"selector": {"ids": ["nothing"]}, "reason": "r"},
        {"agent": 403, "auditor": 403, "security": 201},
    ),
    ("POST", "/v1/policies/p-test", {"version": 2}, {"agent": 403, "auditor": 403, "security": 200}),
    # an agent key erases only its own memories: one it may not see answers as a missing one
    ("POST", "/v1/erasures", {"memory_id": "missing", "reason": "r"}, {"agent": 404, "auditor": 403, "security": 404}),
    ("GET", "/v1/replay?seq=0", None, {"agent": 403, "security": 200, "auditor": 200}),
    ("GET", "/v1/replay?seq=0&limit=1", None, {"agent": 403, "agent2": 403, "security": 200, "auditor": 200}),
    ("GET", "/v1/audit/verify", None, {"agent": 403, "security": 200, "auditor": 200}),
    ("GET", "/v1/audit/head", None, {"agent": 403, "auditor": 200}),
    ("GET", "/v1/stats", None, {"agent": 403, "auditor": 200}),
    ("GET", "/v1/events?after=0&limit=5", None, {"agent": 403, "security": 200, "auditor": 200}),
    (
        "POST",
        "/memory/save",
        {"agent": "bot", "key": "mx", "content": "c"},
        {"agent": 200, "security": 403, "auditor": 403},
    ),
    ("POST", "/memory/save", {"agent": "other-bot", "key": "mx", "content": "c"}, {"agent": 403, "agent2": 200}),
    ("GET", "/memory/load?agent=bot", None, {"agent": 200, "agent2": 200, "auditor": 422}),
    ("GET", "/memory/load?agent=bot&tenant=acme", None, {"auditor": 200, "agent2": 403}),
]


@pytest.mark.parametrize(
    "url",
    [
        "/v1/memories?tenant=acme&projcet=apollo",  # a misspelt filter would list the whole tenant
        "/v1/memories/m1?tenant=acme&verison=1",
        "/v1/revocations?limit=5&limt=5",
    ],
)
def test_a_query_parameter_the_route_does_not_take_is_refused_naming_it(server: Server, url: str) -> None:
    head = server.head()
    with server.client("security") as c:
        response = c.get(url)
    name = url.rsplit("&", 1)[1].split("=")[0]
    assert response.status_code == 422 and response.json()["field"] == name, response.text
    assert server.head() == head


def test_role_endpoint_tenant_matrix(server: Server) -> None:
    for method, path, body, expected in MATRIX:
        for who, status in expected.items():
            with server.client(who) as c:
                response = c.request(method, path, json=body)
            assert response.status_code == status, (method, path, who, response.status_code, response.text)
            assert response.headers["content-type"].startswith("application/json")
        for who in (None, "bogus", "revoked"):
            with server.client(who) as c:
                response = c.request(method, path, json=body)
            assert response.status_code == 401, (method, path, who)
            assert response.json()["field"] == "x-api-key"


def test_agent_bound_to_its_name(server: Server) -> None:
    with server.client("agent") as c:
        other = c.post("/v1/memories", json=save_body("m-other-agent", scope={"agent": "someone-else"}))
        assert other.status_code == 403
        mine = c.post("/v1/memories", json=save_body("m-mine"))
        assert mine.status_code == 201
        got = c.get("/v1/memories/m-mine").json()
        assert got["scope"]["agent"] == "bot"  # saved as the key's agent
        local = c.post("/v1/memories", json=save_body("m-local", source_url="file:///etc/passwd"))
        assert local.status_code == 422 and local.json()["field"] == "source_url"


def test_revocation_over_http_is_read_back_through_http(server: Server) -> None:
    with server.client("agent2") as c:
        assert c.post("/v1/memories", json=save_body("g-1", tenant="globex")).status_code == 201
    with server.client("security") as c:
        rev = c.post("/v1/revocations", json={"selector": {"tenant": "globex"}, "reason": "test"}).json()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            data = c.get(f"/v1/revocations/{rev['revocation_id']}/readback").json()
            if data["confirmed"]:
                break
            time.sleep(0.1)
        assert data["confirmed"], data
        assert "http_query" in data["records"][-1]["paths_checked"]
    with server.client("agent2") as c:
        assert all(
            m["memory_id"] != "g-1" for m in c.get("/v1/memories", params={"tenant": "globex"}).json()["memories"]
        )
        assert c.get("/v1/memories/g-1").json()["reason"] == "revoked"


def test_event_feed_long_polls(server: Server) -> None:
    with server.client("auditor") as c:
        head = c.get("/v1/audit/head").json()["seq"]

        def later() -> None:
            time.sleep(0.5)  # paces the save after the poll starts (saved first, the poll answers at once: the same)
            with server.client("agent") as a:
                a.post("/v1/memories", json=save_body("feed-1"))

        threading.Thread(target=later).start()
        # a poll that ran out its wait would answer no event: this one is woken by the save
        data = c.get("/v1/events", params={"after": head, "wait": 60}).json()
        assert [e["payload"]["memory_id"] for e in data["events"]] == ["feed-1"] and data["head"] == head + 1
        empty = c.get("/v1/events", params={"after": data["head"], "wait": 0}).json()
        assert empty["events"] == []


def test_min_seq_answers_409_when_the_view_is_behind(server: Server) -> None:
    with server.client("auditor") as c:
        head = c.get("/v1/audit/head").json()["seq"]
        response = c.get("/v1/memories", params={"tenant": "acme", "min_seq": head + 1000})
    assert response.status_code == 409 and response.json()["field"] == "min_seq"
    # beyond the log's head: no wait brings it, so no Retry-After (#58)
    assert response.json()["ahead"] is True and "retry-after" not in response.headers


def test_damage_to_the_servers_own_log_or_view_is_a_503_naming_it(tmp_path: Path, backend: Backend) -> None:
    """Not a 422: the request was fine, the store is not (a file edited by hand)."""
    damaged = start_server(backend.db(tmp_path, "damaged.db"), "--no-scheduler")
    try:
        with damaged.client("agent") as c:
            assert c.post("/v1/memories", json=save_body("d-1")).status_code == 201
        seq = damaged.head()
        backend.rewrite_payload(damaged.db, seq, b"\x00not text")
        with damaged.client("auditor") as c:
            response = c.get("/v1/memories/d-1/explain")
        assert response.status_code == 503, response.text
        assert response.json()["error"] == "log_damaged" and f"event seq {seq}" in response.json()["problem"]
        backend.set_view(damaged.db, "d-1", derived_from="7")
        with damaged.client("agent") as c:
            response = c.get("/v1/memories/d-1")
        assert response.status_code == 503, response.text
        assert response.json()["error"] == "projection_damaged" and "memwarden rebuild" in response.json()["problem"]
    finally:
        damaged.proc.terminate()
        damaged.proc.wait(timeout=30)


def test_replay_pages_with_a_cursor_and_streams_the_whole_view(server: Server) -> None:
    with server.client("agent") as c:
        for i in range(3):
            assert c.post("/v1/memories", json=save_body(f"past-{i}")).status_code == 201
        head = server.head()
    with server.client("auditor") as c:
        whole = c.get("/v1/replay", params={"seq": head, "tenant": "acme"})
        assert whole.status_code == 200 and whole.headers["content-type"].startswith("application/json")
        ids = [m["memory_id"] for m in whole.json()["memories"]]
        assert [m for m in ids if m.startswith("past-")] == ["past-0", "past-1", "past-2"]
        seen: list[str] = []
        after = None
        while True:
            params: dict[str, object] = {"seq": head, "tenant": "acme", "limit": 2}
            page = c.get("/v1/replay", params={**params, **({"after": after} if after else {})}).json()
            seen += [m["memory_id"] for m in page["memories"]]
            if (after := page["next"]) is None:
                break
        assert seen == ids
        refused = c.get("/v1/replay", params={"seq": head, "limit": 2, "after": "garbage"})
        assert refused.status_code == 422 and refused.json()["field"] == "after"


def test_a_batch_save_is_all_or_nothing_with_each_refusal_named(server: Server) -> None:
    with server.client("agent") as c:
        before = server.head()
        saved = c.post("/v1/memories/batch", json={"memories": [save_body(f"batch-{i}") for i in range(3)]})
        assert saved.status_code == 201, saved.text
        assert [s["memory_id"] for s in saved.json()["saved"]] == ["batch-0", "batch-1", "batch-2"]
        assert server.head() == before + 3
        assert c.get("/v1/memories/batch-1").json()["content"] == "batch-1의 내용"
        head = before + 3
        refused = c.post(
            "/v1/memories/batch",
            json={
                "memories": [
                    save_body("batch-ok"),
                    save_body("batch-other", tenant="globex"),
                    save_body("batch-local", source_url="file:///etc/passwd"),
                    save_body("batch-agent", scope={"agent": "someone-else"}),
                ]
            },
        )
        assert refused.status_code == 422, refused.text
        body = refused.json()
        assert body["error"] == "batch_refused" and body["field"] == "memories"
        assert [(e["index"], e["field"]) for e in body["errors"]] == [
            (1, "scope.tenant"),
            (2, "source_url"),
            (3, "scope.agent"),
        ]
        assert server.head() == head, "nothing of a refused batch is written"
        assert c.get("/v1/memories/batch-ok").status_code == 404
        empty = c.post("/v1/memories/batch", json={"memories": []})
        assert empty.status_code == 422 and empty.json()["field"] == "memories"
    with server.client("auditor") as c:
        assert c.post("/v1/memories/batch", json={"memories": [save_body("x")]}).status_code == 403


def test_a_batch_body_checked_off_the_event_loop_is_refused_as_any_body(server: Server) -> None:
    """The batch's body is checked in its worker thread, not by FastAPI in
    the event loop's: the same refusals, naming the same fields."""
    with server.client("agent") as c:
        head = server.head()
        unknown = save_body("b-1") | {"colour": "red"}
        missing = {k: v for k, v in save_body("b-2").items() if k != "summary"}
        refused = c.post("/v1/memories/batch", json={"memories": [save_body("b-0"), unknown, missing]})
        assert refused.status_code == 422, refused.text
        body = refused.json()
        assert body["error"] == "invalid_input"
        assert {e["field"] for e in body["errors"]} == {"memories.1.colour", "memories.2.summary"}
        for shape in ({"memories": "all of them"}, ["not", "an", "object"], {"memories": [1]}, {}):
            answer = c.post("/v1/memories/batch", json=shape)
            assert answer.status_code == 422 and answer.json()["field"].startswith(("memories", "body")), answer.text
        garbled = c.post("/v1/memories/batch", content=b'{"memories": [', headers={"content-type": "application/json"})
        assert garbled.status_code == 400 and garbled.json()["field"] == "body"
        assert server.head() == head, "a refused body writes nothing"
