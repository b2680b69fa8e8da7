"""The HTTP server's own bounds, in front of the app: a request's head
must arrive within a deadline, and the server takes a bounded number of
connections at once. uvicorn closes idle keep-alive connections but waits
for a request head as long as the client keeps dripping bytes into it, so
a few thousand slow unauthenticated connections could hold every file the
process may open; the deadline closes each such connection instead."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the command line reads the bounds below: asyncio comes with uvicorn
    import asyncio

# a request's head (request line and headers), from the connection or the previous answer
HEAD_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 1000
KEEP_ALIVE_S = 5


def head_deadline(head_timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol (the one ``--http h11`` names), with a
    deadline on each request's head.

    Composed, not subclassed: the wrapper speaks to uvicorn's protocol only
    through ``asyncio.Protocol``'s methods and hands it the arguments uvicorn
    gave, so nothing of its insides (its request cycle, its event handling)
    is relied on. Where a head ends it learns from its own ``h11`` parser,
    fed the same bytes: h11's public API, which frames requests as uvicorn's
    does. uvicorn is imported here, not when the command line starts."""
    import asyncio

    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadDeadline(asyncio.Protocol):
        """Closes a connection whose request head is late: counted from the
        connection's opening, then from the first byte of each later head
        (between requests, uvicorn's keep-alive timeout closes an idle one)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._served = H11Protocol(*args, **kwargs)
            self._framing: h11.Connection | None = h11.Connection(h11.SERVER)
            self._in_request = False
            self._due: asyncio.TimerHandle | None = None
            self._transport: asyncio.Transport | None = None
            self._line = bytearray()  # the start of the head being read

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self._transport = transport  # type: ignore[assignment]
            self._served.connection_made(transport)  # type: ignore[arg-type]
            self._arm()

        def data_received(self, data: bytes) -> None:
            if data and not self._in_request and self._due is None and self._framing is not None:
                self._arm()  # a new head begins
            if not self._in_request and len(self._line) < 8192 and b"\n" not in self._line:
                self._line += data[:8192]  # the request line, to name what was wrong with it
            if self._follow(data) == "malformed" and self._transport is not None:
                # the API's shape for bad input (uvicorn's own answer is a text/plain line)
                self._transport.write(malformed_head_answer(bytes(self._line)))
                self._transport.close()
                return
            self._served.data_received(data)

        def eof_received(self) -> None:
            self._served.eof_received()  # which lets the transport close

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            self._served.connection_lost(exc)

        def pause_writing(self) -> None:
            self._served.pause_writing()

        def resume_writing(self) -> None:
            self._served.resume_writing()

        def _follow(self, data: bytes) -> str | None:
            """Where the requests in ``data`` begin and end; ``"malformed"``
            when the first head in it is no HTTP (no request of it reached
            uvicorn: ours to answer)."""
            if self._framing is None:
                return None
            self._framing.receive_data(data)
            framed = False
            while self._framing is not None:
                try:
                    event = self._framing.next_event()
                except h11.RemoteProtocolError:
                    first_head = not framed and not self._in_request
                    self._framing = None
                    self._disarm()
                    # past a request already framed here, uvicorn answers it, then the malformed one
                    return "malformed" if first_head else None
                framed = True
                if event is h11.NEED_DATA or event is h11.PAUSED or isinstance(event, h11.ConnectionClosed):
                    return None
                if isinstance(event, h11.Request):
                    self._in_request = True
                    self._disarm()  # the head came: the app's own limits take over
                elif isinstance(event, h11.EndOfMessage):
                    # the next request, if any bytes of it came, is a new head
                    rest, _closed = self._framing.trailing_data
                    self._framing = h11.Connection(h11.SERVER)
                    self._in_request = False
                    self._line = bytearray(rest[:8192])
                    if rest:
                        self._arm()
                        self._framing.receive_data(rest)

        def _arm(self) -> None:
            self._disarm()
            self._due = asyncio.get_running_loop().call_later(head_timeout, self._head_late)

        def _disarm(self) -> None:
            if self._due is not None:
                self._due.cancel()
                self._due = None

        def _head_late(self) -> None:
            self._due = None
            if not self._in_request and self._transport is not None and not self._transport.is_closing():
                self._transport.close()

    return HeadDeadline


def malformed_head_answer(line: bytes) -> bytes:
    """The 400 for a request whose head is not HTTP, in the API's shape
    (``{"error", "field", "problem"}``): a request line holding bytes past
    ASCII is a URL that was not percent-encoded (raw UTF-8, as ``?text=회의``)."""
    import json

    first = line.split(b"\n", 1)[0]
    if first[:1].isalpha() and not first.isascii():  # a method, then a target past ASCII
        field, problem = "url", (
            "holds characters that are not ASCII: percent-encode them as UTF-8 (회 is %ED%9A%8C)"
            if _utf8(first)
            else "holds bytes that are neither ASCII nor UTF-8: percent-encode a URL's text as UTF-8"
        )
    else:
        field, problem = "request", "is not a valid HTTP/1.1 request line and headers"
    body = json.dumps({"error": "bad_request", "field": field, "problem": problem}, ensure_ascii=False).encode()
    return (
        b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def serve(
    app: Any,
    *,
    host: str,
    port: int,
    head_timeout: float = HEAD_TIMEOUT_S,
    max_connections: int = MAX_CONNECTIONS,
) -> None:
    """Run ``app`` until stopped, with the bounds above."""
    import uvicorn

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=head_deadline(head_timeout),
        limit_concurrency=max_connections,
        timeout_keep_alive=KEEP_ALIVE_S,
        log_level="warning",
    )
    uvicorn.Server(config).run()
