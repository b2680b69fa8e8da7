"""memwarden.events.sqlite: what the SQLite side of the store shares with
the SQLite log (the schema helpers over one connection, and the
translation of the driver's errors into the store's own).

A module of its own so that the store reaches the log's SQLite helpers by
a public name, never through ``memwarden.events._sqlite_schema``."""

from __future__ import annotations

from ._sqlite_connect import sqlite_failure
from ._sqlite_schema import column_types, database, has_table

__all__ = ["column_types", "database", "has_table", "sqlite_failure"]
