"""Turning pydantic validation errors into errors that name the field."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from memwarden.events import check_range, parse_ts, to_utc
from pydantic import BaseModel, ValidationError

from ._errors import InvalidInput

M = TypeVar("M", bound=BaseModel)


def field_error(exc: ValidationError, prefix: str = "") -> InvalidInput:
    first = exc.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in first["loc"] if p not in ("function-after[_not_empty(), Selector]",))
    field = ".".join(p for p in (prefix, loc) if p) or "input"
    message = first["msg"].removeprefix("Value error, ")
    extra = len(exc.errors()) - 1
    if extra:
        message += f" (and {extra} more problem{'s' if extra > 1 else ''})"
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
