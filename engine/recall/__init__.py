"""Semantic recall: the embedders that make vectors (``_embedders``), the
search where the index proposes and the gate decides (``_search``), and
re-embedding what another embedder made (``_reembed``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memwarden.events import lazy_exports

if TYPE_CHECKING:
    from ._embedders import CallableEmbedder, Embedder, EmbedderFailed, HashEmbedder, HttpEmbedder, register_embedder
    from ._search import MODES, RRF_K

__getattr__ = lazy_exports(__name__, __file__)

__all__ = [
    "MODES",
    "RRF_K",
    "CallableEmbedder",
    "Embedder",
    "EmbedderFailed",
    "HashEmbedder",
    "HttpEmbedder",
    "register_embedder",
]
