"""What one sink may cost the others, from the attack on sinks: a sink's
answer is read within its timeout for all of it and within the fetch's size
cap; a secret that is no Standard Webhooks secret fails the sink, named, not
the revocation; two tenants never share a Redis key."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from memwarden.engine import Fetchers, InvalidInput, SinkUnavailable, sinks_from_table
from memwarden.engine.sinks._clients import RedisSink, client_for
from memwarden.events import FrozenClock

from .sink_receiver import new_secret


class Dripping(BaseHTTPRequestHandler):
    """Answers 200 with a long body one byte at a time, or a huge one at once."""

    huge = False

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-length", str(64 * 1024 * 1024 if self.huge else 100_000))
        self.end_headers()
        try:
            if self.huge:
                for _ in range(64):
                    self.wfile.write(b"x" * (1024 * 1024))
                return
            for _ in range(100):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.1)
        except (BrokenPipeError, ConnectionResetError):
            pass  # memwarden hung up, as it should

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def dripping() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Dripping)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/notices"
    server.shutdown()
    Dripping.huge = False


def webhook(url: str, monkeypatch: pytest.MonkeyPatch, secret: str | None = None) -> Any:
    monkeypatch.setenv("BOUNDS_SECRET", secret or new_secret())
    (spec,) = sinks_from_table(
        {"hook": {"kind": "webhook", "url": url, "probe_url": url, "secret_env": "BOUNDS_SECRET", "timeout": 1}}
    )
    return spec, client_for(spec, Fetchers(max_bytes=1024 * 1024).allowing_local(), FrozenClock("2026-01-05T09:00:00Z"))


@pytest.mark.parametrize("huge", [False, True])
def test_a_sink_that_drips_or_floods_its_answer_fails_within_its_timeout(
    dripping: str, monkeypatch: pytest.MonkeyPatch, huge: bool
) -> None:
    Dripping.huge = huge
    _, client = webhook(dripping, monkeypatch)
    with pytest.raises(SinkUnavailable) as failed:
        client.deliver("ntc_1", '{"type": "ping"}')
    # a timeout of 1 s for all of it, not per byte read: the drip would never trip a per-read one
    assert ("larger than" if huge else "within 1") in str(failed.value)
    with pytest.raises(SinkUnavailable):
        client.held("ntc_1", {"acme": ["m1"]})
    client.close()


def test_a_secret_that_is_no_standard_webhooks_secret_fails_the_sink_naming_it(
    dripping: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, client = webhook(dripping, monkeypatch, secret="TopSecretEnvPlain")
    with pytest.raises(InvalidInput) as refused:
        spec.secret()
    assert refused.value.field == "sinks.hook.secret_env" and "TopSecret" not in refused.value.problem
    with pytest.raises(SinkUnavailable) as failed:  # the delivery fails, recorded and retried
        client.deliver("ntc_1", "{}")
    assert "secret_env" in str(failed.value) and "TopSecret" not in str(failed.value)
    client.close()


def test_two_tenants_never_share_a_redis_key() -> None:
    pytest.importorskip("redis")
    (spec,) = sinks_from_table({"cache": {"kind": "redis", "url": "redis://127.0.0.1:6379/0", "prefix": "mw:"}})
    sink = RedisSink(spec, FrozenClock("2026-01-05T09:00:00Z"))
    try:
        assert sink.key("a", "b:c") != sink.key("a:b", "c")
        assert sink.key("a%3Ab", "c") != sink.key("a:b", "c")
        assert sink.key("acme", "m1") == "mw:acme:m1"  # plain names keep their keys
    finally:
        sink.close()


def test_a_sinks_url_is_shown_without_its_password_or_query_values() -> None:
    (spec,) = sinks_from_table(
        {
            "hook": {
                "kind": "webhook",
                "url": "https://user:HookPass@hooks.example/notices?token=QueryTok",
                "ack": True,
                "secret_env": "X",
            }
        }
    )
    shown = spec.describe()["url"]
    assert "HookPass" not in shown and "QueryTok" not in shown and shown.startswith("https://user:***@hooks.example")
