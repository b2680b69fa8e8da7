"""A PostgreSQL server for the tests: each test gets a database of its own,
dropped afterwards. ``MEMWARDEN_TEST_POSTGRES`` names the server (default:
the development and CI machines' ``127.0.0.1:5432``, trust authentication).
Without one the tests skip with one line saying so, except under
``CI=true``, where they must run."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from ..backends import PostgresBackend

SERVER = os.environ.get("MEMWARDEN_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432")


def _admin() -> object:
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'memwarden[postgres]')"
    try:
        return psycopg.connect(f"{SERVER}/postgres", autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        return f"no PostgreSQL server at {SERVER}: {str(exc).strip().splitlines()[0]}"


@pytest.fixture(scope="session")
def pg_admin() -> Iterator[object]:
    admin = _admin()
    if isinstance(admin, str):
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true needs PostgreSQL: {admin}")
        pytest.skip(admin)
    yield admin
    admin.close()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def pg_databases(pg_admin: object) -> Iterator[PostgresBackend]:
    databases = PostgresBackend(SERVER)
    yield databases
    databases.close()


@pytest.fixture
def pg_url(pg_databases: PostgresBackend) -> Iterator[str]:
    """The URL of an empty database of its own (lent: emptied afterwards)."""
    url = pg_databases.lend()
    yield url
    pg_databases.give_back(url)
