"""The cyclic garbage collector, paused for the span of a write transaction.

A write builds thousands of short-lived containers (event models, payload
dicts, chained records: ~10 per event) that hold no cycles and die at the
commit. Each 700 of them start a young-generation collection, every tenth
a middle one, and now and then an old one that walks all the process keeps
alive, so a large cascade spends a part of its commit in collections that
free nothing. Paused, the same containers are freed by their reference
counts as usual; the collector runs again at the next allocation after the
writer leaves. Kept for one target: the cascade's commit within 2.5x its floor.

The pause begins once the transaction holds the store (``Core.transaction``:
inside ``Store.writing``, which waits for the database's lock), never while
a writer waits for its turn or for another process's transaction: writers
that waited with the collector off kept it off for good under a steady
stream of writes. Nested writers share one count, so it is re-enabled only
when none is inside, and only if it was enabled before.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_inside = 0
_restore = False


@contextmanager
def collector_paused() -> Iterator[None]:
    global _inside, _restore
    with _lock:
        if _inside == 0:
            _restore = gc.isenabled()
            gc.disable()
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0 and _restore:
                gc.enable()
