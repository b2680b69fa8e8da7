"""The one rule for the bytes a store keeps, the same on every backend.

PostgreSQL's text holds no NUL, and no store holds a lone surrogate (JSON
may carry ``"\\ud800"``, which is no UTF-8): such a text is refused
everywhere, naming the field, rather than kept by SQLite and failing on
PostgreSQL (a 503, a migration stopped naming no memory). Every write
passes here: the texts a store keeps (``TextStore.put``), every event's
payload (``prepare_batch``) and every imported record (``check_imported``);
the engine asks the same function before its write lock, so a save is
refused early in the same words.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ._errors import Refusal

# the surrogate code points no UTF-8 text can hold
_SURROGATE = re.compile("[\ud800-\udfff]")


class UnstorableText(Refusal, ValueError):
    """A text no store can keep; names the field and the character."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def unstorable(text: str) -> str | None:
    """What in ``text`` no store can keep, or None."""
    if "\x00" in text:  # a C scan, as the encoding below
        return "holds a NUL character (U+0000), which no store keeps"
    if text.isascii():  # O(1) in CPython: an ASCII text holds no surrogate
        return None
    try:
        text.encode("utf-8")  # cheaper than a regex search for surrogates
    except UnicodeEncodeError:
        return "is not valid Unicode text (it holds a lone surrogate)"
    return None


def check_storable(field: str, text: str | None) -> None:
    """``text`` as a store may keep it, or ``UnstorableText`` naming ``field``."""
    if text is not None and (problem := unstorable(text)) is not None:
        raise UnstorableText(field, problem)


def unstorable_fields(value: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(field path, problem) of every string in a JSON value (keys too) no
    store can keep: ``scope.project``, ``leaked_ids.0``."""
    if isinstance(value, str):
        if (problem := unstorable(value)) is not None:
            yield prefix or "value", problem
    elif isinstance(value, dict):
        for key, item in value.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(key, str) and (problem := unstorable(key)) is not None:
                yield name, f"names a key that {problem}"
            yield from unstorable_fields(item, name)
    elif isinstance(value, list | tuple):
        for n, item in enumerate(value):
            yield from unstorable_fields(item, f"{prefix}.{n}" if prefix else str(n))


def json_storable(payload_json: str) -> bool:
    """Whether a JSON text surely holds no string a store cannot keep (a
    literal ``\\u0000`` spelled in a text makes it answer False: then the
    payload itself is asked)."""
    return "\\u0000" not in payload_json and (payload_json.isascii() or _SURROGATE.search(payload_json) is None)


def check_payload(payload: dict[str, Any], payload_json: str | None = None) -> None:
    """Every text of an event's payload as a store may keep it. The JSON, if
    given, answers the common case at one scan: a payload with neither
    ``\\u0000`` nor a surrogate in its JSON holds neither."""
    if payload_json is not None and json_storable(payload_json):
        return
    for field, problem in unstorable_fields(payload):
        raise UnstorableText(field, problem)
