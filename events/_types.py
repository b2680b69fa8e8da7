"""The field types events are made of: aware UTC timestamps, identifiers,
checksums, counts, and policy versions (with the one rule for comparing
them)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, PlainSerializer, StringConstraints

from ._time import format_ts, parse_ts, to_utc
from ._version_keys import MAX_VERSION, version_number


def _parse_datetime(value: Any) -> Any:
    if isinstance(value, str):
        return parse_ts(value)
    return value


UTCDateTime = Annotated[
    datetime,
    BeforeValidator(_parse_datetime),
    AfterValidator(to_utc),
    PlainSerializer(format_ts, return_type=str, when_used="json"),
]
NonEmptyStr = Annotated[str, StringConstraints(min_length=1, max_length=4096)]
Identifier = Annotated[str, StringConstraints(min_length=1, max_length=512, pattern=r"^[^\s\x00-\x1f]+$")]
Checksum = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
# A policy version is a key compared for equality with the policy's current
# version: "policy-42-v7", or a number (7 and "7" are the same key).
# Numbers stay below 2**53 so that every JSON reader reads them exactly.
VersionText = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}$")]


def _numeric_version(value: Any) -> Any:
    if not (isinstance(value, str) and value.isascii() and value.isdigit()):
        return value
    number = version_number(value)
    if number is None:
        raise ValueError(f"a version of digits is a number, at most {MAX_VERSION}")
    return number


# strict: a number is a number or a string of digits only (the validator
# above), never a string pydantic would read as one ("2_0", " 3")
PolicyVersion = Annotated[
    Annotated[
        Annotated[int, Field(ge=1, le=MAX_VERSION, strict=True)] | VersionText, Field(union_mode="left_to_right")
    ],
    BeforeValidator(_numeric_version),
]
