"""Opening the backend a ``--db`` URL names.

Beside the port rather than in it: this is the one place that knows every
backend, and the backends import the port, so the port imports none of them.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import SplitResult, unquote
from urllib.parse import urlsplit as _urlsplit

from memwarden.events import Clock, Refusal, SQLiteOptions, StoreUnavailable, redacted, scrubbed

from ._port import Store
from ._sqlite_store import SQLiteStore


def urlsplit(url: str) -> SplitResult:
    """``url``'s parts, or ``UnknownBackend`` naming it (its password
    left out) where it is not even a URL's shape (``[::1:5432``)."""
    try:
        return _urlsplit(url)
    except ValueError as exc:
        raise UnknownBackend(redacted(url), f"is not a URL memwarden can read: {exc}") from None


class UnknownBackend(Refusal, ValueError):
    """A ``--db`` URL naming no backend this installation has."""

    def __init__(self, url: str, problem: str, field: str = "db") -> None:
        super().__init__(f"--{field} {url!r}: {problem}")
        self.field = field
        self.problem = problem


def sqlite_path(url: str | Path) -> str | None:
    """The file a ``--db`` value names for SQLite, or None for another backend.

    A bare path is SQLite; so is ``sqlite:///relative.db`` or
    ``sqlite:////absolute.db`` (SQLAlchemy's spelling, which operators
    know) and ``sqlite:///:memory:``."""
    text = str(url)
    if "://" not in text:
        return text
    parts = urlsplit(text)
    if parts.scheme != "sqlite":
        return None
    if parts.netloc:
        raise UnknownBackend(text, "an SQLite URL names a file, not a host: sqlite:///relative.db or sqlite:////abs.db")
    path = unquote(parts.path)[1:]  # the third slash ends the empty host
    if not path:
        raise UnknownBackend(text, "names no file")
    return path


def sqlite_options(url: str | Path, base: SQLiteOptions | None = None) -> SQLiteOptions:
    """The SQLite options a ``sqlite:///`` URL's query sets over ``base``
    (``sqlite:///m.db?synchronous=normal``); a bare path has no query (a
    file's name may hold a ``?``)."""
    text = str(url)
    query = urlsplit(text).query if text.startswith("sqlite://") else ""
    try:
        return SQLiteOptions.from_query(query, base)
    except ValueError as exc:
        raise UnknownBackend(text, str(exc)) from None


def open_store(
    url: str | Path,
    *,
    clock: Clock,
    read_url: str | None = None,
    sqlite: SQLiteOptions | None = None,
) -> Store:
    """The backend ``url`` names, opened (see ``sqlite_path`` for SQLite's
    forms); ``read_url`` names a streaming replica to read from (PostgreSQL).
    ``sqlite``: the SQLite backend's options, which the URL's query may
    override; a PostgreSQL store has none (its server has its settings)."""
    path = sqlite_path(url)
    if path is not None:
        if read_url is not None:
            raise UnknownBackend(redacted(read_url), "a read replica needs the PostgreSQL backend", field="read-db")
        return SQLiteStore(path, clock=clock, options=sqlite_options(url, sqlite))
    scheme = urlsplit(str(url)).scheme
    if scheme in ("postgresql", "postgres"):
        try:
            from ._postgres_store import PostgresStore  # the driver is an extra
        except ImportError:
            raise UnknownBackend(
                redacted(str(url)), "the PostgreSQL backend needs its driver: pip install 'memwarden[postgres]'"
            ) from None
        import psycopg

        try:
            return PostgresStore(str(url), clock=clock, read_url=read_url)
        except StoreUnavailable as exc:
            cause = exc.__cause__
            if not isinstance(cause, psycopg.OperationalError) or cause.sqlstate is not None:
                raise  # the server answered (a lock timeout, say): not the URL's fault
            # a server that refuses or a database that is not there (libpq
            # gives these no SQLSTATE) when the store opens: the URL is what
            # to fix (its password never printed)
            reason = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
            raise UnknownBackend(
                redacted(str(url)), f"cannot connect to PostgreSQL: {scrubbed(reason, str(url))}"
            ) from None
    raise UnknownBackend(redacted(str(url)), f"no backend for {scheme!r} URLs (a file path or sqlite:/// is SQLite)")
