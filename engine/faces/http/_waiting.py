"""Waiting without a thread: every request that waits for the log to move
(``/v1/events?wait=``) awaits one asyncio condition, and one watcher task
per server asks the store (LISTEN on PostgreSQL, a cheap poll of the head
on SQLite) from a single worker thread. A thousand long-polls cost a
thousand sleeping coroutines, not a thousand executor threads: the
executor stays free for the reads and writes they are waiting for."""

from __future__ import annotations

import asyncio
from collections import Counter

from memwarden.engine import TooManyWaiters, Warden
from memwarden.events import get_logger

log = get_logger("memwarden.http")

# each key may hold this many open waits (a waiter is cheap, but it holds a connection)
WAITERS_PER_KEY = 1000


class HeadWatch:
    """The log's head as the server last saw it, and the requests waiting for it to pass a seq."""

    def __init__(self, warden: Warden, *, per_key: int = WAITERS_PER_KEY, slice_s: float = 1.0) -> None:
        self.warden = warden
        self.per_key = per_key
        self.slice_s = slice_s  # how long the watcher's one thread waits on the store at a time
        self.head = -1
        self._waiting: Counter[str] = Counter()
        self._moved: asyncio.Condition | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def waiters(self) -> int:
        return sum(self._waiting.values())

    async def wait_past(self, after: int, timeout: float, *, key: str) -> int:
        """Until the head passes ``after`` or ``timeout`` seconds pass; the head as last seen."""
        if self._waiting[key] >= self.per_key:
            raise TooManyWaiters(self.per_key)
        self._waiting[key] += 1
        try:
            moved = self._start()
            async with moved:
                try:
                    await asyncio.wait_for(moved.wait_for(lambda: self.head > after), timeout)
                except TimeoutError:
                    pass
            return self.head
        finally:
            self._waiting[key] -= 1
            if not self._waiting[key]:
                del self._waiting[key]

    def _start(self) -> asyncio.Condition:
        if self._moved is None:
            self._moved = asyncio.Condition()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._watch(self._moved))
        return self._moved

    async def _watch(self, moved: asyncio.Condition) -> None:
        # runs while anyone waits; the next waiter starts it again
        if self.head < 0:
            self.head = await asyncio.to_thread(self.warden.head_seq)
        while self._waiting:
            try:
                head = await asyncio.to_thread(self.warden.wait_for_events, self.head, self.slice_s)
            except Exception:  # a store that cannot answer now: waiters time out, the watch goes on
                log.warning("head_watch_failed", exc_info=True)
                await asyncio.sleep(self.slice_s)
                continue
            if head != self.head:
                async with moved:
                    self.head = head
                    moved.notify_all()
