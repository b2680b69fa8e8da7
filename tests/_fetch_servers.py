"""Real HTTP servers on loopback playing the internal services agents must never
reach and the one service the operator allowed, shared by the fetching tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from memwarden.engine import AddressPolicy, Fetchers, FetchFailed

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
