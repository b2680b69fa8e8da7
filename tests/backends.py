"""The backends the contract suite runs on, and what a test may do to one
behind the engine's back.

The behaviour tests (every ``tests/test_*.py`` and ``tests/reliability``)
speak only to memwarden's public API. Some must damage what is stored, as
a failing disk or an attacker with database access would: flip a stored
text, roll a view row back, rewrite a logged payload. Those go through a
``Backend`` here, each backend in its own SQL; ``tests/test_boundary.py``
holds the behaviour tests to it. What only one backend has (SQLite's
triggers, FTS5 structure records, tampering with the file) is tested in
``tests/sqlite``.
"""

from __future__ import annotations

from ._backend import Backend, Db, Failing
from ._postgres_backend import POSTGRES_SERVER, PostgresBackend
from ._sqlite_backend import SQLiteBackend

__all__ = ["BACKENDS", "POSTGRES_SERVER", "Backend", "Db", "Failing", "PostgresBackend", "SQLiteBackend"]

BACKENDS: list[Backend] = [SQLiteBackend(), PostgresBackend()]
