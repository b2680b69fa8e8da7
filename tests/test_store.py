"""The store port: a ``--db`` URL picks the backend, and each backend keeps
every promise of the port (the rest of the contract suite checks how)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from memwarden.events import FrozenClock
from memwarden.projections import UnknownBackend, open_store

from .backends import Backend
from .conftest import Cli


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ("mysql://127.0.0.1/m", "no backend for 'mysql'"),
        ("sqlite://host/m.db", "names a file, not a host"),
        ("sqlite:///", "names no file"),
    ],
)
def test_a_url_no_backend_serves_is_refused_naming_the_flag(given: str, problem: str) -> None:
    with pytest.raises(UnknownBackend) as caught:
        open_store(given, clock=FrozenClock("2026-01-05T09:00:00Z"))
    assert caught.value.field == "db" and problem in str(caught.value) and given in str(caught.value)


def test_the_cli_refuses_a_backend_it_lacks_with_exit_code_2() -> None:
    result = Cli("mysql://127.0.0.1/m")("audit", "head", "--json")
    assert result.exit_code == 2 and "--db 'mysql://127.0.0.1/m'" in result.stderr, result.stderr


def test_a_postgresql_url_opens_the_postgresql_store(backend: Backend) -> None:
    if backend.name != "postgres":
        pytest.skip("a PostgreSQL URL needs the PostgreSQL backend's server")
    url = backend.db(Path(tempfile.gettempdir()), "url-forms")
    for spelling in (url, url.replace("postgresql://", "postgres://", 1)):
        store = open_store(spelling, clock=FrozenClock("2026-01-05T09:00:00Z"))
        try:
            assert store.backend == "postgresql" and "@" in store.path
        finally:
            store.close()


def test_a_password_never_shows_in_the_store_path() -> None:
    from memwarden.events.postgres import redacted

    assert redacted("postgresql://app:s3cret@db.example:5432/m") == "postgresql://app:***@db.example:5432/m"
