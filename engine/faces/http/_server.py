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
    """uvicorn's h11 protocol, with a deadline on each request's head
    (uvicorn is imported here, not when the command line starts)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadDeadline(H11Protocol):
        """Closes a connection whose request head is late."""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._head_due: asyncio.TimerHandle | None = None
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._head_due = self.loop.call_later(head_timeout, self._head_late)

        def _disarm(self) -> None:
            if getattr(self, "_head_due", None) is not None:
                self._head_due.cancel()  # type: ignore[union-attr]
                self._head_due = None

        def _waiting_for_a_head(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _head_late(self) -> None:
            self._head_due = None
            if self._waiting_for_a_head() and not self.transport.is_closing():
                self.transport.close()

        def handle_events(self) -> None:
            super().handle_events()
            if not self._waiting_for_a_head():
                self._disarm()  # the head came: the app's own limits take over

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeadDeadline


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
