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
    from memwarden.events import redacted, scrubbed

    assert redacted("postgresql://app:s3cret@db.example:5432/m") == "postgresql://app:***@db.example:5432/m"
    # libpq's own parameter, in the query
    assert redacted("postgresql://app@db/m?password=Qsecret1&sslmode=require") == (
        "postgresql://app@db/m?password=***&sslmode=require"
    )
    assert "Zpw5" not in redacted("postgresql://app@db/m?sslpassword=Zpw5")
    # a password holding @ is split at the last one, as the URL is parsed
    assert redacted("postgresql://postgres:Qa:b@c@127.0.0.1:5432/m") == "postgresql://postgres:***@127.0.0.1:5432/m"
    # a URL too broken to connect with is redacted all the same
    assert redacted("postgresql://app:s3cret@db:99999/m") == "postgresql://app:***@db:99999/m"
    assert "s3cret" not in redacted("postgresql://app:s3cret@[::1:5432/m")
    assert scrubbed("failed to resolve host for password Qsecret1", "postgresql://a@h/m?password=Qsecret1") == (
        "failed to resolve host for password ***"
    )


@pytest.mark.parametrize("db", [":memory:", "sqlite:///:memory:"])
def test_a_one_shot_command_refuses_an_in_memory_store(db: str) -> None:
    result = Cli(db)("save", "m1", "--kind", "fact", "--summary", "s", "--content", "c", "--source-url",
                     "https://example.org/a", "--tenant", "t")  # fmt: skip
    assert result.exit_code == 2 and "--db" in result.stderr and "in-memory" in result.stderr, result.stderr


def test_a_password_in_the_query_never_shows_in_a_refusal(tmp_path: Path) -> None:
    result = Cli("postgresql://postgres@127.0.0.1:1/m?password=Qsecret1")("query", "--tenant", "t")
    assert result.exit_code == 2 and "Qsecret1" not in result.stderr + result.stdout, result.stderr
    assert "password=***" in result.stderr, result.stderr
    result = Cli(tmp_path / "m.db")(
        "--read-db", "postgresql://postgres@127.0.0.1/x?password=Zpw5", "query", "--tenant", "t"
    )
    assert result.exit_code == 2 and "Zpw5" not in result.stderr + result.stdout, result.stderr
