"""The HTTP server's head deadline (#38), kept without subclassing uvicorn's
private protocol (#60): a connection whose request head is late is closed,
on its first request and on a kept-alive one's next; a head that came in
time is served however long the answer or the body takes; pipelined and
chunked requests are framed right. A uvicorn of its own in a thread, with a
short deadline."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from memwarden.engine.faces.http._server import head_deadline

DEADLINE = 0.5


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["path"] == "/slow":
        await asyncio.sleep(DEADLINE * 3)  # an answer longer than the head's deadline
    answer = f"{scope['path']} {len(body)}".encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(answer))]})
    await send({"type": "http.response.body", "body": answer})


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, http=head_deadline(DEADLINE), timeout_keep_alive=30, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        time.sleep(0.01)  # paces only: waits for the server to listen
    yield sock.getsockname()[1]
    server.should_exit = True
    thread.join(timeout=10)


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def answers(sock: socket.socket, count: int) -> list[bytes]:
    """The bodies of ``count`` answers read off ``sock``."""
    data, bodies = b"", []
    while len(bodies) < count:
        chunk = sock.recv(65536)
        assert chunk, f"closed after {len(bodies)} answers"
        data += chunk
        while b"\r\n\r\n" in data:
            head, rest = data.split(b"\r\n\r\n", 1)
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            if len(rest) < length:
                break
            bodies.append(rest[:length])
            data = rest[length:]
    return bodies


def cut_off(sock: socket.socket, drip: bytes) -> float:
    """Seconds until the server closes ``sock``, dripping ``drip`` every tenth of a second (at most 10 s)."""
    started = time.monotonic()
    sock.settimeout(0.1)
    while time.monotonic() - started < 10:
        try:
            sock.sendall(drip)
            if sock.recv(1024) == b"":
                break
        except TimeoutError:
            continue
        except OSError:
            break
    return time.monotonic() - started


def test_a_dripped_first_head_is_cut_off(port: int) -> None:
    with connect(port) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        assert cut_off(sock, b"X-Drip: 1\r\n") < 5


def test_a_kept_alive_connections_next_head_has_its_deadline_too(port: int) -> None:
    with connect(port) as sock:
        sock.sendall(b"GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answers(sock, 1) == [b"/first 0"]
        sock.sendall(b"GET /second HTTP/1.1\r\n")
        assert cut_off(sock, b"X-Drip: 1\r\n") < 5


def test_an_answer_longer_than_the_deadline_is_not_cut(port: int) -> None:
    with connect(port) as sock:
        sock.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answers(sock, 1) == [b"/slow 0"]
        sock.sendall(b"GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answers(sock, 1) == [b"/after 0"]


def test_a_slow_body_after_a_head_in_time_is_the_apps_to_bound(port: int) -> None:
    with connect(port) as sock:
        sock.sendall(b"POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab")
        time.sleep(DEADLINE * 2)  # paces the body past the head's deadline
        sock.sendall(b"cd")
        assert answers(sock, 1) == [b"/body 4"]


def test_pipelined_and_chunked_requests_are_framed(port: int) -> None:
    with connect(port) as sock:
        sock.sendall(
            b"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n"
            b"POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nxy"
        )
        assert answers(sock, 3) == [b"/a 3", b"/b 0", b"/c 2"]
        time.sleep(DEADLINE * 2)  # idle between requests: uvicorn's keep-alive (30 s here), not the head's
        sock.sendall(b"GET /d HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answers(sock, 1) == [b"/d 0"]


def test_a_head_that_is_not_http_is_answered_in_the_apis_shape(port: int) -> None:
    # raw UTF-8 in a URL (as a browser's address bar never sends, but curl -g does)
    for head, field in (
        ("GET /v1/memories?tenant=t&text=회의 HTTP/1.1\r\nHost: x\r\n\r\n".encode(), "url"),
        (b"NOT HTTP AT ALL\r\n\r\n", "request"),
    ):
        with connect(port) as sock:
            sock.sendall(head)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        status, _, rest = data.partition(b"\r\n")
        headers, _, body = rest.partition(b"\r\n\r\n")
        assert status == b"HTTP/1.1 400 Bad Request" and b"content-type: application/json" in headers
        answer = json.loads(body)
        assert answer["error"] == "bad_request" and answer["field"] == field and answer["problem"], answer
    # a request framed before a malformed one in the same bytes is still answered
    with connect(port) as sock:
        sock.sendall(b"GET /first HTTP/1.1\r\nHost: x\r\n\r\nNOT HTTP\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):  # the first answer, then uvicorn's to the malformed one, then closed
            data += chunk
        assert data.startswith(b"HTTP/1.1 200 ") and b"\r\n\r\n/first 0" in data, data
