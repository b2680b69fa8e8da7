"""A seeded corpus of unit vectors shaped like a sentence model's embeddings (issue 62).

Real sentence embeddings are not spread evenly over the sphere: texts
fall into topics, a topic's texts vary along few directions, every vector
shares a common direction (anisotropy) and some texts are near copies of
others. A proximity graph is built for that shape; the hash embedder's
near-orthogonal vectors have no neighbourhoods to follow.

Each vector is a topic's centre plus the topic's own spread of noise,
both drawn from one anisotropic spectrum (a random rotation of
coordinates whose scales fall off as a power), plus a shared direction;
a share of the vectors are near copies of an earlier one. Queries are
drawn the same way from fresh noise (never a stored vector). ``stats``
says what the parameters give: with these, the nearest stored
neighbour of a query is at a cosine of 0.61-0.83 (10th to 90th
percentile, median 0.72, at 50,000 and 100,000 stored) and a random pair
at 0.09: the ranges a sentence model's similarities fall in (top-1
about 0.6-0.9, a random pair about 0.0-0.2).
"""

from __future__ import annotations

import numpy as np

TOPICS = 3000  # a few thousand topics: in the big tenant of 1,000,000, ~170 texts a topic
ZIPF = 0.7  # topic sizes fall off as rank^-0.7: a few large topics, a long tail, as real collections
DECAY = 0.5  # per-direction scale ~ (rank+1)^-0.5: a few hundred directions matter, most of the variance in ~60
SHARED = 0.32  # weight of the common direction: a random pair's cosine ~ SHARED^2 / (1 + SHARED^2) ~ 0.1
SPREAD = (0.7, 1.2)  # a topic's noise over its centre, drawn per topic: tight topics and loose ones
DUPLICATES = 0.05  # share of near copies of an earlier vector (reposts, quotations)
DUPLICATE_NOISE = 0.25  # a copy's noise over the copied vector: cosine ~0.95 to its original


class Clustered:
    """The corpus's generator: ``vectors(n)`` and ``queries(n)`` are the same every run for one seed."""

    def __init__(self, dims: int, seed: int = 62) -> None:
        self.dims = dims
        self.seed = seed
        rng = np.random.default_rng(seed)
        rotation, _ = np.linalg.qr(rng.standard_normal((dims, dims)))
        scale = (np.arange(dims) + 1.0) ** -DECAY
        scale /= np.linalg.norm(scale)
        # a row of standard normals times this is a draw of the anisotropic spectrum (unit expected norm)
        self.basis = (scale[:, None] * rotation.T).astype(np.float32)
        shared = rng.standard_normal(dims)
        self.shared = (shared / np.linalg.norm(shared)).astype(np.float32)
        self.centres = _unit(rng.standard_normal((TOPICS, dims)).astype(np.float32) @ self.basis)
        self.spread = rng.uniform(*SPREAD, TOPICS).astype(np.float32)
        weights = (np.arange(TOPICS) + 1.0) ** -ZIPF
        self.weights = weights / weights.sum()

    def _drawn(self, rng: np.random.Generator, n: int) -> np.ndarray:
        topics = rng.choice(TOPICS, size=n, p=self.weights)
        noise = _unit(rng.standard_normal((n, self.dims), dtype=np.float32) @ self.basis)
        own = _unit(self.centres[topics] + self.spread[topics, None] * noise)
        return _unit(own + SHARED * self.shared)

    def vectors(self, n: int, chunk: int = 50_000) -> np.ndarray:
        """``n`` unit float32 rows; a share are near copies of an earlier row."""
        rng = np.random.default_rng([self.seed, 1])
        out = np.empty((n, self.dims), np.float32)
        for at in range(0, n, chunk):
            m = min(chunk, n - at)
            out[at : at + m] = self._drawn(rng, m)
        copies = np.flatnonzero(rng.random(n) < DUPLICATES)
        copies = copies[copies > 0]
        for at in range(0, len(copies), chunk):
            part = copies[at : at + chunk]
            originals = (rng.random(len(part)) * part).astype(np.int64)  # an earlier row
            noise = _unit(rng.standard_normal((len(part), self.dims), dtype=np.float32) @ self.basis)
            out[part] = _unit(out[originals] + DUPLICATE_NOISE * noise)
        return out

    def queries(self, n: int) -> np.ndarray:
        """``n`` unit rows drawn as the corpus is, from noise of their own."""
        return self._drawn(np.random.default_rng([self.seed, 2]), n)


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def stats(vectors: np.ndarray, queries: np.ndarray, pairs: int = 20_000) -> dict[str, float]:
    """The shape of a corpus: each query's nearest stored vector's cosine
    (median, 10th and 90th percentile) and a random pair's (median)."""
    top1 = np.max(queries @ vectors.T, axis=1)
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, len(vectors), (2, pairs))
    random_pairs = np.einsum("ij,ij->i", vectors[a], vectors[b])
    return {
        "top1_p10": float(np.percentile(top1, 10)),
        "top1_median": float(np.median(top1)),
        "top1_p90": float(np.percentile(top1, 90)),
        "random_median": float(np.median(random_pairs)),
    }
