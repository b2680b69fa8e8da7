"""SQLite's tuning knobs are the SQLite backend's: one ``SQLiteOptions``
value, set by the Warden's keywords (as before) or by a ``sqlite:///``
URL's query; the PostgreSQL store takes none of them."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from memwarden.engine import Warden
from memwarden.events import FrozenClock, SQLiteOptions
from memwarden.projections import UnknownBackend, sqlite_options

from ..conftest import Cli


def _pragmas(w: Warden) -> tuple[int, int, int]:
    conn = w.store.conn  # type: ignore[attr-defined]
    return tuple(conn.execute(f"PRAGMA {name}").fetchone()[0] for name in ("synchronous", "cache_size", "mmap_size"))  # type: ignore[return-value]


def test_the_wardens_keywords_still_set_them(tmp_path: Path, clock: FrozenClock) -> None:
    with Warden(tmp_path / "k.db", clock=clock, synchronous="OFF", mmap_mb=0, cache_mb=8) as w:
        assert w.store.options == SQLiteOptions(synchronous="OFF", mmap_mb=0, cache_mb=8)  # type: ignore[attr-defined]
        assert _pragmas(w) == (0, -8 * 1024, 0)


def test_a_url_query_sets_them_over_the_keywords(tmp_path: Path, clock: FrozenClock) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}?synchronous=normal&cache_mb=16"
    with Warden(url, clock=clock, mmap_mb=0) as w:
        assert w.path == str(tmp_path / "q.db")
        assert _pragmas(w) == (1, -16 * 1024, 0)


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("fast=1", "fast"),
        ("synchronous=sometimes", "synchronous"),
        ("cache_mb=-1", "cache_mb"),
        ("mmap_mb=x", "mmap_mb"),
        ("synchronous=full&synchronous=off", "synchronous"),  # given twice: which was meant?
        ("cache_mb=1&cache_mb=2", "cache_mb"),
        ("cache_mb=99999999999999999999", "cache_mb"),  # no cache that large: a typo
        ("mmap_mb=99999999999999", "mmap_mb"),
    ],
)
def test_a_query_that_is_no_option_is_refused_naming_it(query: str, named: str) -> None:
    with pytest.raises(UnknownBackend) as raised:
        sqlite_options(f"sqlite:///m.db?{query}")
    assert raised.value.field == "db" and f"{named}:" in str(raised.value)


def test_the_cli_refuses_it_with_exit_code_2(tmp_path: Path) -> None:
    result = Cli(f"sqlite:///{tmp_path / 'c.db'}?fast=1")("audit", "head", "--json")
    assert result.exit_code == 2 and "fast: not an SQLite option" in result.stderr, result.stderr


def test_a_bare_path_has_no_query() -> None:
    # a file's name may hold a "?": only a URL has a query
    assert sqlite_options("odd?name.db") == SQLiteOptions()


def test_the_options_are_checked_when_made() -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SQLiteOptions(synchronous="SOMETIMES")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cache_mb"):
        SQLiteOptions(cache_mb=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        SQLiteOptions("FULL")  # type: ignore[misc]  (keywords only)


def test_the_postgresql_store_takes_no_sqlite_option() -> None:
    pytest.importorskip("psycopg")
    from memwarden.projections._postgres_store import PostgresStore

    accepted = inspect.signature(PostgresStore.__init__).parameters
    assert not {"synchronous", "mmap_mb", "cache_mb"} & set(accepted)
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
