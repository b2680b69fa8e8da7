"""The store port: a ``--db`` URL picks the backend, and each backend keeps
every promise of the port (the rest of the contract suite checks how)."""

from __future__ import annotations

import pytest
from memwarden.events import FrozenClock
from memwarden.projections import UnknownBackend, open_store

from .conftest import Cli


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ("postgresql://127.0.0.1/memwarden", "PostgreSQL backend is not part of this version"),
        ("postgres://127.0.0.1/memwarden", "PostgreSQL backend is not part of this version"),
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
