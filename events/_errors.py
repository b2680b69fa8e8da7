"""Errors of the log layer; each subclasses the built-in it resembles."""

from __future__ import annotations

import sqlite3

try:  # the PostgreSQL driver is an extra: memwarden[postgres]
    from psycopg import DatabaseError as _PostgresError
except ImportError:  # pragma: no cover - without the extra
    _POSTGRES_ERRORS: tuple[type[Exception], ...] = ()
else:
    _POSTGRES_ERRORS = (_PostgresError,)

# What a store raises when its database cannot answer (a damaged file, a
# failing disk, a server gone): the faces catch these without knowing the
# backend.
DATABASE_ERRORS: tuple[type[Exception], ...] = (sqlite3.DatabaseError, *_POSTGRES_ERRORS)
# those of them a database server raises, each naming its own cause (a lock
# timeout, a dropped connection), where SQLite's mean a damaged file
SERVER_ERRORS: tuple[type[Exception], ...] = _POSTGRES_ERRORS


class EventIdReused(ValueError):
    """A different event was appended under an event_id already in the log."""

    def __init__(self, event_id: str, seq: int) -> None:
        super().__init__(
            f"event_id {event_id!r} is already used by a different event at seq {seq}; "
            "an event_id is an idempotency key and may name only one event"
        )
        self.event_id = event_id
        self.seq = seq


class VersionConflict(ValueError):
    """Optimistic concurrency: the stream moved on since the caller read it."""

    def __init__(self, stream: str, expected: int, actual: int) -> None:
        super().__init__(f"stream {stream!r} is at version {actual}, but the append expected version {expected}")
        self.stream = stream
        self.expected = expected
        self.actual = actual


class LogDamaged(ValueError):
    """An import source that is not a whole, valid, chained log."""

    def __init__(self, problem: str, *, line: int | None = None, seq: int | None = None) -> None:
        where = f"line {line}: " if line is not None else ""
        super().__init__(f"{where}{problem}")
        self.problem = problem
        self.line = line
        self.seq = seq


class EventRowDamaged(LogDamaged):
    """A row of the database's own log that no longer decodes (a file edited
    by hand): the caller's request was fine, the store is not."""

    def __init__(self, seq: int, problem: str) -> None:
        super().__init__(f"event seq {seq}: {problem} (run 'memwarden audit verify')", seq=seq)


class LogDiverged(ValueError):
    """An import whose history disagrees with what the log already holds."""

    def __init__(self, seq: int, problem: str) -> None:
        super().__init__(f"seq {seq}: {problem}")
        self.seq = seq


class StorageError(OSError):
    """The log could not be written (disk full, I/O error): the batch was
    rolled back whole and nothing of it was acknowledged."""

    def __init__(self, path: str, cause: BaseException) -> None:
        super().__init__(f"could not write to {path}: {cause}; nothing was appended")
        self.path = path
