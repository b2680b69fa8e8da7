"""A large write's preparation, paced so that it takes at most a share of
the interpreter.

A server is one process with one interpreter lock, and a batch of
thousands of memories spends most of a second in Python checking and
building its events before it takes the store's write lock. Left alone,
that thread holds the interpreter for as long as the interpreter lets it
(5 ms at a time) and gets it back at once, so every agent's request beside
it waits for it at each step it takes. Paced, it gives the interpreter away for as long as it held it
past each ``STEP``: the batch takes up to twice as long to prepare, and the
requests beside it get half the interpreter whatever the batch holds.

Only preparation is paced: under the write lock a pause would hold every
other writer back as long. Only a server paces (``Core.large_write_share``,
set by the HTTP face): a batch alone in a process has no one to give way to.
"""

from __future__ import annotations

import time

STEP = 0.005  # seconds of work between pauses: the interpreter's own switch interval


class Pace:
    def __init__(self, *, share: float, step: float = STEP) -> None:
        if not 0 < share <= 1:
            raise ValueError("share must be in (0, 1]")
        self.share = share
        self.step = step
        self._since = time.perf_counter()

    def __call__(self) -> None:
        """Called between two units of work: pauses once ``step`` has passed."""
        held = time.perf_counter() - self._since
        if held >= self.step:
            if self.share < 1:
                time.sleep(held * (1 - self.share) / self.share)
            self._since = time.perf_counter()


def unpaced() -> None:
    """A small write's preparation: nothing to give way for."""
