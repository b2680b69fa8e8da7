"""``python -m memwarden.engine.faces.cli``: the ``memwarden`` command."""

from __future__ import annotations

from ._commands import main

main()
