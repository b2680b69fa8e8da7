"""Exact nearest-neighbour search, the reference the vector index is held to.

Rows and queries are made unit length in 64 bits and kept as 32-bit floats,
as the index keeps them, so the reference ranks near-ties the same way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def unit(vectors: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    wide = np.asarray(vectors, dtype=np.float32).astype(np.float64)
    return (wide / np.linalg.norm(wide, axis=-1, keepdims=True)).astype(np.float32)


def exact_top(given: Mapping[str, Sequence[float]], q: Sequence[float], k: int = 10) -> list[str]:
    names = list(given)
    scores = unit(list(given.values())) @ unit(q)
    return [names[i] for i in np.argsort(-scores, kind="stable")[:k]]
