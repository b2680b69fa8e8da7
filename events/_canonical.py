"""The canonical JSON encoding: the only encoder memwarden hashes or stores.

Sorted keys, no spaces, UTF-8 text (never ``\\u`` escapes for non-ASCII),
timestamps as fixed-width UTC ``Z`` strings. Korean or any other Unicode
text round-trips byte for byte.

The standard library's ``json`` settings below define the encoding, and
``json`` encodes whatever may hold a float. orjson writes the same bytes for
data without floats (it spells small and non-finite floats otherwise), and
writes the event payloads the log appends, whose models hold none
(``Event.FLOATS``): kept for the batched append's targets (>= 3x
eventsourcing, >= 1/3 of raw ``executemany``). ``tests/test_canonical.py`` holds the two equal over arbitrary
float-free data, timestamps and models.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from enum import Enum
from typing import Any
from uuid import UUID

import orjson

from ._time import format_ts

GENESIS_HASH = "0" * 64


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_ts(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, tuple):
        return list(value)
    # orjson spells these by itself, so json must spell them the same way
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, UUID):
        return str(value)
    # asked last, so that encoding what holds no model never loads pydantic
    # (a read of the views, as ``memwarden get`` makes, holds none)
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return value.model_dump(mode="python")
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


_ENCODER = json.JSONEncoder(
    sort_keys=True,
    separators=(",", ":"),
    ensure_ascii=False,
    allow_nan=False,
    default=_default,
)


# datetimes and dataclasses go to _default, as they do under json
_ORJSON_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def canonical_json(value: Any, *, floats: bool = True) -> str:
    """Encode ``value`` canonically (a ``str``; its bytes are its UTF-8).

    ``floats=False`` says ``value`` holds no float (an event payload whose
    model has no float field: ``Event.FLOATS``), which orjson then encodes.
    """
    if not floats:
        try:
            return orjson.dumps(value, default=_default, option=_ORJSON_OPTIONS).decode("utf-8")
        except TypeError:  # what orjson refuses (non-str keys, huge ints, lone surrogates), json decides
            pass
    return _ENCODER.encode(value)


def sha256_hex(data: str | bytes) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def content_checksum(text: str | bytes) -> str:
    """``sha256:<hex>`` of ``text``'s UTF-8 bytes (or of the bytes given):
    the one spelling of a checksum."""
    return "sha256:" + sha256_hex(text)


def preimage_bytes(
    seq: int,
    event_id: str,
    type_: str,
    stream: str,
    stream_version: int,
    occurred_at: str,
    recorded_at: str,
    actor: str,
    schema_version: int,
    payload_json: str,
    prev_hash: str,
    /,
) -> bytes:
    """What a chain hash covers, the one spelling of it: the UTF-8 bytes of
    ``canonical_json`` of the envelope without its hash, the payload standing
    in it as the canonical text the log stores. Positional, in
    ``ROW_COLUMNS`` order: the append and the audit (``row_hash``) pass a
    row up to its hash.

    The payload's text is spliced in as it is (never parsed again); the
    other fields are strings and integers, which orjson spells as the
    canonical encoding does (``tests/test_canonical.py`` holds the two equal
    over every code point and the stored payloads). What no append writes,
    a lone surrogate or an integer past 64 bits, is refused with a
    ``ValueError`` naming it, never hashed some other way."""
    try:
        return orjson.dumps(
            {
                "actor": actor,
                "event_id": event_id,
                "occurred_at": occurred_at,
                "payload": orjson.Fragment(payload_json),
                "prev_hash": prev_hash,
                "recorded_at": recorded_at,
                "schema_version": int(schema_version),
                "seq": int(seq),
                "stream": stream,
                "stream_version": int(stream_version),
                "type": type_,
            }
        )
    except orjson.JSONEncodeError as exc:
        raise ValueError(f"event at seq {seq!r}: cannot be hashed ({exc})") from None


def chain_hash(prev_hash: str, preimage: bytes) -> str:
    """``sha256(prev_hash + preimage_bytes(...))``, the hash a row carries."""
    return hashlib.sha256(prev_hash.encode("utf-8") + preimage).hexdigest()
