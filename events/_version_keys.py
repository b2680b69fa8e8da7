"""Policy versions as keys: the one reading of "is this version a number",
and the text a version is compared and stored as. Plain functions, apart
from the event models' field types (``_types``), so that a read of the
views loads no pydantic."""

from __future__ import annotations

MAX_VERSION = 2**53


def version_number(text: str) -> int | None:
    """The number a policy version's text spells, or None: the one reading
    of "is this version a number". ASCII digits only (never "٣", " 3" or
    "2_0"); "007" spells 7; past ``MAX_VERSION`` it spells none."""
    if not (text.isascii() and text.isdigit()) or len(text.lstrip("0")) > len(str(MAX_VERSION)):
        return None
    number = int(text)
    return number if number <= MAX_VERSION else None


def version_key(version: int | str) -> str:
    """The text a policy version is compared and stored as."""
    return str(version)


def version_value(key: str | int) -> int | str:
    """A stored version as callers gave it: numbers come back as numbers."""
    text = str(key)
    number = version_number(text)
    # a number only where the key is its own spelling: keys round-trip exactly
    return number if number is not None and str(number) == text else text
