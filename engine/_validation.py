"""Turning pydantic validation errors into errors that name the field, as
the user spells it: every face (HTTP's 422 bodies, MCP's tool errors, the
command line) names fields through ``field_problems``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from memwarden.events import check_range, parse_ts, to_utc
from pydantic import BaseModel, ValidationError

from ._errors import InvalidInput

M = TypeVar("M", bound=BaseModel)

# The names pydantic gives a union's branches (and the validators wrapping
# a type) in an error's location: ``("version", "int")`` for ``int | str``,
# ``"constrained-str"``, ``"list[str]"``, ``"function-after[_not_empty(),
# Selector]"``. None is a field the user wrote, so none is shown.
_SCALAR_BRANCHES = frozenset(
    {"int", "str", "float", "bool", "bytes", "none", "decimal", "date", "datetime", "time", "timedelta", "uuid"}
)
_WRAPPED_BRANCH = re.compile(r"(?:constrained|lax-or-strict|json-or-python)-?[\w-]*|[a-z][a-z-]*\[.*\]", re.DOTALL)
# where FastAPI says a request's value came from, before the field itself
_REQUEST_PARTS = ("body", "query", "path", "header", "cookie")


def _branch(part: object) -> bool:
    return isinstance(part, str) and (part in _SCALAR_BRANCHES or _WRAPPED_BRANCH.fullmatch(part) is not None)


def field_name(loc: Sequence[Any], prefix: str = "", *, request: bool = False) -> str:
    """The field an error's location points at, as the user names it:
    ``version``, not pydantic's ``version.int``; ``memories.0.ttl``. With
    ``request``, the location is FastAPI's, led by where the value came
    from (``body``, ``query``), which is left out."""
    parts = [str(p) for p in loc if not _branch(p)]
    if request and len(parts) > 1 and parts[0] in _REQUEST_PARTS:
        parts = parts[1:]
    return ".".join(p for p in (prefix, *parts) if p)


def _words(error: Mapping[str, Any]) -> str:
    # pydantic's words, without its links or its "Value error, " label
    return str(error.get("msg", "invalid")).removeprefix("Value error, ")


def field_problems(
    errors: Iterable[Mapping[str, Any]], prefix: str = "", *, request: bool = False, whole: str = "input"
) -> list[tuple[str, str]]:
    """(field, problem) of each field pydantic's ``errors`` find at fault,
    first found first (``whole`` names the value itself, when the error is
    about all of it). A union's branches fail together (``version`` is
    neither a valid integer nor a valid string): one field, one problem,
    their words joined."""
    found: dict[str, list[str]] = {}
    for error in errors:
        words = found.setdefault(field_name(error.get("loc", ()), prefix, request=request) or whole, [])
        said = _words(error)
        if said not in words:
            words.append(said)
    out = []
    for field, words in found.items():
        if len(words) > 1:  # each branch's kind, without its detail: "a valid integer or a valid string"
            words = [words[0].split(", ")[0], *(w.split(", ")[0].removeprefix("Input should be ") for w in words[1:])]
        out.append((field, " or ".join(words)))
    return out


def field_error(exc: ValidationError, prefix: str = "") -> InvalidInput:
    (field, message), *others = field_problems(exc.errors(include_url=False), prefix)
    if others:
        message += f" (and {len(others)} more problem{'s' if len(others) > 1 else ''})"
    return InvalidInput(field, message)


def build(cls: type[M], prefix: str = "", **data: Any) -> M:
    """``cls(**data)`` or ``InvalidInput`` naming the first bad field."""
    try:
        return cls(**data)
    except ValidationError as exc:
        raise field_error(exc, prefix) from None


def when(field: str, value: datetime | str | None) -> datetime | None:
    """A caller's timestamp (ISO text or an aware datetime), or an error naming ``field``."""
    if value is None:
        return None
    try:
        if isinstance(value, str):
            return check_range(parse_ts(value))
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValueError("naive datetime refused: give a timezone")
            return check_range(to_utc(value))
    except ValueError as exc:
        raise InvalidInput(field, str(exc)) from None
    raise InvalidInput(field, f"must be a timestamp, not {type(value).__name__}")
