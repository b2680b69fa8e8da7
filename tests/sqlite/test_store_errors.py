"""No driver error crosses the store port: below it each backend turns its
driver's failures into ``StoreUnavailable`` or ``StoreDamaged`` (the
driver's exception kept as the cause), and above it the engine and its
faces know only those; each says what is true of its backend (a server
gone is unavailable, never a "damaged file")."""

from __future__ import annotations

import ast
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from memwarden.engine import OPERATOR, KeyStore, StoreDamaged, StoreUnavailable, Warden, answer
from memwarden.engine.faces.http import create_app
from memwarden.events import StoreFailed

from ..conftest import save_memory

ENGINE = Path(__file__).resolve().parents[2] / "engine"
DRIVER_NAMES = {"DATABASE_ERRORS", "SERVER_ERRORS", "DatabaseError", "OperationalError", "ProgrammingError"}


def _engine_modules() -> Iterator[Path]:
    yield from sorted(ENGINE.rglob("*.py"))


@pytest.mark.parametrize("module", list(_engine_modules()), ids=lambda p: str(p.relative_to(ENGINE)))
def test_no_engine_module_knows_a_driver(module: Path) -> None:
    tree = ast.parse(module.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or "", *(alias.name for alias in node.names)]
        else:
            names = [node.id] if isinstance(node, ast.Name) else [node.attr] if isinstance(node, ast.Attribute) else []
        for name in names:
            root = name.split(".")[0]
            assert root not in ("sqlite3", "psycopg", "psycopg_pool"), f"{module}:{node.lineno} imports {name}"
            assert name not in DRIVER_NAMES, f"{module}:{node.lineno} names the driver's {name}"


def _junk(tmp_path: Path) -> Path:
    db = tmp_path / "junk.db"
    db.write_bytes(b"this is not a database" * 500)
    return db


def test_a_file_that_is_not_a_database_is_damaged_naming_it_and_the_way_out(tmp_path: Path) -> None:
    db = _junk(tmp_path)
    with pytest.raises(StoreDamaged) as raised:
        Warden(db)
    exc = raised.value
    assert isinstance(exc, RuntimeError) and isinstance(exc.__cause__, sqlite3.DatabaseError)
    assert exc.where == str(db) and exc.operation == "open"
    found = answer(exc)
    assert found is not None and (found.code, found.status, found.exit_code, found.field) == ("database", 503, 2, "db")
    assert str(db) in found.message and "run 'memwarden audit verify'" in found.message
    # a remote caller is told no path
    assert found.body()["problem"] == StoreFailed.GENERIC and str(db) not in str(found.body())


def _garble_text_index(w: Warden) -> None:
    # a structure that no longer decodes: the text index's own damage
    w.store.conn.execute("UPDATE memories_fts_data SET block = ? WHERE id = 10", (bytes(4) + b"\x90\x00\x00",))  # type: ignore[attr-defined]


def test_damage_found_mid_session_is_damaged_through_the_warden_and_503_on_http(tmp_path: Path) -> None:
    w = Warden(tmp_path / "w.db")
    try:
        for i in range(5):
            save_memory(w, f"m{i}", content=f"복구 recoverable {i}")
        _garble_text_index(w)
        with pytest.raises(StoreDamaged, match="is the file damaged"):
            w.query(tenant="acme", text="recoverable", caller=OPERATOR)
        key = KeyStore(w).create("agent", tenants=["acme"], caller=OPERATOR)[0]
        with TestClient(create_app(w, scheduler=False, mcp=False)) as client:
            response = client.get(
                "/v1/memories", params={"tenant": "acme", "text": "recoverable"}, headers={"x-api-key": key}
            )
        assert response.status_code == 503, response.text
        assert response.json() == {"error": "database", "field": "db", "problem": StoreFailed.GENERIC}
    finally:
        w.close()


def test_the_audit_names_a_file_it_cannot_read_as_damaged(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from memwarden.engine.faces.cli import cli

    result = CliRunner().invoke(cli, ["--db", str(_junk(tmp_path)), "audit", "verify", "--json"])
    assert result.exit_code == 2, result.output
    assert "file is not a database" in result.stderr and "memwarden audit verify" in result.stderr


def test_a_full_disk_met_by_a_store_call_inside_a_write_is_still_a_storage_error(tmp_path: Path) -> None:
    from memwarden.events import SQLiteEventLog, StorageError

    log = SQLiteEventLog(tmp_path / "full.db")
    try:
        # what the texts' own translation makes of SQLite's full disk, met inside the log's transaction
        with pytest.raises(StorageError, match="nothing was appended"), log.transaction():
            raise StoreDamaged("database or disk is full") from sqlite3.OperationalError("database or disk is full")
        assert log.head().seq == 0
    finally:
        log.close()


def test_every_kind_of_public_method_translates_what_leaves_it() -> None:
    from contextlib import contextmanager

    from memwarden.events._sqlite_connect import sqlite_failure
    from memwarden.events._translated import translated

    broken = sqlite3.DatabaseError("database disk image is malformed")

    @translated
    class Backend:
        def _driver_error(self, exc: Exception, operation: str) -> StoreFailed | None:
            return sqlite_failure(exc, "b.db", operation)

        def call(self) -> None:
            raise broken

        def rows(self) -> Iterator[int]:
            yield 1
            raise broken

        def lazily(self) -> Iterator[int]:
            return self._rows()

        def _rows(self) -> Iterator[int]:
            yield 1
            raise broken

        @contextmanager
        def reading(self) -> Iterator[int]:
            yield 1

        def refuses(self) -> None:
            raise KeyError("not a database failure")

    b = Backend()
    for run, operation in (
        (b.call, "call"),
        (lambda: list(b.rows()), "rows"),
        (lambda: list(b.lazily()), "lazily"),
    ):
        with pytest.raises(StoreDamaged) as raised:
            run()
        assert raised.value.__cause__ is broken and raised.value.operation == operation
    with pytest.raises(StoreDamaged) as raised, b.reading():
        raise broken  # the caller's body, thrown through the context manager
    assert raised.value.operation == "reading" and raised.value.where == "b.db"
    with pytest.raises(KeyError):
        b.refuses()
    # a locked file is not a damaged one
    locked = sqlite_failure(sqlite3.OperationalError("database is locked"), "b.db", "call")
    assert isinstance(locked, StoreUnavailable) and "damaged" not in str(locked)
