"""The canonical JSON encoding: the only encoder memwarden hashes or stores.

Sorted keys, no spaces, UTF-8 text (never ``\\u`` escapes for non-ASCII),
timestamps as fixed-width UTC ``Z`` strings. Korean or any other Unicode
text round-trips byte for byte.

The standard library's ``json`` settings below define the encoding. orjson
writes the same bytes several times faster, except for floats under 1e-4
(``0.00001`` where ``json`` writes ``1e-05``) and non-finite floats (``null``
where ``json`` refuses): its output is kept only when it holds neither
spelling, else ``json`` encodes. ``tests/test_canonical.py`` holds the two
equal over arbitrary JSON data, timestamps and models.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from enum import Enum
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any
from uuid import UUID

import orjson
from pydantic import BaseModel

from ._time import format_ts

GENESIS_HASH = "0" * 64


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_ts(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="python")
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, tuple):
        return list(value)
    # orjson spells these by itself, so json must spell them the same way
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


_ENCODER = json.JSONEncoder(
    sort_keys=True,
    separators=(",", ":"),
    ensure_ascii=False,
    allow_nan=False,
    default=_default,
)
# The same settings, as the C encoder json.JSONEncoder.encode would build on
# every call; made once, it spares each payload's encoding (the log's hot
# path) that work. Without markers there is no cycle check: what is
# encoded here comes from pydantic models and the log, never cyclic.
_C_ENCODER = (
    c_make_encoder(None, _default, encode_basestring, None, ":", ",", True, False, False)
    if c_make_encoder is not None
    else None
)


# datetimes and dataclasses go to _default, as they do under json
_ORJSON_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
_DIGITS = frozenset(b"0123456789")


def _may_differ(data: bytes) -> bool:
    """Whether orjson's bytes may hold a spelling json would write otherwise:
    a NaN or infinity (``null``), a float under 1e-4 as ``0.0000...`` (not
    preceded by a digit: a timestamp's ``30.000000`` is not a float) or with
    a one-digit negative exponent (``1.5e-7``; json writes ``1.5e-07``).
    Text that merely looks like these only takes the slow path. Finds, not a
    regular expression: ``re`` took 12 us over a 500-byte payload."""
    if b"null" in data:
        return True
    digits = _DIGITS
    at = data.find(b"0.0000")
    while at >= 0:
        if at == 0 or data[at - 1] not in digits:
            return True
        at = data.find(b"0.0000", at + 1)
    at = data.find(b"e-")
    while at >= 0:
        if 0 < at < len(data) - 2 and data[at - 1] in digits and data[at + 2] in digits:
            if at + 3 == len(data) or data[at + 3] not in digits:
                return True
        at = data.find(b"e-", at + 1)
    return False


def canonical_json(value: Any, *, floats: bool = True) -> str:
    """Encode ``value`` canonically (a ``str``; its bytes are its UTF-8).

    ``floats=False`` says ``value`` holds no float (an event payload whose
    model has no float field: ``Event.FLOATS``), which spares the search
    for orjson's float spellings, a third of the cost on the append path.
    """
    try:
        data = orjson.dumps(value, default=_default, option=_ORJSON_OPTIONS)
    except TypeError:  # what orjson refuses (non-str keys, huge ints, lone surrogates), json decides
        pass
    else:
        if not (floats and _may_differ(data)):
            return data.decode("utf-8")
    if _C_ENCODER is None:
        return _ENCODER.encode(value)
    return "".join(_C_ENCODER(value, 0))


def sha256_hex(data: str | bytes) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def content_checksum(text: str | bytes) -> str:
    """``sha256:<hex>`` of ``text``'s UTF-8 bytes (or of the bytes given):
    the one spelling of a checksum."""
    return "sha256:" + sha256_hex(text)


def envelope_preimage(
    *,
    seq: int,
    event_id: str,
    type: str,
    stream: str,
    stream_version: int,
    occurred_at: str,
    recorded_at: str,
    actor: str,
    schema_version: int,
    payload_json: str,
    prev_hash: str,
) -> str:
    """What a chain hash covers, by definition: ``canonical_json`` of the
    envelope without its hash. The payload is given as the canonical text
    the log stores, and stands in the envelope as the value it encodes.

    The one definition. Its one faster spelling is ``preimage_bytes``, which
    both the append and the audit (``_recorded.check_rows``) hash;
    ``tests/test_canonical.py`` holds it equal to this.
    """
    return canonical_json(
        {
            "actor": actor,
            "event_id": event_id,
            "occurred_at": occurred_at,
            "payload": json.loads(payload_json),
            "prev_hash": prev_hash,
            "recorded_at": recorded_at,
            "schema_version": schema_version,
            "seq": seq,
            "stream": stream,
            "stream_version": stream_version,
            "type": type,
        }
    )


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
    """``envelope_preimage`` as the UTF-8 bytes the hash takes, positional
    (in ``ROW_COLUMNS`` order), for the append path: the payload's text is
    spliced in as it is (never parsed again), and orjson writes the rest."""
    # Keys in sorted order already; orjson escapes strings exactly as json's
    # encode_basestring does (every code point but lone surrogates, checked
    # in tests/test_canonical.py), for less than formatting by hand costs
    # (BENCHMARKS.md, "Choices in the code").
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
    except TypeError:  # lone surrogates, a seq past 64 bits: the definition decides (and refuses surrogates)
        return envelope_preimage(
            seq=int(seq),
            event_id=event_id,
            type=type_,
            stream=stream,
            stream_version=int(stream_version),
            occurred_at=occurred_at,
            recorded_at=recorded_at,
            actor=actor,
            schema_version=int(schema_version),
            payload_json=payload_json,
            prev_hash=prev_hash,
        ).encode("utf-8")


def chain_hash(prev_hash: str, preimage: str | bytes) -> str:
    """``sha256(prev_hash + canonical_json(envelope without hash))``."""
    if isinstance(preimage, str):
        preimage = preimage.encode("utf-8")
    return hashlib.sha256(prev_hash.encode("utf-8") + preimage).hexdigest()
