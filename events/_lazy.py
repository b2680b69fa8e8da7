"""A package's names, each imported when first asked for (PEP 562).

A package's ``__init__`` lists what it exports as ordinary imports under
``if TYPE_CHECKING:``, which type checkers, editors and the documentation
read as they are; ``lazy_exports`` reads those same statements once, the
first time a name is asked for, and imports only the module that defines
it. So ``import memwarden.engine`` costs nothing until ``Warden`` is
wanted, and the command line answers ``--version`` without loading a
database driver, numpy or a web framework.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path


def lazy_exports(package: str, init_file: str) -> Callable[[str], object]:
    """The module ``__getattr__`` of ``package``, whose ``__init__`` is
    ``init_file``: a name imported under its ``if TYPE_CHECKING:`` is
    imported from its module on first use, then kept in the package."""
    where: dict[str, tuple[str, str | None]] = {}

    def __getattr__(name: str) -> object:
        if not where:
            where.update(_type_checking_imports(Path(init_file)))
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, attribute = where[name]
        module = importlib.import_module(module_name, package)
        value = module if attribute is None else getattr(module, attribute)
        setattr(sys.modules[package], name, value)  # asked for once: the next lookup is a plain one
        return value

    return __getattr__


def _type_checking_imports(init_file: Path) -> dict[str, tuple[str, str | None]]:
    """Each name bound by a ``from ... import`` under ``if TYPE_CHECKING:``:
    the module to import (relative names stay relative) and the attribute to
    take from it (None when the name is a submodule, ``from . import _x``)."""
    where: dict[str, tuple[str, str | None]] = {}
    for node in ast.parse(init_file.read_text(encoding="utf-8")).body:
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            continue
        for statement in node.body:
            if not isinstance(statement, ast.ImportFrom):
                continue
            base = "." * statement.level + (statement.module or "")
            for alias in statement.names:
                bound = alias.asname or alias.name
                if statement.module is None:  # from . import _metrics as metrics: the submodule itself
                    where[bound] = (base + alias.name, None)
                else:
                    where[bound] = (base, alias.name)
    return where
