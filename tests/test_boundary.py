"""The storage boundary, as far as it is drawn: the faces hold no SQL,
import no database driver and reach no private part of the engine; the
engine modules that still hold SQL are named here, and the list only
shrinks (the store port of issue #18 empties it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
SQL = re.compile(
    r"\b(SELECT\s.+\sFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|PRAGMA\s|WITH\s+RECURSIVE)\b",
    re.I | re.S,
)

# engine modules that still speak SQL themselves: each leaves this list when
# its statements move behind the store port, and none may join it
STILL_HOLDING_SQL = {
    "_core.py",
    "_derivation.py",
    "_history.py",
    "_keys.py",
    "_readback.py",
    "_reading.py",
    "_records.py",
    "_revoking.py",
    "_scheduler.py",
    "_verify.py",
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


def test_no_engine_module_newly_holds_sql() -> None:
    holding = {p.name for p in (ROOT / "engine").glob("*.py") if holds_sql(p)}
    assert holding <= STILL_HOLDING_SQL, f"new SQL in the engine: {sorted(holding - STILL_HOLDING_SQL)}"
    # a module that no longer holds SQL leaves the list, so the list stays true
    assert STILL_HOLDING_SQL <= holding, (
        f"no longer holding SQL, remove from the list: {sorted(STILL_HOLDING_SQL - holding)}"
    )


def test_the_detector_finds_sql() -> None:
    assert SQL.search("SELECT tenant FROM memories WHERE x = ?")
    assert SQL.search("INSERT OR IGNORE INTO t VALUES (?)")
    assert not SQL.search("select the memories a selector covers")
