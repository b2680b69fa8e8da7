"""The ``memwarden`` command line: ``main`` is the console script, ``cli``
the click group (the contract is ../shared/CLI.md)."""

from __future__ import annotations

from ._commands import main
from ._common import cli

__all__ = ["cli", "main"]
