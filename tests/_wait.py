"""Waiting in tests on the condition itself, never on a length of time.

A test that sleeps and then looks decides its verdict by the machine's
speed: too short on a loaded CI runner, and it fails; long enough for the
worst day, and every run pays it. ``wait_for`` looks again and again until
the condition holds; its timeout only bounds the wait of a test that is
failing anyway, so it can be generous."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout: float = 30.0, *, every: float = 0.01, what: str = "") -> T:
    """The first true value of ``condition()``, asked every ``every`` s;
    an ``AssertionError`` naming ``what`` after ``timeout`` s without one."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout:g} s: {what or condition}")
        time.sleep(every)
