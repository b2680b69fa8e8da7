"""What only the SQLite store has: these tests run on it alone."""

from __future__ import annotations

import pytest

from ..backends import Backend, SQLiteBackend


@pytest.fixture(scope="session")
def backend() -> Backend:
    return SQLiteBackend()
