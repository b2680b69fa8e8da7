"""The web console at ``/console`` and the API docs at ``/docs``, installed
on the HTTP app (``install_console``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memwarden.events import lazy_exports

if TYPE_CHECKING:
    from ._app import build_console, install_console

__getattr__ = lazy_exports(__name__, __file__)

__all__ = ["build_console", "install_console"]
