"""One run at a time of a costly check: a caller arriving while it runs
joins it and gets its result, so N requests cost one run, not N."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

T = TypeVar("T")
Progress = Callable[[int], None]


class Joined(Generic[T]):
    """``run(work, progress)``: ``work`` is called with a function to report
    progress by; each caller's ``progress`` (a joiner's too, told first of
    what was checked before it joined) hears every step."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: Future[T] | None = None
        self._listeners: list[Progress] = []
        self._done = 0

    def run(self, work: Callable[[Progress], T], progress: Progress | None = None) -> T:
        with self._lock:
            running = self._running
            mine = running is None
            if running is not None:
                if progress is not None:
                    self._listeners.append(progress)
                    if self._done:
                        progress(self._done)
            else:
                running = self._running = Future()
                self._listeners = [progress] if progress is not None else []
                self._done = 0
        if not mine:
            return running.result()
        try:
            result = work(self._advance)
        except BaseException as exc:
            running.set_exception(exc)
            raise
        else:
            running.set_result(result)
            return result
        finally:
            with self._lock:
                self._running = None
                self._listeners = []

    def _advance(self, n: int) -> None:
        with self._lock:
            self._done += n
            listeners = list(self._listeners)
        for listener in listeners:
            listener(n)
