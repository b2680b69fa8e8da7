"""One set of limits on what a caller may hand memwarden, enforced the same
on every face (CLI, HTTP, MCP, the Python API): the faces only translate the
refusal (exit 2, HTTP 413/422, an MCP error)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any, TypeVar
from urllib.parse import urlsplit

from memwarden.events import check_storable, has_user_info, spelled

from ._errors import InvalidInput, TooLarge

# the most memories (events, notices, ids) one page of any answer holds
MAX_PAGE = 10_000
# the most memories one batch save carries, on every face (save_many, the
# HTTP and MCP batches, a chunk of a LangGraph batch or of an import): a
# batch is one write transaction, and every other writer, a revocation too,
# waits for it: the bound keeps that wait short
MAX_BATCH = 1_000
# the most content (UTF-8 bytes) one answer of a read holds: a page of
# 10,000 memories of a mebibyte each would be ten gigabytes built in memory;
# past this an answer stops and says so, and the caller pages on
MAX_ANSWER_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Operators set these in the policy file's ``[limits]`` table."""

    # bytes of a memory's content (UTF-8)
    max_content_bytes: int = 1024 * 1024
    # how deep a memory may be derived from memories derived from others
    max_derivation_depth: int = 1000
    # how many memories one memory may be derived from
    max_parents: int = 1000
    # nesting of a Memory API content value (JSON arrays and objects)
    max_json_depth: int = 64
    # content bytes of one answer of a read (query, search): ``answer_page``
    max_answer_bytes: int = MAX_ANSWER_BYTES

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> Limits:
        known = {f.name for f in fields(cls)}
        for key, value in settings.items():
            if key not in known:
                raise InvalidInput(f"limits.{key}", f"unknown limit (known: {', '.join(sorted(known))})")
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 2**31:
                raise InvalidInput(f"limits.{key}", f"must be a whole number from 1 to {2**31}")
        out = cls(**settings)
        if out.max_answer_bytes < out.max_content_bytes:
            # else a memory of the largest content could be answered by no page
            raise InvalidInput("limits.max_answer_bytes", "must be at least limits.max_content_bytes")
        return out

    @property
    def longest_line(self) -> int:
        """The longest line an export of a store under these limits holds: a
        text line of the largest content and summary, each character escaped
        at its longest (six bytes a byte), and room for the rest of the line."""
        return self.max_content_bytes * 6 + 4096 * 12 + 64 * 1024

    @property
    def longest_body(self) -> int:
        """The largest request body: JSON may escape each byte of content as six."""
        return self.max_content_bytes * 6 + 64 * 1024

    def check_text(self, field: str, text: str, limit_name: str) -> None:
        limit = getattr(self, limit_name)
        if len(text) > limit:  # a UTF-8 character is at least one byte: no need to encode
            raise TooLarge(field, f"is more than {limit} bytes; the limit is {limit} (limits.{limit_name})")
        size = len(encoded(field, text))
        if size > limit:
            raise TooLarge(field, f"is {size} bytes; the limit is {limit} (limits.{limit_name})")


T = TypeVar("T")


class Page(list[T]):
    """One answer of a read: a list, with ``truncated`` when the answer
    stopped at ``Limits.max_answer_bytes`` before its limit (the caller
    pages on from ``next_offset``, the offset of the first memory left out)."""

    truncated: bool = False
    next_offset: int | None = None
    hidden: dict[str, int] | None = None  # a search's: the matches the gate withheld, by reason

    @classmethod
    def of(cls, items: Iterable[T], *, truncated: bool = False, next_offset: int | None = None) -> Page[T]:
        out = cls(items)
        out.truncated, out.next_offset = truncated, next_offset if truncated else None
        return out

    def told(self, *, paged: bool = True) -> dict[str, Any]:
        """The fields every face adds to its JSON answer: ``truncated``,
        where the read takes an offset (``paged``), ``next_offset`` (null
        unless truncated), and a search's ``hidden`` (reason -> count)."""
        told: dict[str, Any] = {"truncated": self.truncated}
        if paged:
            told["next_offset"] = self.next_offset
        if self.hidden is not None:
            told["hidden"] = self.hidden
        return told


class AnswerBudget:
    """The one rule of an answer's size: memories are added while their
    content bytes stay within ``budget``; the first is always added (no
    memory is larger than the budget: ``Limits.from_settings``), so paging
    always moves on."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.spent = 0
        self.count = 0
        self.truncated = False

    def admits(self, content: str | None) -> bool:
        """Whether a memory of ``content`` fits (and, if so, counts it)."""
        # an ASCII text's length is its size (CPython knows it without a scan)
        size = 0 if content is None else len(content) if content.isascii() else len(content.encode("utf-8"))
        if self.count and self.spent + size > self.budget:
            self.truncated = True
            return False
        self.spent += size
        self.count += 1
        return True


def encoded(field: str, text: str) -> bytes:
    """``text`` as UTF-8, or refused by the store's one byte rule
    (``memwarden.events.check_storable``: no NUL, no lone surrogate), asked
    here before the write lock so a save is refused early in its words."""
    check_storable(field, text)
    return text.encode("utf-8")


CHECKSUM = re.compile(r"^sha256:[0-9a-fA-F]{64}$")
SOURCE_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$")
CONTROL = re.compile(r"[\x00-\x1f]")  # one C scan, not a Python loop a character
WHITESPACE_OR_CONTROL = re.compile(r"[\s\x00-\x1f]")


def normal_checksum(field: str, value: object) -> str:
    """A caller's checksum in the canonical form (hex digits are not case-sensitive)."""
    if not isinstance(value, str) or not CHECKSUM.match(value):
        raise InvalidInput(field, "must be sha256: followed by 64 hex digits")
    return value.lower()


def normal_url(field: str, value: str) -> str:
    """An http(s) URL (or the start of one) spelled one way (``spelled``:
    scheme and host in lower case, no default port, the path's escapes,
    dot segments and doubled slashes resolved), with user info refused. A
    revocation's ``source_prefix`` is spelled the same way, and so is every
    row the fold makes, so ``HTTPS://Evil.example:443/%73ecret`` is under
    ``https://evil.example/secret`` as the source it is."""
    if has_user_info(value):
        raise InvalidInput(field, "a URL with user info is refused: name the source without credentials")
    return spelled(value)


def check_source_url(field: str, value: object) -> str:
    """A URL with a scheme (``https://…``, ``file:///…``, ``callable:NAME``)
    or an absolute path; http(s) URLs need a host. The URL as it is kept
    (``normal_url``)."""
    if not isinstance(value, str) or not value or len(value) > 4096:
        raise InvalidInput(field, "must be a URL of at most 4096 characters")
    if value.startswith("/") and not WHITESPACE_OR_CONTROL.search(value):
        return value
    if not SOURCE_URL.match(value) or CONTROL.search(value):
        raise InvalidInput(field, f"{value[:60]!r} is not a URL: give a scheme (https://, file://, callable:)")
    if value.lower().startswith(("http://", "https://")):
        try:
            host = urlsplit(value).hostname
        except ValueError:  # a bad port or bracket
            host = None
        if not host:
            raise InvalidInput(field, f"{value[:60]!r} has no host")
    return normal_url(field, value)


def refuse_local_source(source_url: str, source: str | None = None) -> None:
    """What a remote caller (HTTP, MCP over HTTP) may not name unless the
    operator allows local sources: a file on this machine, or a git source."""
    if source is not None:
        raise InvalidInput("source", "local file and git sources are not accepted from remote callers")
    if isinstance(source_url, str) and (source_url.lower().startswith("file:") or source_url.startswith("/")):
        raise InvalidInput("source_url", "local file sources are not accepted from remote callers")
