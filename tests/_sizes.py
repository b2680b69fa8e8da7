"""How large the larger settings run.

The default run is sized so CI finishes in ten minutes on two cores;
``--runslow`` runs every setting at its full size. The switch is an
environment variable set by ``conftest.pytest_configure`` so that module-level
sizes (hypothesis settings, parameter lists) read it at import time, in
every xdist worker alike."""

from __future__ import annotations

import os
from typing import TypeVar

T = TypeVar("T")

FLAG = "MEMWARDEN_RUNSLOW"


def full_size() -> bool:
    return os.environ.get(FLAG) == "1"


def larger(default: T, full: T) -> T:
    """``full`` under ``--runslow``, ``default`` otherwise."""
    return full if full_size() else default
