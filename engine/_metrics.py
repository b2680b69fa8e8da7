"""Prometheus metrics: the families an operator alerts on, kept in one
registry of this process (``/metrics`` serves it), defined in
``_metric_families``. Counters move where the thing they count is decided:
a save, an append, the gate, a revocation, a read-back, a scheduler run, a
fetch.

The families are made, and prometheus_client imported, when something is
first counted, not when memwarden is imported: its import is a third of a
short command's start, and a command line that only reads counts nothing.
So a counting module names ``_metrics.SAVES`` where it counts, never
``from ._metrics import SAVES`` at its top.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    from . import _metric_families

    value = getattr(_metric_families, name)
    globals()[name] = value  # asked once: later lookups find it here
    return value
