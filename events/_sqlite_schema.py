"""Asking an SQLite database about its own layout, through sqlite-utils:
what a migration needs to know before it changes anything."""

from __future__ import annotations

import sqlite3

import sqlite_utils


def database(conn: sqlite3.Connection) -> sqlite_utils.Database:
    """sqlite-utils over one of our connections, changing nothing about it:
    no recursive triggers (the log's triggers must fire exactly as written)
    and no plugins. Its DDL runs inside our open transaction."""
    return sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False)


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    return database(conn)[name].exists()


def column_types(conn: sqlite3.Connection, table: str) -> dict[str, str]:
    """Each column of ``table`` and its declared type ({} if there is no such table)."""
    found = database(conn)[table]
    return {c.name: c.type for c in found.columns} if found.exists() else {}
