"""What ``memwarden serve`` does to its own process, and a library never
does to its host's: a collector paused while a write holds the store, and
the heap's free pages given back after the SQLite log releases its cache.
Each is kept for one speed target, named in its docstring."""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["collector_paused", "malloc_trim", "trim_heap"]

_collector_lock = threading.Lock()
_collector_writers = 0
_collector_restore = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while a write transaction holds
    the store (holds: a cascade's commit within 2.5x its floor).

    A write builds thousands of short-lived containers (event models,
    payload dicts, chained records) that hold no cycles and die at the
    commit; each 700 start a collection, and now and then one walks all the
    process keeps alive, freeing nothing. Paused, reference counts free them
    as usual. Begun only once the store is held (``Core.holding_store``),
    so a writer waiting for its turn never holds the collector off; writers
    inside at once share one count, and it is enabled again when the last
    leaves, only if it was enabled before."""
    global _collector_writers, _collector_restore
    with _collector_lock:
        if _collector_writers == 0:
            _collector_restore = gc.isenabled()
            gc.disable()
        _collector_writers += 1
    try:
        yield
    finally:
        with _collector_lock:
            _collector_writers -= 1
            if _collector_writers == 0 and _collector_restore:
                gc.enable()


@functools.cache
def malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (None elsewhere), looked up when first asked
    for: ``find_library`` runs ldconfig in a child process."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def trim_heap() -> bool:
    """Give the heap's free pages back to the OS (holds: private memory
    <= 1.5x LangGraph's after 100,000 saves): SQLite's page cache, given
    back, lands on glibc's free lists, scattered among live allocations
    where the heap cannot shrink from its top; ``malloc_trim`` returns whole
    free pages from anywhere in it. Whether the C library could."""
    trim = malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
