"""Whose write transaction runs next, in one process.

The store runs one write transaction at a time, and a batch of thousands
of memories holds it for a long while. Left to the lock, whoever asks
next goes next, so a queue of batches from one key would hold an agent's
single save behind all of them. Here a small write (a save, a revocation, an erasure, a policy
change) waits only for the transaction running now; a large one (``size``
at least ``LARGE``: a batch, an import) lets every small one waiting go
first, for at most ``PATIENCE`` seconds, so a steady stream of small
writes cannot starve it. A revocation then never waits behind a queue of
batches, only behind the one that holds the store.

On PostgreSQL this orders the writers of one node; the nodes' writes
still meet in the database's own lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

LARGE = 100  # items: a write this large waits for the small ones
PATIENCE = 1.0  # seconds a large write gives way before it takes its turn


class WriteTurns:
    def __init__(self, *, large: int = LARGE, patience: float = PATIENCE) -> None:
        self.large = large
        self.patience = patience
        self._changed = threading.Condition()
        self._holder: int | None = None  # the thread whose turn it is
        self._depth = 0  # its nested transactions
        self._small_waiting = 0
        self._due = 0  # large writes that have given way long enough

    def mine(self) -> bool:
        """Whether this thread's transaction holds the turn now."""
        return self._holder == threading.get_ident()

    @contextmanager
    def turn(self, size: int = 1) -> Iterator[None]:
        me = threading.get_ident()
        with self._changed:
            if self._holder == me:  # a transaction inside this thread's own
                self._depth += 1
            else:
                self._wait(size)
                self._holder, self._depth = me, 1
        try:
            yield
        finally:
            with self._changed:
                self._depth -= 1
                if not self._depth:
                    self._holder = None
                    self._changed.notify_all()

    def _wait(self, size: int) -> None:
        """Called holding the condition; returns when this writer may go."""
        if size < self.large:
            self._small_waiting += 1
            try:
                # a large write whose patience is spent goes before any small one
                while self._holder is not None or self._due:
                    self._changed.wait()
            finally:
                self._small_waiting -= 1
            return
        give_way_until = time.monotonic() + self.patience
        while self._holder is not None or self._small_waiting:
            left = give_way_until - time.monotonic()
            if left <= 0:
                break  # given way long enough: due, before any small write still to come
            self._changed.wait(left)
        self._due += 1
        try:
            while self._holder is not None:
                self._changed.wait()
        finally:
            self._due -= 1
