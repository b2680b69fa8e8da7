"""Opening an SQLite connection the way every memwarden connection is
opened, the backend's tuning knobs, and what the driver's errors mean for
the store."""

from __future__ import annotations

import sqlite3
from contextlib import suppress
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, get_args

from ._errors import StoreDamaged, StoreFailed, StoreUnavailable
from ._files import private_file

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]

_SYNCHRONOUS: tuple[str, ...] = get_args(Synchronous)


_MOST_MB = 1 << 20  # a tebibyte: past it a value is a typo, not a cache


@dataclass(frozen=True, kw_only=True)
class SQLiteOptions:
    """The SQLite backend's tuning knobs, which mean nothing to another
    backend (a PostgreSQL server has its own settings): given to
    ``SQLiteStore`` as one value, or in a ``sqlite:///`` URL's query
    (``sqlite:///m.db?synchronous=normal&cache_mb=128``, ``from_query``).

    ``synchronous``: when a commit waits for the disk (FULL: every commit is
    durable). ``mmap_mb``: reads through a memory map of this size (0: off).
    ``cache_mb``: the page cache each connection keeps (``connect``)."""

    synchronous: Synchronous = "FULL"
    mmap_mb: int = 1024
    cache_mb: int = 64

    def __post_init__(self) -> None:
        if self.synchronous not in _SYNCHRONOUS:
            raise ValueError(f"synchronous: {self.synchronous!r} is not OFF, NORMAL, FULL or EXTRA")
        for name in ("mmap_mb", "cache_mb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MOST_MB:
                raise ValueError(f"{name}: {value!r} is not a whole number of megabytes from 0 to {_MOST_MB}")

    @classmethod
    def from_query(cls, query: str, base: SQLiteOptions | None = None) -> SQLiteOptions:
        """``base`` (the defaults if None) with what a URL's query string
        sets; a name that is no option, or a value that does not read as
        one, is a ``ValueError`` naming it."""
        known = {f.name for f in fields(cls)}
        given: dict[str, Any] = {}
        for pair in (part for part in query.split("&") if part):
            name, _, value = pair.partition("=")
            if name not in known:
                raise ValueError(f"{name}: not an SQLite option (known: {', '.join(sorted(known))})")
            if name in given:  # which one was meant? a durability setting is not weakened by a typo's twin
                raise ValueError(f"{name}: given more than once")
            if name == "synchronous":
                given[name] = value.upper()
            elif value.isascii() and value.isdigit():
                given[name] = int(value)
            else:
                raise ValueError(f"{name}: {value!r} is not a whole number of megabytes")
        return cls(**{**vars(base or cls()), **given})


def connect(
    path: str | Path,
    *,
    synchronous: Synchronous = "FULL",
    busy_timeout: float = 60.0,
    cache_mb: int = 64,
    mmap_mb: int = 1024,
) -> sqlite3.Connection:
    """Open a connection the way every memwarden connection is opened."""
    if synchronous not in _SYNCHRONOUS:
        raise ValueError(f"synchronous: {synchronous!r} is not OFF, NORMAL, FULL or EXTRA")
    _create_private(path)
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=busy_timeout)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
    except UnicodeDecodeError:  # SQLite quoted a garbled schema in its message
        conn.close()
        raise sqlite3.DatabaseError(f"database {path} is damaged: its schema cannot be read") from None
    conn.execute(f"PRAGMA synchronous={synchronous}")
    # Freed pages are zeroed, so erased content does not linger in the file.
    conn.execute("PRAGMA secure_delete=ON")
    # The bound on the pages a connection keeps: the pages a write
    # transaction changes wait here for its commit: a smaller bound spills a
    # large revocation's or cascade's pages to the WAL before it commits;
    # reads of the file come through the memory map below without a copy.
    # The log gives the clean pages back after its commits (_release_pages).
    conn.execute(f"PRAGMA cache_size=-{cache_mb * 1024}")
    # Reads through a memory map skip a copy per page, which a query or a
    # due list over a million memories feels. Writes still go through
    # the WAL. The prices: a failing disk read is a signal, not an error,
    # and the mapped pages a process has read count in its RSS (they are
    # the OS's page cache, shared). mmap_mb=0 turns it off.
    conn.execute(f"PRAGMA mmap_size={int(mmap_mb) * 1024 * 1024}")
    return conn


def _create_private(path: str | Path) -> None:
    """A new store's file, made private before SQLite writes to it (its
    write-ahead files take its mode); one in memory or named by a URI is
    SQLite's to make. A file that cannot be made here is left for SQLite,
    whose error names the problem as it always has."""
    name = str(path)
    if not name or name == ":memory:" or name.startswith("file:"):
        return
    with suppress(OSError):
        private_file(name)


def sqlite_failure(exc: Exception, path: str | None, operation: str) -> StoreFailed | None:
    """What an SQLite error leaving the store means (``_translated``): a
    file locked, closed or that cannot be opened is unavailable; any other
    is a file that no longer reads as this database. None: not SQLite's."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return None
    detail = str(exc) or type(exc).__name__
    text = detail.lower()
    if isinstance(exc, sqlite3.ProgrammingError) or (
        isinstance(exc, sqlite3.OperationalError) and any(word in text for word in _UNAVAILABLE)
    ):
        return StoreUnavailable(detail, where=path, operation=operation)
    return StoreDamaged(detail, where=path, operation=operation)


# SQLite's words for a file that is there and sound but cannot be used now
_UNAVAILABLE = ("locked", "busy", "unable to open", "readonly", "closed", "interrupted")


def storage_failure(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "disk" in text or "full" in text or "i/o" in text
