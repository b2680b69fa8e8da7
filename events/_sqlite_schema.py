"""Asking an SQLite database about its own layout: what a migration needs
to know before it changes anything. The questions are plain SQL; sqlite-utils
(``database``) declares the tables a new store lacks, and is imported only
then: it brings numpy with it, a fifth of a command's start on a store that
has them all."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite_utils


def database(conn: sqlite3.Connection) -> sqlite_utils.Database:
    """sqlite-utils over one of our connections, changing nothing about it:
    no recursive triggers (the log's triggers must fire exactly as written)
    and no plugins. Its DDL runs inside our open transaction."""
    import sqlite_utils

    return sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False)


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    # what sqlite-utils' Table.exists asks (virtual tables are tables too; views are not)
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def column_types(conn: sqlite3.Connection, table: str) -> dict[str, str]:
    """Each column of ``table`` and its declared type ({} if there is no such table)."""
    if not has_table(conn, table):
        return {}
    return dict(conn.execute("SELECT name, type FROM pragma_table_info(?) ORDER BY cid", (table,)).fetchall())
