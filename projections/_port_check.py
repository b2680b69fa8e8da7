"""Both backends' readers satisfy the read port, checked by mypy: these
functions fail to type-check if either backend's view drifts from
``ViewReader``, ``ViewWriter``, ``VectorReader`` or ``SideReader``. Never called."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._port import SideReader, VectorReader, ViewReader, ViewWriter
    from ._postgres_view import PostgresView
    from ._sqlite_view import SQLiteView


def _sqlite_reader(view: SQLiteView) -> ViewReader:
    return view


def _sqlite_writer(view: SQLiteView) -> ViewWriter:
    return view


def _sqlite_vectors(view: SQLiteView) -> VectorReader:
    return view


def _sqlite_side(view: SQLiteView) -> SideReader:
    return view


def _postgres_reader(view: PostgresView) -> ViewReader:
    return view


def _postgres_writer(view: PostgresView) -> ViewWriter:
    return view


def _postgres_vectors(view: PostgresView) -> VectorReader:
    return view


def _postgres_side(view: PostgresView) -> SideReader:
    return view
