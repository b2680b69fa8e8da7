"""Giving freed heap memory back to the OS (glibc), after a large write.

SQLite's page cache allocates its pages one by one on the C heap. Given
back (``PRAGMA shrink_memory``), they return to glibc's free lists, which
keep them: they are scattered among live allocations, so the heap cannot
shrink from its top. ``malloc_trim`` returns whole free pages from
anywhere in the heap. Elsewhere than glibc this does nothing.

Kept for one target: private memory <= 1.5x LangGraph's after 100,000 saves.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

__all__ = ["trim_heap"]


@functools.cache
def _find_trim() -> Callable[[int], int] | None:
    # looked up at the first large write, not at import: find_library runs
    # ldconfig in a child process, and ctypes.util brings shutil and bz2
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def trim_heap() -> None:
    """Return the heap's free pages to the OS, where the C library can."""
    trim = _find_trim()
    if trim is not None:
        trim(0)
