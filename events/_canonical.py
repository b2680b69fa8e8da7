"""The canonical JSON encoding: the only encoder memwarden hashes or stores.

Sorted keys, no spaces, UTF-8 text (never ``\\u`` escapes for non-ASCII),
timestamps as fixed-width UTC ``Z`` strings. Korean or any other Unicode
text round-trips byte for byte.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

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
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


_ENCODER = json.JSONEncoder(
    sort_keys=True,
    separators=(",", ":"),
    ensure_ascii=False,
    allow_nan=False,
    default=_default,
)
# The same settings, as the C encoder json.JSONEncoder.encode would build on
# every call; made once, it saves a fifth of the cost of encoding a payload
# (the log's hot path). Without markers there is no cycle check: what is
# encoded here comes from pydantic models and the log, never cyclic.
_C_ENCODER = (
    c_make_encoder(None, _default, encode_basestring, None, ":", ",", True, False, False)
    if c_make_encoder is not None
    else None
)


def canonical_json(value: Any) -> str:
    """Encode ``value`` canonically (a ``str``; its bytes are its UTF-8)."""
    if _C_ENCODER is None:
        return _ENCODER.encode(value)
    return "".join(_C_ENCODER(value, 0))


def sha256_hex(data: str | bytes) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def content_checksum(text: str) -> str:
    """``sha256:<hex>`` of the UTF-8 bytes of ``text``."""
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
    """``canonical_json`` of the envelope without its hash, built directly.

    It splices the already-canonical payload text in place instead of
    decoding and re-encoding it: ``verify_chain`` runs this for every event.
    ``tests/test_canonical.py`` proves it equal to ``canonical_json`` of the
    same envelope, so there is still one encoding.
    """
    e = encode_basestring
    return (
        f'{{"actor":{e(actor)},"event_id":{e(event_id)},"occurred_at":{e(occurred_at)},'
        f'"payload":{payload_json},"prev_hash":{e(prev_hash)},"recorded_at":{e(recorded_at)},'
        f'"schema_version":{int(schema_version)},"seq":{int(seq)},"stream":{e(stream)},'
        f'"stream_version":{int(stream_version)},"type":{e(type)}}}'
    )


def chain_hash(prev_hash: str, preimage: str) -> str:
    """``sha256(prev_hash + canonical_json(envelope without hash))``."""
    return hashlib.sha256((prev_hash + preimage).encode("utf-8")).hexdigest()
