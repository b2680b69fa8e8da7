"""The storage boundary, as far as it is drawn: the faces hold no SQL,
import no database driver and reach no private part of the engine; the
engine holds no SQL (it asks the store, under projections/ and events/, by
name); the engine modules that still take a database connection are named
here, and the list only shrinks (the store port of issue #18 empties it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
SQL = re.compile(
    r"\b(SELECT\s.+\sFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|PRAGMA\s|WITH\s+RECURSIVE)\b",
    re.I | re.S,
)

# engine modules that still take a database connection (``sqlite3``, for its
# type): the store port of issue #18 replaces it with a store object, and
# each module leaves this list as it does; none may join it
STILL_TAKING_A_CONNECTION = {
    "_core.py",
    "_derivation.py",
    "_history.py",
    "_records.py",
    "_saving.py",
    "_versions.py",
}


def strings(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append(node.value)
        elif isinstance(node, ast.JoinedStr):
            found.append(
                "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
            )
    return found


def imports(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def holds_sql(path: Path) -> bool:
    return any(SQL.search(s) for s in strings(ast.parse(path.read_text(encoding="utf-8"))))


def test_the_faces_hold_no_sql_and_use_only_the_public_engine() -> None:
    for path in sorted((ROOT / "engine" / "faces").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert not holds_sql(path), f"{path.name} holds SQL"
        used = imports(tree)
        assert "sqlite3" not in used, f"{path.name} imports sqlite3"
        private = {m for m in used if m.startswith("memwarden.engine._") or m.startswith("memwarden.events._")}
        assert not private, f"{path.name} reaches into {sorted(private)}"


def test_the_engine_holds_no_sql() -> None:
    holding = sorted(p.name for p in (ROOT / "engine").rglob("*.py") if holds_sql(p))
    assert not holding, f"SQL in the engine (it belongs in the store, under projections/ or events/): {holding}"


def test_no_engine_module_newly_takes_a_connection() -> None:
    taking = {p.name for p in (ROOT / "engine").glob("*.py") if "sqlite3" in imports(ast.parse(p.read_text("utf-8")))}
    assert taking <= STILL_TAKING_A_CONNECTION, f"new in the engine: {sorted(taking - STILL_TAKING_A_CONNECTION)}"
    # a module that no longer does leaves the list, so the list stays true
    assert STILL_TAKING_A_CONNECTION <= taking, f"remove from the list: {sorted(STILL_TAKING_A_CONNECTION - taking)}"


def test_the_detector_finds_sql() -> None:
    assert SQL.search("SELECT tenant FROM memories WHERE x = ?")
    assert SQL.search("INSERT OR IGNORE INTO t VALUES (?)")
    assert not SQL.search("select the memories a selector covers")
