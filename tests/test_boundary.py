"""The storage boundary: the faces hold no SQL, import no database driver
and reach no private part of the engine; the engine holds no SQL and
imports no driver (it asks the store port, ``memwarden.projections.Store``,
by name); and the contract tests speak to memwarden's public API alone, so
that they run unchanged on every backend (what they must do behind the
engine's back goes through ``tests/backends.py``)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
SQL = re.compile(
    r"\b(SELECT\s.+\sFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|PRAGMA\s|WITH\s+RECURSIVE)\b",
    re.I | re.S,
)


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


def private_engine_module(name: str) -> bool:
    """A private module of the engine or of one of its subpackages
    (``memwarden.engine._core``, ``memwarden.engine.sinks._worker``)."""
    parts = name.split(".")
    return parts[:2] == ["memwarden", "engine"] and any(part.startswith("_") for part in parts[2:])


def test_the_faces_hold_no_sql_and_use_only_the_public_engine() -> None:
    faces = sorted((ROOT / "engine" / "faces").rglob("*.py"))
    assert len(faces) > 20, "the faces moved: this test must find them again"
    for path in faces:
        name = path.relative_to(ROOT)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert not holds_sql(path), f"{name} holds SQL"
        used = imports(tree)
        assert "sqlite3" not in used, f"{name} imports sqlite3"
        private = {m for m in used if private_engine_module(m) or m.startswith("memwarden.events._")}
        assert not private, f"{name} reaches into {sorted(private)}"


def test_the_detector_finds_a_private_engine_module() -> None:
    assert private_engine_module("memwarden.engine._core")
    assert private_engine_module("memwarden.engine.sinks._worker")
    assert not private_engine_module("memwarden.engine")
    assert not private_engine_module("memwarden.engine.sinks")


def test_the_engine_holds_no_sql() -> None:
    holding = sorted(p.name for p in (ROOT / "engine").rglob("*.py") if holds_sql(p))
    assert not holding, f"SQL in the engine (it belongs in the store, under projections/ or events/): {holding}"


STORE_FILE = re.compile(r"/ f?\"[^\"]*\\.db\"")
DRIVERS = {"sqlite3", "sqlite_utils", "psycopg", "psycopg_pool"}


def test_the_engine_imports_no_database_driver() -> None:
    for path in sorted((ROOT / "engine").rglob("*.py")):
        used = imports(ast.parse(path.read_text("utf-8")))
        assert not used & DRIVERS, f"{path.relative_to(ROOT)} imports {sorted(used & DRIVERS)}"
        private = {m for m in used if m.startswith("memwarden.projections._")}
        assert not private, f"{path.relative_to(ROOT)} reaches into the store's private {sorted(private)}"


def contract_tests() -> list[Path]:
    """The behaviour tests: every test file but the SQLite-only ones and this one."""
    found = [*(ROOT / "tests").glob("test_*.py"), *(ROOT / "tests" / "reliability").glob("test_*.py")]
    return sorted(p for p in found if p.name != "test_boundary.py")


def test_the_contract_tests_speak_only_to_the_public_api() -> None:
    assert len(contract_tests()) > 20
    for path in contract_tests():
        text = path.read_text("utf-8")
        tree = ast.parse(text)
        assert not holds_sql(path), f"{path.name} holds SQL: it belongs in tests/backends.py or tests/sqlite/"
        used = imports(tree)
        assert not used & DRIVERS, f"{path.name} imports {sorted(used & DRIVERS)}"
        for reach in (".conn", ".projector", "SQLiteEventLog", "SQLiteStore", "SQLiteView"):
            assert reach not in text, f"{path.name} reaches the SQLite store ({reach})"
        # a store of its own comes from the backend under test, never a file path of its own
        assert not STORE_FILE.search(text), f"{path.name} names a database file: use backend.db(...)"


def test_every_backend_is_a_whole_backend() -> None:
    """Each backend the contract suite runs on implements every hook."""
    from .backends import BACKENDS

    assert BACKENDS
    for backend in BACKENDS:
        assert not getattr(type(backend), "__abstractmethods__", None), backend.name


def test_the_detector_finds_sql() -> None:
    assert SQL.search("SELECT tenant FROM memories WHERE x = ?")
    assert SQL.search("INSERT OR IGNORE INTO t VALUES (?)")
    assert not SQL.search("select the memories a selector covers")


def engine_modules() -> dict[str, Path]:
    """Each module of the engine, its subpackages' and its faces' among them,
    by its name under ``memwarden.engine`` (``_core``, ``sinks._worker``;
    a package by its own name, ``sinks``, the engine's ``__init__`` as "")."""
    found = {}
    for path in (ROOT / "engine").rglob("*.py"):
        parts = list(path.relative_to(ROOT / "engine").with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def engine_imports() -> dict[str, set[str]]:
    """Each engine module -> the engine modules its relative imports name,
    for types only or inside a function as well (a relative import from a
    package's ``__init__`` is relative to the package itself)."""
    modules = engine_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = name.split(".") if name else []
        package = here if path.name == "__init__.py" else here[:-1]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.level >= 1) or node.level - 1 > len(package):
                continue
            base = package[: len(package) - (node.level - 1)]
            target = [*base, *(node.module.split(".") if node.module else [])]
            if node.module:
                deps.add(".".join(target))
            deps.update(".".join([*target, a.name]) for a in node.names)  # names that are submodules
        graph[name] = deps & set(modules)
    return graph


def test_the_engine_modules_import_each_other_without_a_cycle() -> None:
    """The Warden delegates to its modules and none of them needs the Warden
    back: no import cycle, not even one hidden behind TYPE_CHECKING or in a
    function (every relative import counts, wherever it stands, in the
    engine's subpackages and faces too; a library imported for its types
    only, as httpx where the first exchange loads it, makes no cycle)."""
    graph = engine_imports()
    assert {"_core", "sinks._worker", "recall._search", "faces.http._app"} <= set(graph)
    assert "_core" in graph["sinks._ops"] and "sinks._config" in graph["_core"]
    cycle = a_cycle(graph)
    assert cycle is None, f"import cycle: {' -> '.join(cycle or [])}"


def test_the_engine_subpackages_import_their_modules_when_asked() -> None:
    """A module of a subpackage imports the subpackage's ``__init__`` first:
    that ``__init__`` names its modules under TYPE_CHECKING only (each
    imported when first asked for, ``lazy_exports``), so importing one module
    of ``sinks/`` runs none of the others and the graph above holds at run
    time too."""
    for name in ("sinks", "recall", "faces.http", "faces.console"):
        path = engine_modules()[name]
        for node in ast.parse(path.read_text("utf-8")).body:
            eager = isinstance(node, ast.ImportFrom) and node.level >= 1
            assert not eager, f"{path.relative_to(ROOT)} imports its modules at once"


def sibling_imports(package: str) -> dict[str, set[str]]:
    """Each module of ``package`` -> the modules of it that it imports,
    for types only as well (a cycle behind TYPE_CHECKING is still one)."""
    modules = {p.stem: p for p in (ROOT / package).glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps.update([node.module] if node.module else [a.name for a in node.names])
            elif isinstance(node, ast.ImportFrom) and node.module == f"memwarden.{package}":
                deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(f"memwarden.{package}."):
                deps.add((node.module or "").rsplit(".", 1)[1])
        graph[name] = deps & set(modules)
    return graph


def a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (a depth-first walk), or None."""
    done: set[str] = set()

    def walk(node: str, path: list[str]) -> list[str] | None:
        for dep in sorted(graph[node]):
            if dep in path:
                return [*path[path.index(dep) :], dep]
            if dep not in done:
                found = walk(dep, [*path, dep])
                if found:
                    return found
        done.add(node)
        return None

    for start in sorted(graph):
        if start not in done and (found := walk(start, [start])):
            return found
    return None


def test_the_detector_finds_a_cycle() -> None:
    assert a_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert a_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_events_and_projections_modules_import_each_other_without_a_cycle() -> None:
    for package in ("events", "projections"):
        cycle = a_cycle(sibling_imports(package))
        assert cycle is None, f"import cycle in {package}/: {' -> '.join(cycle or [])}"


def test_projections_use_only_the_public_events_api() -> None:
    for path in sorted((ROOT / "projections").glob("*.py")):
        used = imports(ast.parse(path.read_text("utf-8")))
        private = sorted(m for m in used if m.startswith("memwarden.events._"))
        assert not private, f"projections/{path.name} reaches into {private}: export it from memwarden.events"


BACKEND_MODULES = re.compile(r"^_(sqlite|postgres)_")


def test_the_store_port_names_no_backend() -> None:
    """The backends import the port; the port importing one back would be
    a circle (opening the backend a URL names is ``_open``'s)."""
    used = sibling_imports("projections")["_port"]
    backends = sorted(m for m in used if BACKEND_MODULES.match(m) or m in ("_sql_view", "_open"))
    assert not backends, f"projections/_port.py imports the backends {backends}"
    tree = ast.parse((ROOT / "projections" / "_port.py").read_text("utf-8"))
    assert not imports(tree) & DRIVERS


def test_events_and_the_store_import_without_the_postgresql_driver() -> None:
    """psycopg is an extra: only ``memwarden.events.postgres`` and the
    PostgreSQL store need it, imported when a URL names PostgreSQL."""
    blocked = "import sys; sys.modules['psycopg'] = sys.modules['psycopg_pool'] = None; "
    code = blocked + "import memwarden.events, memwarden.projections, memwarden.engine"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
