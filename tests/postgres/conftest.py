"""A PostgreSQL server for the tests: each test gets a database of its own,
dropped when the session ends. ``MEMWARDEN_TEST_POSTGRES`` names the server (default:
the development and CI machines' ``127.0.0.1:5432``, trust authentication).
Without one the tests skip with one line saying so, except under
``CI=true``, where they must run."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest

from ..backends import drop_databases

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
def pg_made(pg_admin: object) -> Iterator[list[str]]:
    """The databases the tests made, dropped together when the session ends
    (each drop waits for a checkpoint of the server: ``drop_databases``)."""
    made: list[str] = []
    yield made
    drop_databases(SERVER, made)


@pytest.fixture
def pg_url(pg_admin: object, pg_made: list[str]) -> str:
    """The URL of a new, empty database."""
    name = f"memwarden_test_{secrets.token_hex(6)}"
    pg_admin.execute(f'CREATE DATABASE "{name}"')  # type: ignore[attr-defined]
    pg_made.append(name)
    pg_admin.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')  # type: ignore[attr-defined]
    return f"{SERVER}/{name}"
