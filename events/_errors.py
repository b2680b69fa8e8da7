"""Errors of the log layer; each subclasses the built-in it resembles.

``Refusal`` is what every memwarden error (the log's, the view's and the
engine's) shares: it knows its own answer, the code every face prints, the
HTTP status and the command line's exit code, so no face maps errors to
answers itself (``memwarden.engine.answer`` renders any of them).
"""

from __future__ import annotations

import sqlite3
from typing import Any, ClassVar


def __getattr__(name: str) -> tuple[type[Exception], ...]:
    # What a driver raises when its database cannot answer (a damaged file, a
    # failing disk, a server gone), ``DATABASE_ERRORS``, and those of them a
    # database server raises, each naming its own cause (a lock timeout, a
    # dropped connection), where SQLite's mean a damaged file: ``SERVER_ERRORS``.
    # Only the backends catch these, to raise ``StoreUnavailable`` or
    # ``StoreDamaged`` in their stead (``_translated``): no driver error
    # crosses the store port. Computed when first asked for: the PostgreSQL
    # driver is an extra (memwarden[postgres]), and importing it costs a
    # command line on SQLite a third of its start.
    if name not in ("DATABASE_ERRORS", "SERVER_ERRORS"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from psycopg import DatabaseError as postgres_error
    except ImportError:  # pragma: no cover - without the extra
        server: tuple[type[Exception], ...] = ()
    else:
        server = (postgres_error,)
    globals().update(DATABASE_ERRORS=(sqlite3.DatabaseError, *server), SERVER_ERRORS=server)
    return globals()[name]


class Refusal(Exception):
    """Mixed into every memwarden error: its answer on every face.

    ``code`` is the ``error`` of the JSON answer, ``status`` the HTTP
    status, ``exit_code`` the command line's (1: the answer is "no"; 2:
    bad input or a refusal). ``field`` names what is at fault (None when
    nothing the caller gave is), ``problem`` says what is wrong, and
    ``details`` adds what a caller may act on (never what another tenant holds).
    """

    code: ClassVar[str] = "invalid_input"
    status: ClassVar[int] = 422
    exit_code: ClassVar[int] = 2
    field: str | None = None

    @property
    def problem(self) -> str:
        given = self.__dict__.get("_problem")
        if given is not None:
            return str(given)
        args: tuple[Any, ...] = getattr(self, "args", ())
        return args[0] if len(args) == 1 and isinstance(args[0], str) else str(self)

    @problem.setter
    def problem(self, value: str) -> None:
        self.__dict__["_problem"] = value

    def details(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_answer(cls, body: dict[str, Any]) -> Refusal:
        """The error again from its JSON answer (a client of the HTTP API
        raises what the server raised): its words, field and details as
        attributes, without running the constructor, which takes the
        arguments the server had."""
        exc = cls.__new__(cls)
        field = body.get("field")
        problem = str(body.get("problem") or "")
        Exception.__init__(exc, f"{field}: {problem}" if field and issubclass(cls, ValueError) else problem)
        exc.problem = problem
        exc.__dict__["field"] = field
        for name, value in body.items():
            if name not in ("error", "field", "problem"):
                exc.__dict__[name] = value
        return exc


class EventIdReused(Refusal, ValueError):
    """A different event was appended under an event_id already in the log.
    The answer never says what holds the id: it may be another caller's."""

    code = "event_id_reused"
    status = 409
    field = "event_id"

    def __init__(self, event_id: str, seq: int) -> None:
        super().__init__(
            f"event_id {event_id!r} already names another event (or a save whose memory was since revoked or "
            "erased); an event_id is an idempotency key and may name only one event"
        )
        self.event_id = event_id
        self.seq = seq


class VersionConflict(Refusal, ValueError):
    """Optimistic concurrency: the stream moved on since the caller read it."""

    code = "version_conflict"
    status = 409

    def __init__(self, stream: str, expected: int, actual: int) -> None:
        super().__init__(f"stream {stream!r} is at version {actual}, but the append expected version {expected}")
        self.stream = stream
        self.expected = expected
        self.actual = actual


class LogDamaged(Refusal, ValueError):
    """An import source that is not a whole, valid, chained log."""

    code = "log_damaged"
    field: str | None = "file"  # None in EventRowDamaged: the store, not a file given

    def __init__(self, problem: str, *, line: int | None = None, seq: int | None = None) -> None:
        where = f"line {line}: " if line is not None else ""
        super().__init__(f"{where}{problem}")
        self.line = line
        self.seq = seq


class EventRowDamaged(LogDamaged):
    """A row of the database's own log that no longer decodes (a file edited
    by hand): the caller's request was fine, the store is not."""

    status = 503
    field = None

    def __init__(self, seq: int, problem: str) -> None:
        super().__init__(f"event seq {seq}: {problem} (run 'memwarden audit verify')", seq=seq)


class LogDiverged(Refusal, ValueError):
    """An import whose history disagrees with what the log already holds."""

    code = "log_damaged"
    field = "file"

    def __init__(self, seq: int, problem: str) -> None:
        super().__init__(f"seq {seq}: {problem}")
        self.seq = seq


class StorageError(Refusal, OSError):
    """The log could not be written (disk full, I/O error): the batch was
    rolled back whole and nothing of it was acknowledged."""

    code = "storage"
    status = 507
    field = "db"

    def __init__(self, path: str, cause: BaseException) -> None:
        super().__init__(f"could not write to {path}: {cause}; nothing was appended")
        self.path = path


class TextErased(Refusal, PermissionError):
    """A text written for a memory version an erasure destroyed: the text
    store refuses it, whoever writes it."""

    code = "erased"
    status = 409
    field = "memory_id"

    def __init__(self, tenant: str, memory_id: str, version: int) -> None:
        super().__init__(f"memory {memory_id!r} version {version} was erased: its text cannot be written again")
        self.tenant = tenant
        self.memory_id = memory_id
        self.version = version


class InvalidField(Refusal, ValueError):
    """A value the log layer cannot keep (a vector with NaN, the wrong
    length): names the field and the problem, as the engine's InvalidInput."""

    field: str  # always named

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class StoreFailed(Refusal):
    """The store could not answer: nothing the caller did. A remote caller
    is told only that (the detail may name the server's host or the file's
    path); the operator's command line and the server log get the whole
    line, which names the store, the operation and the driver's words (the
    driver's exception is the ``__cause__``)."""

    code = "database"
    status = 503
    field = "db"
    hint: ClassVar[str] = ""
    GENERIC: ClassVar[str] = "the database could not answer; see the server log"
    # what a client's copy (``from_answer``, no constructor run) lacks
    detail: str = "could not answer"
    where: str | None = None
    operation: str | None = None

    def __init__(self, detail: str = "", *, where: str | None = None, operation: str | None = None) -> None:
        named = ": ".join(part for part in (where, operation, detail) if part)
        super().__init__(f"database: {named or 'could not answer'}{self.hint}")
        self.problem = self.GENERIC
        self.detail = detail or "could not answer"  # the driver's own words
        self.where = where
        self.operation = operation


class StoreUnavailable(StoreFailed, ConnectionError):
    """The store cannot be reached now: a server down or gone mid-session, a
    lost connection, a timeout, a file another process holds locked or that
    cannot be opened. Worth trying again later; nothing is damaged."""


class StoreDamaged(StoreFailed, RuntimeError):
    """The store's file or data no longer reads as a database (a garbled
    page, a file that is not SQLite): ``memwarden audit verify`` says how
    far, ``memwarden rebuild`` or a backup repairs it."""

    hint = " (is the file damaged? run 'memwarden audit verify')"
