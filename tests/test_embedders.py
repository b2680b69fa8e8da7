"""The embedders: what a model endpoint or the operator's function answers
is checked like a caller's vector, a failure is the embedder's (503, the
caller told which embedder and what kind of failure, never the endpoint's
address or its key), and an endpoint is held to the fetch's rules."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from memwarden.engine import OPERATOR, CallableEmbedder, EmbedderFailed, Fetchers, HttpEmbedder, Warden
from structlog.testing import capture_logs

DIMS = 8


class FakeModel(BaseHTTPRequestHandler):
    """An OpenAI-compatible /embeddings endpoint that answers as ``mode`` says."""

    mode = "good"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        count = len(body["input"])
        good = {"data": [{"index": i, "embedding": [1.0 + i] * DIMS} for i in range(count)]}
        answers: dict[str, bytes] = {
            "good": json.dumps(good).encode(),
            "lists": json.dumps({"data": [[0.1] * DIMS] * count}).encode(),
            "object": json.dumps({"data": {"a": 1}}).encode(),
            "deep": b"[" * 100_000 + b"]" * 100_000,
            "huge": b'{"data": [' + b" " * (8 * 1024 * 1024) + b"]}",
            "not json": b"<html>",
            "too big": json.dumps({"data": [{"embedding": [1e300] * DIMS}] * count}).encode(),
        }
        if self.mode == "drip":
            self.send_response(200)
            self.end_headers()
            for _ in range(40):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.1)
            return
        if self.mode == "500":
            self.send_response(500)
            self.end_headers()
            return
        data = answers[self.mode]
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def model() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/embeddings?api-key=SECRET123"
    server.shutdown()
    FakeModel.mode = "good"


def embedder(url: str) -> HttpEmbedder:
    return HttpEmbedder(url, "m", DIMS, Fetchers(timeout=1.0).allowing_local())


def test_a_good_answer_is_the_vectors_in_order(model: str) -> None:
    assert embedder(model).embed(["a", "b"]) == [(1.0,) * DIMS, (2.0,) * DIMS]


@pytest.mark.parametrize(
    ("mode", "failure"),
    [
        ("lists", "not an embeddings answer"),
        ("object", "not an embeddings answer"),
        ("deep", "not_text"),
        ("not json", "not_text"),
        ("huge", "too_large"),
        ("drip", "timeout"),
        ("500", "http_status"),
        ("too big", "at most"),
    ],
)
def test_a_bad_answer_is_the_embedders_failure_and_tells_no_address(model: str, mode: str, failure: str) -> None:
    FakeModel.mode = mode
    # a drip is cut by the fetch's one deadline (1 s): it would never trip a read timeout per byte
    with capture_logs() as logs, pytest.raises(EmbedderFailed) as failed:
        embedder(model).embed(["a"])
    assert failed.value.field == "embedder" and failure in failed.value.problem, failed.value.problem
    assert failed.value.status == 503
    for secret in ("SECRET123", "127.0.0.1", "/v1/embeddings"):
        assert secret not in failed.value.problem
    assert [entry["embedder"] for entry in logs if entry["event"] == "embedder_failed"] == [f"http:m/{DIMS}"]


def test_an_endpoint_is_held_to_the_address_rules(model: str) -> None:
    with pytest.raises(EmbedderFailed) as failed:
        HttpEmbedder(model, "m", DIMS, Fetchers(timeout=1.0)).embed(["a"])
    assert "refused_address" in failed.value.problem and "SECRET123" not in failed.value.problem


def test_an_operators_function_may_answer_numpy_and_its_failure_says_no_more(tmp_path: Path) -> None:
    as_numpy = CallableEmbedder("np", lambda texts: np.ones((len(texts), DIMS), dtype=np.float32), DIMS)
    assert as_numpy.embed(["a", "b"]) == [(1.0,) * DIMS] * 2
    rows = CallableEmbedder("np-rows", lambda texts: [np.full(DIMS, 0.5, dtype=np.float32) for _ in texts], DIMS)
    assert rows.embed(["a"]) == [(0.5,) * DIMS]

    def leaky(texts: Any) -> Any:
        raise ConnectionError("postgres://admin:hunter2@10.0.0.5/models is down")

    w = Warden(tmp_path / "e.db", embedder=CallableEmbedder("leaky", leaky, DIMS))
    try:
        head = w.head_seq()
        with pytest.raises(EmbedderFailed) as failed:
            w.search(tenant="acme", query_text="배포", caller=OPERATOR)
        assert "hunter2" not in failed.value.problem and "ConnectionError" in failed.value.problem
        with pytest.raises(EmbedderFailed):
            w.save(
                memory_id="m",
                kind="external_fact",
                summary="s",
                content="c",
                source_url="https://e.example/m",
                scope={"tenant": "acme"},
                caller=OPERATOR,
            )
        assert w.head_seq() == head
    finally:
        w.close()


def test_the_policy_files_embedder_sets_the_similarity_floor(tmp_path: Path) -> None:
    """``[embedder] min_similarity``: the model's own floor, which every
    search's vector must pass unless the search gives its own."""
    from memwarden.engine import InvalidInput, PolicyFile

    policy = tmp_path / "policy.toml"
    policy.write_text('[embedder]\nkind = "hash"\ndims = 64\nmin_similarity = 0.5\n', encoding="utf-8")
    settings = PolicyFile.read(policy)
    with Warden(tmp_path / "m.db", embedder=settings.embedder(settings.fetchers())) as w:
        assert w.embedder is not None and w.embedder.min_similarity == 0.5
        for memory_id, text in (("deploy", "deploy approvals need two reviewers"), ("lunch", "friday lunch menu")):
            w.save(
                memory_id=memory_id,
                kind="external_fact",
                summary=text,
                content=text,
                source_url=f"https://example.org/{memory_id}",
                scope={"tenant": "acme"},
                ttl="6h",
                caller=OPERATOR,
            )
        asked = dict(tenant="acme", query_text="deploy reviewers", mode="vector", caller=OPERATOR)
        found = w.search(**asked)
        assert [f.view.memory_id for f in found] == ["deploy"] and found[0].similarity > 0.5
        assert [f.view.memory_id for f in w.search(**asked, min_similarity=-1)] == ["deploy", "lunch"]
    policy.write_text('[embedder]\nkind = "hash"\nmin_similarity = 1.0\n', encoding="utf-8")
    with pytest.raises(InvalidInput) as refused:
        PolicyFile.read(policy)
    assert refused.value.field == "embedder.min_similarity"
