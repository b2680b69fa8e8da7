"""What psycopg sends: each statement a connection executes, recorded for
the tests that count round trips or check where a statement ran."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg


@contextmanager
def recorded_statements(*, this_thread: bool = True) -> Iterator[list[tuple[str, Any, Any]]]:
    """Each statement a psycopg connection sends, as (statement, parameters,
    the connection's transaction status as it sends it); only this
    thread's, unless ``this_thread`` is False (reads go through the pool's
    connections, not the writer's)."""
    seen: list[tuple[str, Any, Any]] = []
    me = threading.get_ident()
    original = psycopg.Connection.execute

    def recording(self: psycopg.Connection, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if not this_thread or threading.get_ident() == me:
            seen.append((str(query), params, self.info.transaction_status))
        return original(self, query, params, **kwargs)

    psycopg.Connection.execute = recording  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        psycopg.Connection.execute = original  # type: ignore[method-assign]
