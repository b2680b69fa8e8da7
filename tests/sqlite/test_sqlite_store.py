"""The SQLite store keeps the whole port: every method and attribute it names."""

from __future__ import annotations

import inspect

import pytest
from memwarden.projections import (
    LogWrite,
    SQLiteStore,
    SQLiteView,
    Store,
    ViewWriter,
    Write,
)


def port_methods(protocol: type) -> set[str]:
    names = set()
    for klass in protocol.__mro__:
        if klass.__name__ in ("Protocol", "Generic", "object"):
            continue
        names.update(n for n, v in vars(klass).items() if not n.startswith("_") and callable(v))
        names.update(n for n in getattr(klass, "__annotations__", {}) if not n.startswith("_"))
    return names


@pytest.mark.parametrize(
    ("port", "backend"), [(Store, SQLiteStore), (ViewWriter, SQLiteView), (Write, LogWrite)], ids=str
)
def test_the_sqlite_store_offers_everything_the_port_names(port: type, backend: type) -> None:
    offered = {n for n in port_methods(port) if hasattr(backend, n)} | _instance_attributes(backend)
    missing = sorted(port_methods(port) - offered)
    assert not missing, f"{backend.__name__} lacks {missing}"


def _instance_attributes(klass: type) -> set[str]:
    source = inspect.getsource(klass.__init__)  # type: ignore[misc]
    return {line.split("self.", 1)[1].split(" ")[0].split(":")[0] for line in source.splitlines() if "self." in line}
