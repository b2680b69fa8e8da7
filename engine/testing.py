"""Helpers for users testing code that uses memwarden."""

from __future__ import annotations

from datetime import datetime

from memwarden.events import FrozenClock

from ._fetchers import Fetchers
from ._policy import TtlPolicy
from ._warden import Warden


def in_memory_warden(
    start: datetime | str = "2026-01-05T09:00:00Z",
    *,
    policy: TtlPolicy | None = None,
    fetchers: Fetchers | None = None,
) -> Warden:
    """A Warden on an in-memory database with a frozen clock (``warden.clock``:
    move it with ``advance('2h')`` or ``set(...)``)."""
    return Warden(":memory:", clock=FrozenClock(start), policy=policy, fetchers=fetchers, synchronous="OFF")


__all__ = ["FrozenClock", "in_memory_warden"]
