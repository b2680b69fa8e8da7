"""What the PostgreSQL backend adds to psycopg: the ``?`` marks both
backends' shared SQL is written with, a column kept from the planner's
samples, and what the driver's errors mean for the store."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg

from ._errors import StoreDamaged, StoreFailed, StoreUnavailable


@functools.lru_cache(maxsize=1024)
def _qmark(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


class QmarkConnection:
    """A psycopg connection that takes the ``?`` marks of the SQL both
    backends share (the view's questions, the fold's set statements), so
    each is written once. A literal ``%`` survives; no shared statement
    holds a ``?`` of its own (PostgreSQL's jsonb ``?`` operators are never
    used through this)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.raw = conn

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        if sql.startswith("SELECT") and any(type(p) is str and "\x00" in p for p in parameters):
            # PostgreSQL's text holds no NUL, so nothing stored equals a value
            # with one (identifiers refuse control characters on the way in):
            # a lookup of one finds nothing, as on SQLite, instead of failing
            parameters = [p.replace("\x00", "\ufffe") if type(p) is str else p for p in parameters]
        return self.raw.execute(_qmark(sql), parameters)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]]) -> psycopg.Cursor[Any]:
        cursor = self.raw.cursor()
        cursor.executemany(_qmark(sql), parameters)
        return cursor


def no_statistics(table: str, columns: tuple[str, ...]) -> str:
    """A statement that keeps the planner from sampling ``columns`` of
    ``table``: pg_stats would show a frequent summary, word or checksum to
    anyone who may read it, after its erasure too (an ANALYZE never removes
    what it sampled before, so a superuser also deletes that). DDL only where
    it is missing: a process opening a store whose schema exists takes no
    lock a running writer holds."""
    names = ", ".join(f"'{c}'" for c in columns)
    alter = ", ".join(f"ALTER COLUMN {c} SET STATISTICS 0" for c in columns)
    return f"""DO $$ BEGIN
    IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '{table}'::regclass
               AND attname IN ({names}) AND attstattarget <> 0) THEN
        ALTER TABLE {table} {alter};
        IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
            DELETE FROM pg_statistic WHERE starelid = '{table}'::regclass AND staattnum IN
                (SELECT attnum FROM pg_attribute WHERE attrelid = '{table}'::regclass AND attname IN ({names}));
        END IF;
    END IF;
    END $$"""


def postgres_failure(exc: Exception, where: str | None, operation: str) -> StoreFailed | None:
    """What a psycopg error leaving the store means (``_translated``): the
    server reports data it found corrupt as such; anything else (a server
    down or gone, a lost connection, a lock or statement timeout, a
    refusal) is a server that could not answer now. None: not psycopg's."""
    if not isinstance(exc, psycopg.DatabaseError):
        return None
    detail = str(exc).strip() or type(exc).__name__
    if exc.sqlstate in _CORRUPT:
        return StoreDamaged(detail, where=where, operation=operation)
    return StoreUnavailable(detail, where=where, operation=operation)


_CORRUPT = ("XX001", "XX002")  # data_corrupted, index_corrupted
