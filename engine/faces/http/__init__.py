"""The HTTP API (``create_app``): imported when first asked for, so the
command line can read the server's settings without loading FastAPI."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memwarden.events import lazy_exports

if TYPE_CHECKING:
    from ._app import create_app

__getattr__ = lazy_exports(__name__, __file__)

__all__ = ["create_app"]
