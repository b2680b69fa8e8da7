"""Re-verification against the source: files, git, http(s), callables."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from memwarden.engine import OPERATOR, AddressPolicy, Fetchers, FetchFailed, Warden
from memwarden.events import FrozenClock

from .conftest import Cli


class Handler(BaseHTTPRequestHandler):
    pages: ClassVar[dict[str, bytes]] = {}

    def do_GET(self) -> None:
        if self.path.startswith("/redirect/"):
            n = int(self.path.rsplit("/", 1)[1])
            self.send_response(302)
            self.send_header("Location", f"/redirect/{n - 1}" if n > 1 else "/page")
            self.end_headers()
            return
        if self.path == "/slow":
            time.sleep(2.5)  # well past the fetchers' 1 s timeout
        if self.path == "/big":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"x" * 300_000)
            return
        body = self.pages.get(self.path)
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_same_content_reverifies_with_new_times(
    warden: Warden, clock: FrozenClock, tmp_path: Path, run_cli: Cli
) -> None:
    source = tmp_path / "fact.txt"
    source.write_text("환율 1달러 = 1,350원", encoding="utf-8")
    warden.save(
        memory_id="fx",
        kind="research_result",
        summary="환율",
        content="환율 1달러 = 1,350원",
        source_url=source.as_uri(),
        scope={"tenant": "acme"},
        caller=OPERATOR,
    )
    clock.advance("3h")
    assert (
        warden.get("fx", caller=OPERATOR).reason == "expired" and warden.get("fx", caller=OPERATOR).action == "reverify"
    )
    result = warden.verify("fx", caller=OPERATOR)
    assert (result.outcome, result.seq) == ("verified", 2)
    view = warden.get("fx", caller=OPERATOR)
    assert view.usable and view.fetched_at == warden.now() and view.verified_at == warden.now()
    assert view.expires_at == "2026-01-05T13:00:00.000000Z"  # its 1h lifetime, from now
    assert run_cli.json("stats")["weeks"][0]["reverified_after_expiry"] == 1
    data = run_cli.json("verify", "fx")  # the CLI's clock is the wall clock: fine for same content
    assert data == {"results": [{"memory_id": "fx", "outcome": "verified", "detail": None, "seq": 3, "tenant": "acme"}]}


def test_changed_content_invalidates_and_accept_saves_a_new_version(
    warden: Warden, tmp_path: Path, run_cli: Cli
) -> None:
    source = tmp_path / "fact.txt"
    source.write_text("v1", encoding="utf-8")
    warden.save(
        memory_id="f",
        kind="external_fact",
        summary="s",
        content="v1",
        source_url=source.as_uri(),
        scope={"tenant": "acme"},
        caller=OPERATOR,
    )
    source.write_text("v2", encoding="utf-8")
    result = run_cli("verify", "f", "--json")
    assert result.exit_code == 1 and '"outcome":"changed"' in result.stdout
    view = warden.get("f", caller=OPERATOR)
    assert not view.usable and view.reason == "source_changed" and view.action == "reverify"
    data = run_cli.json("verify", "f", "--accept")
    assert data["results"][0]["outcome"] == "updated"
    view = warden.get("f", caller=OPERATOR)
    assert view.usable and view.content == "v2" and view.version == 2


def test_fetch_failure_marks_unknown_until_a_later_success(warden: Warden, tmp_path: Path) -> None:
    source = tmp_path / "gone.txt"
    source.write_text("here", encoding="utf-8")
    warden.save(
        memory_id="g",
        kind="external_fact",
        summary="s",
        content="here",
        source_url=source.as_uri(),
        scope={"tenant": "acme"},
        caller=OPERATOR,
    )
    source.unlink()
    assert warden.verify("g", caller=OPERATOR).outcome == "failed"
    view = warden.get("g", caller=OPERATOR)
    assert not view.usable and view.reason == "unknown" and view.action == "treat_as_unknown"
    assert [d.reason for d in warden.due(caller=OPERATOR)] == ["unknown"]
    source.write_text("here", encoding="utf-8")
    assert warden.verify("g", caller=OPERATOR).outcome == "verified" and warden.get("g", caller=OPERATOR).usable


def test_http_fetcher(warden: Warden, server: str) -> None:
    Handler.pages["/page"] = "서울 기온 12도".encode()
    # the test server is on loopback: the operator's allow-list admits it
    warden.fetchers = Fetchers(
        timeout=1.0, max_bytes=100_000, max_redirects=3, addresses=AddressPolicy.of(["127.0.0.1/32"])
    )
    warden.save(
        memory_id="h",
        kind="external_fact",
        summary="s",
        content="서울 기온 12도",
        source_url=f"{server}/page",
        scope={"tenant": "acme"},
        caller=OPERATOR,
    )
    assert warden.verify("h", caller=OPERATOR).outcome == "verified"
    row = {"source_url": f"{server}/redirect/2"}
    assert warden.fetchers.fetch(row) == "서울 기온 12도"
    with pytest.raises(FetchFailed, match="http_status .more than 3 redirects"):
        warden.fetchers.fetch({"source_url": f"{server}/redirect/5"})
    with pytest.raises(FetchFailed, match="too_large"):
        warden.fetchers.fetch({"source_url": f"{server}/big"})
    with pytest.raises(FetchFailed, match="timeout"):
        warden.fetchers.fetch({"source_url": f"{server}/slow"})
    with pytest.raises(FetchFailed, match="HTTP 404"):
        warden.fetchers.fetch({"source_url": f"{server}/missing"})


def test_registered_callables_and_verify_due(warden: Warden, clock: FrozenClock, run_cli: Cli) -> None:
    answers = {"a": "alpha", "b": "beta"}
    warden.fetchers.register("kv", lambda row: answers[row["memory_id"]])
    for key in ("a", "b"):
        warden.save(
            memory_id=key,
            kind="research_result",
            summary=key,
            content=answers[key],
            source_url="callable:kv",
            scope={"tenant": "acme"},
            caller=OPERATOR,
        )
    answers["b"] = "changed"
    clock.advance("2h")
    results = {r.memory_id: r.outcome for r in warden.verify_due(caller=OPERATOR)}
    assert results == {"a": "verified", "b": "changed"}
    assert warden.fetchers.describe({"source_url": "callable:kv"}) == "callable:kv"
    with pytest.raises(FetchFailed, match="no callable registered"):
        warden.fetchers.fetch({"source_url": "callable:nothing"})
    bad = run_cli("verify")
    assert bad.exit_code == 2 and "memory_id" in bad.stderr


def test_verify_cannot_bring_back_revoked_or_erased(warden: Warden, tmp_path: Path) -> None:
    source = tmp_path / "s.txt"
    source.write_text("x", encoding="utf-8")
    for key in ("r", "e"):
        warden.save(
            memory_id=key,
            kind="external_fact",
            summary="s",
            content="x" if key == "r" else "e-text",
            source_url=source.as_uri(),
            scope={"tenant": "acme", "project": key},
            caller=OPERATOR,
        )
    warden.revoke({"tenant": "acme", "project": "r"}, reason="r", caller=OPERATOR)
    warden.erase(memory_id="e", reason="asked", caller=OPERATOR)
    assert warden.verify("r", caller=OPERATOR).outcome == "revoked" and not warden.get("r", caller=OPERATOR).usable
    assert warden.verify("e", caller=OPERATOR).outcome == "erased" and not warden.get("e", caller=OPERATOR).usable
