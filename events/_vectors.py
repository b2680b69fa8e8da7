"""Embeddings of memory versions, kept beside the texts and outside the chain.

A vector is derived from a version's text and can be inverted back into
much of it, so it is kept as the text is: one row per (tenant, memory_id,
version), never shared, and deleted with the texts by an erasure (the
text store's ``erase_through``), on every path that appends one. The
same mark (``erased_texts``) refuses a vector written for an erased
version afterwards. The event records which embedder made it and its
dimensions; the bytes (float32, little-endian) stay here.

A version may have several vectors of one length (a LangGraph item embeds
each indexed field apart, and is as close to a query as its closest
field): they are one row's ``vector``, back to back, ``dims`` floats each,
so they are written, read and erased together, as one version's text is.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from ._errors import InvalidField

MAX_DIMS = 4096
MAX_EMBEDDINGS = 64  # vectors of one version (its fields, each embedded apart)
_FLOATS = {float}
# vectors are kept as 32-bit floats: a value past F32_MAX would be infinite
# there, and one below half the smallest (2**-150) zero
F32_MAX = 3.4028234663852886e38
F32_TINY = 2.0**-149

VECTOR_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS vectors (
        tenant TEXT NOT NULL, memory_id TEXT NOT NULL, version INTEGER NOT NULL,
        embedder TEXT NOT NULL, dims INTEGER NOT NULL, vector BLOB NOT NULL,
        PRIMARY KEY (tenant, memory_id, version)
    )""",
    *(
        f"""CREATE TRIGGER IF NOT EXISTS vectors_erased_{op.lower()} BEFORE {op} ON vectors
        WHEN EXISTS (SELECT 1 FROM erased_texts e WHERE e.tenant = NEW.tenant AND e.memory_id = NEW.memory_id
                     AND NEW.version <= e.through_version)
        BEGIN SELECT RAISE(ABORT, 'memwarden: the text of an erased memory version'); END"""
        for op in ("INSERT", "UPDATE")
    ),
]

PUT_VECTOR = (
    "INSERT INTO vectors (tenant, memory_id, version, embedder, dims, vector) VALUES (?,?,?,?,?,?) "
    "ON CONFLICT (tenant, memory_id, version) DO UPDATE SET embedder = excluded.embedder, "
    "dims = excluded.dims, vector = excluded.vector"
)


class Vector(NamedTuple):
    """One version's embeddings, as the store keeps them: ``rows`` of one
    length (most versions have one)."""

    tenant: str
    memory_id: str
    version: int
    embedder: str
    rows: tuple[tuple[float, ...], ...]


def check_vector(field: str, value: Any, dims: int | None = None) -> tuple[float, ...]:
    """A caller's vector as floats, or ``InvalidField`` naming ``field``:
    a non-empty list of finite numbers, ``dims`` long when that is known,
    and not all zeros (it would be equally far from everything)."""
    if not isinstance(value, list | tuple) or not value:
        raise InvalidField(field, "must be a non-empty list of numbers")
    if len(value) > MAX_DIMS:
        raise InvalidField(field, f"has {len(value)} dimensions; at most {MAX_DIMS}")
    if dims is not None and len(value) != dims:
        raise InvalidField(field, f"has {len(value)} dimensions; the embedder makes {dims}")
    # the common case at C speed (a large batch would spend more time in the
    # loop below than in its transaction): only floats, and a
    # finite sum, so no NaN or infinity among them; anything else (ints, a
    # sum that overflows) takes the loop, which answers as it always did
    if set(map(type, value)) == _FLOATS and math.isfinite(sum(value)):
        return _in_f32(field, tuple(value))
    out = []
    for x in value:
        if isinstance(x, bool) or not isinstance(x, int | float):
            raise InvalidField(field, "must hold only numbers")
        try:
            f = float(x)
        except OverflowError:  # an int past any float
            raise InvalidField(field, f"must hold numbers of at most {F32_MAX:.8g} in size") from None
        if not math.isfinite(f):
            raise InvalidField(field, "must hold only finite numbers (no NaN or infinity)")
        out.append(f)
    return _in_f32(field, tuple(out))


def check_vectors(field: str, value: Any, dims: int | None = None) -> tuple[tuple[float, ...], ...]:
    """A caller's several vectors of one version: a non-empty list of at
    most ``MAX_EMBEDDINGS`` vectors of one length, each as ``check_vector``
    takes it (a refusal names the vector, ``embeddings[2]``)."""
    if not isinstance(value, list | tuple) or not value:
        raise InvalidField(field, "must be a non-empty list of vectors")
    if len(value) > MAX_EMBEDDINGS:
        raise InvalidField(field, f"holds {len(value)} vectors; at most {MAX_EMBEDDINGS} a version")
    rows = tuple(check_vector(f"{field}[{i}]", v, dims) for i, v in enumerate(value))
    if len({len(r) for r in rows}) > 1:
        raise InvalidField(field, f"holds vectors of different lengths ({', '.join(str(len(r)) for r in rows)})")
    return rows


def _in_f32(field: str, values: tuple[float, ...]) -> tuple[float, ...]:
    """``values`` (finite), if they are a vector as 32-bit floats too."""
    high, low = max(values), min(values)
    if high > F32_MAX or low < -F32_MAX:
        raise InvalidField(field, f"must hold numbers of at most {F32_MAX:.8g} in size (kept as 32-bit floats)")
    if max(high, -low) < F32_TINY:
        raise InvalidField(field, "must not be all zeros (as 32-bit floats)")
    return values


def vector_bytes(values: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def vector_rows(vectors: Iterable[Vector]) -> list[tuple[Any, ...]]:
    """The store's rows of ``vectors``: one a version, its vectors back to back."""
    return [
        (v.tenant, v.memory_id, v.version, v.embedder, len(v.rows[0]), b"".join(vector_bytes(r) for r in v.rows))
        for v in vectors
    ]
