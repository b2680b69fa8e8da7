"""Safe source fetching: an agent names a source, memwarden fetches it from
inside the operator's network. Real HTTP servers on loopback play the
internal services; every path that fetches (the fetcher, HTTP verify, the
Memory API, MCP, the scheduler) must refuse to reach them, and none of them
may ever receive a request."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from memwarden.engine import OPERATOR, AddressPolicy, Fetchers, FetchFailed, PolicyFile, Scheduler, TtlPolicy, Warden
from memwarden.events import FrozenClock

from ._http_server import Server, save_body, start_server
from .backends import Backend

SECRET = "internal: db password hunter2"


class Internal(BaseHTTPRequestHandler):
    """An internal service; ``hits`` counts every request it ever gets."""

    hits: ClassVar[dict[str, int]] = {}
    name = "internal"

    def do_GET(self) -> None:
        Internal.hits[self.server.server_address[0]] = Internal.hits.get(self.server.server_address[0], 0) + 1
        here = f"http://{self.server.server_address[0]}:{self.server.server_address[1]}"
        if self.path.startswith("/chain/"):  # /chain/N?to=URL: N hops, then to URL
            n, _, to = self.path.removeprefix("/chain/").partition("?to=")
            self.send_response(302)
            self.send_header("Location", f"{here}/chain/{int(n) - 1}?to={to}" if int(n) > 1 else to)
            self.end_headers()
            return
        if self.path == "/drip":  # one byte at a time, for far longer than any deadline
            self.send_response(200)
            self.end_headers()
            for _ in range(200):
                try:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(0.1)
            return
        if self.path in ("/big", "/big-declared"):
            self.send_response(200)
            if self.path == "/big-declared":
                self.send_header("Content-Length", str(10_000_000))
            self.end_headers()
            try:
                for _ in range(100):
                    self.wfile.write(b"y" * 65536)
            except OSError:
                pass
            return
        if self.path == "/missing":
            self.send_response(404)
            self.end_headers()
            return
        body = f"{SECRET} from {self.server.server_address[0]}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def serve_on(host: str) -> Iterator[int]:
    httpd = ThreadingHTTPServer((host, 0), Internal)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def secret_port() -> Iterator[int]:
    """The internal service agents must never reach, on 127.0.0.1."""
    Internal.hits.clear()
    yield from serve_on("127.0.0.1")
    assert Internal.hits.get("127.0.0.1", 0) == 0, "a refused address was connected to"


@pytest.fixture(scope="module")
def allowed_port() -> Iterator[int]:
    """A service the operator allowed (127.0.0.2 stands for an allowed host)."""
    yield from serve_on("127.0.0.2")


def spellings(port: int) -> list[str]:
    """Every way of naming loopback or 'this host' the issue lists."""
    return [
        f"http://127.0.0.1:{port}/secret.txt",
        f"http://127.1:{port}/secret.txt",
        f"http://2130706433:{port}/secret.txt",
        f"http://0x7f000001:{port}/secret.txt",
        f"http://0.0.0.0:{port}/secret.txt",
        f"http://localhost:{port}/secret.txt",
        f"http://[::1]:{port}/secret.txt",
        f"http://[::ffff:127.0.0.1]:{port}/secret.txt",
        f"https://127.0.0.1:{port}/secret.txt",
    ]


def allowed(**options: Any) -> Fetchers:
    return Fetchers(addresses=AddressPolicy.of(["127.0.0.2/32"]), **options)


def failure(fetchers: Fetchers, url: str) -> FetchFailed:
    with pytest.raises(FetchFailed) as caught:
        fetchers.fetch({"source_url": url})
    return caught.value


# -- the fetcher -----------------------------------------------------------------------


def test_every_spelling_of_loopback_is_refused_before_connecting(secret_port: int) -> None:
    for url in spellings(secret_port):
        exc = failure(Fetchers(), url)
        assert exc.category == "refused_address", url
        assert exc.public == "fetch failed: refused_address"
    assert Internal.hits.get("127.0.0.1", 0) == 0


@pytest.mark.parametrize(
    "address",
    [
        "169.254.169.254",
        "10.0.0.1",
        "172.16.0.1",
        "192.168.1.1",
        "100.100.100.200",
        "100.64.0.1",
        "224.0.0.1",
        "[fe80::1]",
        "[fd00:ec2::254]",
        "[fc00::1]",
        "[ff02::1]",
        "[::]",
        "[64:ff9b::7f00:1]",
        "[2002:7f00:1::]",
    ],
)
def test_private_link_local_metadata_and_multicast_are_refused(address: str) -> None:
    assert failure(Fetchers(), f"http://{address}/latest/meta-data").category == "refused_address"


def test_the_allow_list_admits_a_network_or_a_host(allowed_port: int, secret_port: int) -> None:
    assert allowed().fetch({"source_url": f"http://127.0.0.2:{allowed_port}/page"}) == f"{SECRET} from 127.0.0.2"
    by_name = Fetchers(addresses=AddressPolicy.of(["internal.test"]), resolver=lambda host, port: _addr("127.0.0.2"))
    assert by_name.fetch({"source_url": f"http://internal.test:{allowed_port}/"}).endswith("127.0.0.2")
    # allowing one name does not allow the same address under another name
    other = Fetchers(addresses=AddressPolicy.of(["internal.test"]), resolver=lambda host, port: _addr("127.0.0.2"))
    assert failure(other, f"http://elsewhere.test:{allowed_port}/").category == "refused_address"
    assert failure(allowed(), f"http://127.0.0.1:{secret_port}/").category == "refused_address"


def test_a_redirect_chain_ending_on_loopback_is_refused(allowed_port: int, secret_port: int) -> None:
    chain = f"http://127.0.0.2:{allowed_port}/chain/3?to=http://127.0.0.1:{secret_port}/secret.txt"
    assert failure(allowed(), chain).category == "refused_address"
    via_name = f"http://127.0.0.2:{allowed_port}/chain/1?to=http://localhost:{secret_port}/secret.txt"
    assert failure(allowed(), via_name).category == "refused_address"
    to_file = f"http://127.0.0.2:{allowed_port}/chain/1?to=file:///etc/passwd"
    assert failure(allowed(), to_file).category == "refused_address"
    ok = f"http://127.0.0.2:{allowed_port}/chain/2?to=http://127.0.0.2:{allowed_port}/page"
    assert allowed().fetch({"source_url": ok}).endswith("127.0.0.2")
    too_many = f"http://127.0.0.2:{allowed_port}/chain/9?to=http://127.0.0.2:{allowed_port}/page"
    assert failure(allowed(max_redirects=3), too_many).category == "http_status"


def test_a_slow_drip_body_is_cut_at_the_total_deadline(allowed_port: int) -> None:
    exc = failure(allowed(timeout=1.0), f"http://127.0.0.2:{allowed_port}/drip")
    # the body comes a byte every 0.1 s for 20 s: a per-read timeout would never fire and the
    # fetch would succeed; a timeout at all is the total deadline's
    assert exc.category == "timeout"


def test_an_oversized_body_is_refused_declared_or_not(allowed_port: int, tmp_path: Path) -> None:
    for path in ("/big", "/big-declared"):
        assert failure(allowed(max_bytes=100_000), f"http://127.0.0.2:{allowed_port}{path}").category == "too_large"
    big = tmp_path / "big.txt"
    big.write_bytes(b"z" * 200_001)
    assert failure(Fetchers(max_bytes=200_000), big.as_uri()).category == "too_large"
    fetchers = Fetchers(max_bytes=10)
    fetchers.register("chatty", lambda row: "x" * 11)
    assert failure(fetchers, "callable:chatty").category == "too_large"


def test_http_errors_and_unreachable_hosts_are_categories(allowed_port: int) -> None:
    assert failure(allowed(), f"http://127.0.0.2:{allowed_port}/missing").category == "http_status"
    assert failure(Fetchers(), "http://name.invalid/").category == "unreachable"
    closed = Fetchers(addresses=AddressPolicy.of(["127.0.0.3"]))
    assert failure(closed, "http://127.0.0.3:9/").category == "unreachable"


def _addr(*texts: str) -> list[Any]:
    import ipaddress

    return [ipaddress.ip_address(t) for t in texts]


def test_the_connection_goes_to_the_checked_address_no_second_lookup(allowed_port: int, secret_port: int) -> None:
    answers = iter([_addr("127.0.0.2"), _addr("127.0.0.1"), _addr("127.0.0.1")])
    asked: list[str] = []

    def rebinding(host: str, port: int) -> list[Any]:
        asked.append(host)
        return next(answers)

    fetchers = Fetchers(addresses=AddressPolicy.of(["127.0.0.2"]), resolver=rebinding)
    # the port is the allowed server's: had the connection gone to a second
    # answer (127.0.0.1) it would have failed or reached the secret service
    assert fetchers.fetch({"source_url": f"http://rebind.test:{allowed_port}/"}).endswith("127.0.0.2")
    assert asked == ["rebind.test"]
    # a name with one bad answer among good ones is refused outright
    mixed = Fetchers(
        addresses=AddressPolicy.of(["127.0.0.2"]), resolver=lambda host, port: _addr("127.0.0.2", "127.0.0.1")
    )
    assert failure(mixed, f"http://mixed.test:{secret_port}/").category == "refused_address"


def test_the_policy_file_sets_the_allow_list_and_the_deadline(tmp_path: Path, allowed_port: int) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[fetch]\nallow = ["127.0.0.2/32"]\ntimeout = 2\nmax_bytes = 1000\n', encoding="utf-8")
    fetchers = PolicyFile.read(policy).fetchers()
    assert fetchers.timeout == 2 and fetchers.max_bytes == 1000
    assert fetchers.fetch({"source_url": f"http://127.0.0.2:{allowed_port}/x"}).endswith("127.0.0.2")
    policy.write_text('[fetch]\nallow = ["127.0.0.2/99"]\n', encoding="utf-8")
    with pytest.raises(ValueError, match="fetch.allow"):
        PolicyFile.read(policy).fetchers()
    policy.write_text("[fetch]\ntimeout = -1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="fetch.timeout"):
        PolicyFile.read(policy)
    policy.write_text('[fetch]\nbackoff = "soon"\n', encoding="utf-8")
    with pytest.raises(ValueError, match="fetch.backoff"):
        PolicyFile.read(policy)


def test_the_policy_file_sets_the_hosts_backoff(tmp_path: Path) -> None:
    """A failed host waits [fetch] backoff seconds, doubling, before the scheduler fetches from it again."""
    policy = tmp_path / "policy.toml"
    policy.write_text("[fetch]\nbackoff = 2.5\n", encoding="utf-8")
    w = Warden(tmp_path / "b.db", fetchers=PolicyFile.read(policy).fetchers())
    try:
        backoff = Scheduler(w).backoff
        assert (backoff.delay(1), backoff.delay(3)) == (2.5, 10.0)
    finally:
        w.close()
    plain = Warden(":memory:")
    try:
        assert Scheduler(plain).backoff.delay(1) == 30.0  # the default
    finally:
        plain.close()


# -- every path that fetches -------------------------------------------------------------

POLICY = """
[fetch]
allow = ["127.0.0.2/32"]   # stands for the public internet in these tests
timeout = 1.5
max_bytes = 100000
backoff = 1   # each case's host is retried within the test's patience

[kinds.watched]
ttl = "1s"
reverify = true
"""


def cases(secret_port: int, allowed_port: int) -> list[tuple[str, str, str]]:
    """(name, source, the category an agent must see) for every case the issue lists."""
    named = [
        (url.split("//", 1)[1].split(f":{secret_port}")[0], url, "refused_address") for url in spellings(secret_port)
    ]
    return [
        *named,
        (
            "redirect-chain",
            f"http://127.0.0.2:{allowed_port}/chain/3?to=http://127.0.0.1:{secret_port}/secret.txt",
            "refused_address",
        ),
        ("slow-drip", f"http://127.0.0.2:{allowed_port}/drip", "timeout"),
        ("oversized", f"http://127.0.0.2:{allowed_port}/big", "too_large"),
    ]


@pytest.fixture(scope="module")
def guarded(
    tmp_path_factory: pytest.TempPathFactory, secret_port: int, allowed_port: int, backend: Backend
) -> Iterator[Server]:
    """A live server whose operator allowed 127.0.0.2 and nothing else local."""
    folder = tmp_path_factory.mktemp("guarded")
    policy = folder / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    running = start_server(backend.db(folder, "g.db"), "--scheduler-interval", "0.3", policy_file=policy)
    yield running
    running.proc.terminate()
    running.proc.wait(timeout=30)


def assert_no_detail(text: str, port: int) -> None:
    """An agent sees a category, never the address, port or socket error."""
    for leak in (f":{port}", "Errno", "ConnectError", "resolves to", "loopback", SECRET):
        assert leak not in text, (leak, text)


def failure_notes(c: httpx.Client, memory_id: str) -> list[str]:
    history = c.get(f"/v1/memories/{memory_id}/explain").json()["history"]
    return [h["note"] for h in history if h["event"] == "memory.verification_failed"]


def test_http_verify_refuses_every_case(guarded: Server, secret_port: int, allowed_port: int) -> None:
    with guarded.client("agent") as c:
        for n, (name, url, category) in enumerate(cases(secret_port, allowed_port)):
            saved = c.post("/v1/memories", json=save_body(f"v{n}", source_url=url))
            assert saved.status_code == 201, (name, saved.text)
            verified = c.post(f"/v1/memories/v{n}/verify", params={"accept": "true"})
            assert verified.status_code == 200, (name, verified.text)
            result = verified.json()["results"][0]
            assert (result["outcome"], result["detail"]) == ("failed", f"fetch failed: {category}"), name
            assert_no_detail(verified.text, secret_port)
            got = c.get(f"/v1/memories/v{n}")
            assert SECRET not in got.text and got.json()["reason"] == "unknown", name
            assert failure_notes(c, f"v{n}") == [f"fetch failed: {category}"], name
        # an open port and a closed one answer alike: no port scanning
        c.post("/v1/memories", json=save_body("closed", source_url="http://127.0.0.1:9/"))
        answer = c.post("/v1/memories/closed/verify").json()["results"][0]
        assert answer["detail"] == "fetch failed: refused_address"


def test_the_memory_api_source_is_checked_in_every_case(guarded: Server, secret_port: int, allowed_port: int) -> None:
    with guarded.client("agent") as c:
        for n, (name, url, category) in enumerate(cases(secret_port, allowed_port)):
            content = json.dumps({"text": "회의록", "source": url})
            saved = c.post("/memory/save", json={"agent": "bot", "key": f"k{n}", "content": content})
            assert saved.status_code == 200, (name, saved.text)
            verified = c.post(f"/v1/memories/mem:bot:k{n}/verify", params={"accept": "true"})
            result = verified.json()["results"][0]
            assert (result["outcome"], result["detail"]) == ("failed", f"fetch failed: {category}"), name
            assert_no_detail(verified.text, secret_port)
            loaded = c.get("/memory/load", params={"agent": "bot"})
            assert SECRET not in loaded.text


def test_mcp_verify_is_refused_in_every_case(guarded: Server, secret_port: int, allowed_port: int) -> None:
    async def main() -> list[tuple[str, str, dict[str, Any]]]:
        answers = []
        async with (
            httpx2.AsyncClient(headers={"x-api-key": guarded.keys["agent"]}, timeout=30) as http,
            Client(streamable_http_client(f"{guarded.url}/mcp", http_client=http)) as client,
        ):
            for n, (name, url, category) in enumerate(cases(secret_port, allowed_port)):
                arguments = {
                    "memory_id": f"mcp{n}",
                    "kind": "external_fact",
                    "summary": "s",
                    "content": "c",
                    "source_url": url,
                    "scope": {"tenant": "acme"},
                }
                saved = await client.call_tool("memory_save", arguments)
                assert not saved.is_error, (name, saved.content)
                result = await client.call_tool("memory_verify", {"memory_id": f"mcp{n}", "accept": True})
                assert not result.is_error, (name, result.content)
                answers.append((name, category, json.loads(result.content[0].text)))
        return answers

    for name, category, answer in asyncio.run(main()):
        assert (answer["outcome"], answer["detail"]) == ("failed", f"fetch failed: {category}"), name
        assert_no_detail(json.dumps(answer), secret_port)


def test_the_embedded_scheduler_refuses_every_case(guarded: Server, secret_port: int, allowed_port: int) -> None:
    expected = {}
    with guarded.client("agent") as c:
        for n, (name, url, category) in enumerate(cases(secret_port, allowed_port)):
            body = save_body(f"s{n}", source_url=url, kind="watched")
            body.pop("ttl", None)
            assert c.post("/v1/memories", json=body).status_code == 201, name
            expected[f"s{n}"] = (name, f"fetch failed: {category}")
        deadline = time.monotonic() + 60
        pending = dict(expected)
        while pending and time.monotonic() < deadline:
            for memory_id, (name, note) in list(pending.items()):
                notes = failure_notes(c, memory_id)
                if notes:
                    assert set(notes) == {note}, (name, notes)
                    del pending[memory_id]
            time.sleep(0.3)
        assert not pending, f"the scheduler never re-verified {sorted(pending)}"


def test_an_in_process_scheduler_refuses_every_case(
    tmp_path: Path, secret_port: int, allowed_port: int, backend: Backend
) -> None:
    clock = FrozenClock("2026-01-05T09:00:00Z")
    policy = TtlPolicy({"watched": {"ttl": "1h", "reverify": True}})
    w = Warden(
        backend.db(tmp_path, "s.db"), clock=clock, policy=policy, fetchers=allowed(timeout=1.5, max_bytes=100_000)
    )
    try:
        all_cases = cases(secret_port, allowed_port)
        for n, (_, url, _) in enumerate(all_cases):
            w.save(
                memory_id=f"w{n}",
                kind="watched",
                summary="s",
                content="c",
                source_url=url,
                scope={"tenant": "acme"},
                caller=OPERATOR,
            )
        clock.advance("2h")
        Scheduler(w).run_once()
        failed = {e.payload["memory_id"]: e.payload["error"] for e in w.log.read(types=("memory.verification_failed",))}
        assert failed == {f"w{n}": f"fetch failed: {category}" for n, (_, _, category) in enumerate(all_cases)}
        assert all(not w.get(f"w{n}", caller=OPERATOR).usable for n in range(len(all_cases)))
    finally:
        w.close()


def test_serve_allow_local_sources_lets_development_fetch_loopback(
    tmp_path: Path, allowed_port: int, backend: Backend
) -> None:
    from memwarden.engine.faces.http import create_app

    w = Warden(backend.db(tmp_path, "dev.db"))
    try:
        create_app(w, allow_local_sources=True, scheduler=False, mcp=False)
        assert w.fetchers.fetch({"source_url": f"http://127.0.0.2:{allowed_port}/"}).endswith("127.0.0.2")
    finally:
        w.close()


def test_an_allowed_source_is_fetched_through_the_live_server(guarded: Server, allowed_port: int) -> None:
    with guarded.client("agent") as c:
        url = f"http://127.0.0.2:{allowed_port}/page"
        body = save_body("fine", source_url=url, content=f"{SECRET} from 127.0.0.2")
        assert c.post("/v1/memories", json=body).status_code == 201
        answer = c.post("/v1/memories/fine/verify").json()["results"][0]
        assert answer["outcome"] == "verified", answer
        # an unresolvable name is 'unreachable', and that is all the agent learns
        c.post("/v1/memories", json=save_body("pub", source_url="https://memwarden-test.invalid/x"))
        answer = c.post("/v1/memories/pub/verify").json()["results"][0]
        assert answer["outcome"] == "failed" and answer["detail"] == "fetch failed: unreachable"
