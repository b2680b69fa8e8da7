"""One set of limits on what a caller may hand memwarden, enforced the same
on every face (CLI, HTTP, MCP, the Python API): the faces only translate the
refusal (exit 2, HTTP 413/422, an MCP error)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ._errors import InvalidInput


class TooLarge(InvalidInput):
    """Input over a size limit (HTTP 413)."""


@dataclass(frozen=True)
class Limits:
    """Operators set these in the policy file's ``[limits]`` table."""

    # bytes of a memory's content (UTF-8)
    max_content_bytes: int = 1024 * 1024
    # bytes of a summary
    max_summary_bytes: int = 64 * 1024
    # how deep a memory may be derived from memories derived from others
    max_derivation_depth: int = 1000
    # how many memories one memory may be derived from
    max_parents: int = 1000
    # nesting of a Memory API content value (JSON arrays and objects)
    max_json_depth: int = 64

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> Limits:
        known = {f.name for f in fields(cls)}
        for key, value in settings.items():
            if key not in known:
                raise InvalidInput(f"limits.{key}", f"unknown limit (known: {', '.join(sorted(known))})")
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 2**31:
                raise InvalidInput(f"limits.{key}", f"must be a whole number from 1 to {2**31}")
        return cls(**settings)

    def check_text(self, field: str, text: str, limit_name: str) -> None:
        limit = getattr(self, limit_name)
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise TooLarge(field, f"is {size} bytes; the limit is {limit} (limits.{limit_name})")
