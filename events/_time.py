"""The one clock and the one timestamp format.

Timestamps are stored and hashed as fixed-width UTC strings
(``YYYY-MM-DDTHH:MM:SS.ffffffZ``) so that string order is time order: the
log, the projections and SQL comparisons all rely on that.
"""

from __future__ import annotations

import functools
import re
import threading
from datetime import UTC, date, datetime, timedelta
from typing import Protocol

UTC = UTC

_DURATION = re.compile(r"^\s*(\d{1,12})\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# the longest duration and the range of timestamps a caller may give: wide
# enough for any real memory, narrow enough that no arithmetic overflows
MAX_DURATION = timedelta(days=36500)
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
# how far ahead of the recording clock a time a caller gives may be: past
# it a time is refused, within it a fetch time is clamped to the recording
# moment (a fetch cannot have happened after it was recorded)
CLOCK_SKEW = timedelta(minutes=5)


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    """Wall-clock time, always aware UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class FrozenClock:
    """A clock that moves only when told to: for tests and simulations."""

    def __init__(self, start: datetime | str = "2026-01-05T09:00:00Z") -> None:
        self._now = to_utc(parse_ts(start) if isinstance(start, str) else start)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def set(self, when: datetime | str) -> None:
        with self._lock:
            self._now = to_utc(parse_ts(when) if isinstance(when, str) else when)

    def advance(self, delta: timedelta | str) -> datetime:
        with self._lock:
            self._now += parse_duration(delta) if isinstance(delta, str) else delta
            return self._now


def to_utc(value: datetime) -> datetime:
    """An aware datetime converted to UTC; naive datetimes are refused."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value.isoformat()} refused: give a timezone (Z or an offset)")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"timestamp {value.isoformat()} is out of range") from None


def format_ts(value: datetime) -> str:
    """The canonical text of a timestamp (fixed width, UTC, ``Z``)."""
    if value.tzinfo is not UTC:
        value = to_utc(value)
    # field by field with %, the cheapest spelling: every event's timestamps pass through here
    return "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ" % (  # noqa: UP031
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond,
    )


def parse_ts(text: str) -> datetime:
    """Parse ISO 8601 with a timezone; naive timestamps are refused."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("timestamp must be a non-empty ISO 8601 string")
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 timestamp") from None
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no timezone: add Z or an offset such as +09:00")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"timestamp {text!r} is out of range") from None


def check_range(value: datetime) -> datetime:
    """A caller's timestamp, refused outside 1970-01-01 .. 9000-01-01."""
    if not EARLIEST <= value <= LATEST:
        raise ValueError(f"{format_ts(value)} is out of range: give a time from 1970-01-01 to 9000-01-01")
    return value


def canonical_ts(text: str) -> str:
    """Normalise any accepted timestamp text to the canonical form."""
    return format_ts(parse_ts(text))


def parse_duration(text: str) -> timedelta:
    """``90s``, ``15m``, ``6h``, ``30d``, ``2w``."""
    if not isinstance(text, str):
        raise ValueError(f"duration {text!r} must look like 90s, 15m, 6h, 30d or 2w")
    return _duration(text)


@functools.lru_cache(maxsize=256)  # every save names its ttl: a handful of distinct texts
def _duration(text: str) -> timedelta:
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"duration {text!r} must look like 90s, 15m, 6h, 30d or 2w")
    amount = int(match.group(1))
    if amount <= 0:
        raise ValueError(f"duration {text!r} must be positive")
    if amount * _UNITS[match.group(2)] > MAX_DURATION.total_seconds():
        raise ValueError(f"duration {text!r} is longer than 36500d (100 years)")
    return timedelta(seconds=amount * _UNITS[match.group(2)])


def iso_week(ts: str) -> str:
    """The ISO week (``2026-W02``) of a canonical timestamp."""
    return _week_of_day(ts[:10])


@functools.lru_cache(maxsize=64)  # every event is counted in its week: a few days at a time
def _week_of_day(day: str) -> str:
    year, week, _ = date.fromisoformat(day).isocalendar()
    return f"{year}-W{week:02d}"
