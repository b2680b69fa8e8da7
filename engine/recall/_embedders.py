"""Embedders: what turns a memory's text into a vector.

The policy file's ``[embedder]`` table names one:

[embedder]
kind = "hash"            # memwarden's own, deterministic; for tests and demos, NOT for production
dims = 384

[embedder]
kind = "callable"        # a Python function registered with ``register_embedder(name, fn, dims)``
name = "my-model"

[embedder]
kind = "http"            # an OpenAI-compatible /embeddings endpoint
url = "https://api.example.com/v1/embeddings"
model = "text-embedding-3-small"
dims = 1536
api_key_env = "OPENAI_API_KEY"   # optional: the environment variable holding the key
min_similarity = 0.3     # optional, any kind: a search's vector matches only above it (default 0)

The endpoint connects under the fetchers' address rules (``[fetch] allow``).

``min_similarity`` is the model's to know: how similar two unrelated texts
come out varies from one model to another (many put them near 0.1 to 0.2;
memwarden's hash embedder, whose texts share letter pairs, higher still).
The default, 0, only says that a vector pointing away from the query is
no match; an operator who knows the model sets the floor it deserves, and
a caller may give its own with each search.
"""

from __future__ import annotations

import math
import os
import re
import unicodedata
import zlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from memwarden.events import InvalidField, check_vector, check_vectors, get_logger

from .._errors import FetchFailed, InvalidInput
from .._fetchers import Fetchers

log = get_logger("memwarden.embedder")

EmbedFn = Callable[[Sequence[str]], Sequence[Sequence[float]]]
_REGISTERED: dict[str, tuple[EmbedFn, int]] = {}
_WORD = re.compile(r"\w+", re.UNICODE)


class EmbedderFailed(InvalidInput):
    """The embedder gave no usable vector (an endpoint down, a wrong answer).
    The caller is told which embedder and what kind of failure; the detail
    (the endpoint's address, which may carry a key, or the operator's own
    code's message) goes to the log only."""

    code = "embedder_failed"
    status = 503

    @classmethod
    def of(cls, name: str, what: str, detail: str) -> EmbedderFailed:
        log.error("embedder_failed", embedder=name, failure=what, detail=detail[:2000])
        return cls("embedder", f"{name}: {what} (the server log has the detail)")


class Embedder(Protocol):
    name: str  # recorded in each saved event, with dims: a change of model is visible
    dims: int
    min_similarity: float  # a search's vector matches only above it ([embedder] min_similarity)

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]: ...


class HashEmbedder:
    """Hashed character n-grams (2 and 3 characters of each word, and the
    word), signed, L2-normalised. Deterministic and dependency-free; a
    Korean word shares its syllable bigrams with its inflected forms (서울,
    서울에서) as an English one shares trigrams. It knows no synonyms:
    for tests, demos and the quick start, not for production."""

    min_similarity = 0.0

    def __init__(self, dims: int = 384) -> None:
        if not isinstance(dims, int) or isinstance(dims, bool) or not 8 <= dims <= 4096:
            raise InvalidInput("embedder.dims", "must be a whole number from 8 to 4096")
        self.dims = dims
        self.name = f"memwarden-hash-v1/{dims}"

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        return [self._one(t) for t in texts]

    def _one(self, text: str) -> tuple[float, ...]:
        v = [0.0] * self.dims
        for word in _WORD.findall(unicodedata.normalize("NFKC", text).casefold()):
            padded = f"\x02{word}\x03"
            grams = [word] + [padded[i : i + n] for n in (2, 3) for i in range(len(padded) - n + 1)]
            for gram in grams:
                h = zlib.crc32(gram.encode("utf-8"))
                v[h % self.dims] += 1.0 if h & 0x80000000 else -1.0
        norm = math.sqrt(sum(x * x for x in v))
        if norm == 0.0:
            v[0], norm = 1.0, 1.0  # no words at all: one fixed direction, never a zero vector
        return tuple(x / norm for x in v)


class CallableEmbedder:
    min_similarity = 0.0

    def __init__(self, name: str, fn: EmbedFn, dims: int) -> None:
        self.name, self.fn, self.dims = name, fn, dims

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        try:
            out = _listed(self.fn(list(texts)))
        except Exception as exc:  # the callable is the operator's code: any failure is the embedder's
            raise EmbedderFailed.of(self.name, f"the callable raised {type(exc).__name__}", str(exc)) from None
        return _checked(self.name, out, len(texts), self.dims)


class HttpEmbedder:
    """An OpenAI-compatible ``POST /embeddings``: ``{"model", "input": [...],
    "dimensions"}`` answered by ``{"data": [{"embedding": [...]}, ...]}``."""

    min_similarity = 0.0

    def __init__(self, url: str, model: str, dims: int, fetchers: Fetchers, api_key: str | None = None) -> None:
        self.url, self.model, self.dims = url, model, dims
        self.name = f"http:{model}/{dims}"
        self.fetchers, self.api_key = fetchers, api_key

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        headers = {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        body = {"model": self.model, "input": list(texts), "dimensions": self.dims}
        # the fetcher's deadline and size cap, the cap as large as the answer
        # may fairly be: each number of a vector in JSON takes at most ~25 bytes
        most = max(self.fetchers.max_bytes, len(texts) * self.dims * 32 + 65536)
        try:
            answer = self.fetchers.post_json(self.url, body, headers=headers, max_bytes=most)
        except FetchFailed as exc:
            raise EmbedderFailed.of(self.name, exc.category, exc.detail) from None
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list) or not all(isinstance(d, dict) and "embedding" in d for d in data):
            raise EmbedderFailed.of(
                self.name, "not an embeddings answer", f"{type(answer).__name__} without data[].embedding"
            )
        ordered = sorted(data, key=lambda d: d["index"] if isinstance(d.get("index"), int) else 0)
        return _checked(self.name, [d["embedding"] for d in ordered], len(texts), self.dims)


def _listed(vectors: Any) -> list[Any]:
    """What an embedding function answered, as lists of Python floats: numpy
    arrays and their float32 values (sentence-transformers' answer) included."""
    if hasattr(vectors, "tolist"):
        vectors = vectors.tolist()
    return [v.tolist() if hasattr(v, "tolist") else v for v in vectors]


def _checked(name: str, out: list[Any], count: int, dims: int) -> list[tuple[float, ...]]:
    if len(out) != count:
        raise EmbedderFailed.of(name, f"{len(out)} vectors for {count} texts", "")
    try:
        return [check_vector("embedding", v, dims) for v in out]
    except InvalidField as exc:
        raise EmbedderFailed.of(name, f"a vector that {exc.problem}", "") from None


def vector_input(field: str, value: Any, dims: int | None) -> tuple[float, ...]:
    """A caller's vector checked (``check_vector``), refused as the engine's
    ``InvalidInput`` naming ``field``."""
    try:
        return check_vector(field, value, dims)
    except InvalidField as exc:
        raise InvalidInput(field, exc.problem) from None


def vectors_input(field: str, value: Any, dims: int | None) -> tuple[tuple[float, ...], ...]:
    """A caller's several vectors checked (``check_vectors``), refused as the
    engine's ``InvalidInput`` naming ``field`` (or the one vector, ``field[i]``)."""
    try:
        return check_vectors(field, value, dims)
    except InvalidField as exc:
        raise InvalidInput(exc.field, exc.problem) from None


def register_embedder(name: str, fn: EmbedFn, dims: int) -> None:
    """Make ``fn`` (texts -> vectors of ``dims``) the embedder a policy file's
    ``kind = "callable"``, ``name = ...`` names."""
    _REGISTERED[name] = (fn, dims)


EMBEDDER_KEYS = {"kind", "dims", "name", "url", "model", "api_key_env", "min_similarity"}


def embedder_from_settings(table: dict[str, Any], fetchers: Fetchers) -> Embedder | None:
    """The policy file's ``[embedder]`` (None when it has none)."""
    if not table:
        return None
    unknown = set(table) - EMBEDDER_KEYS
    if unknown:
        raise InvalidInput("embedder", f"unknown keys {sorted(unknown)} (known: {', '.join(sorted(EMBEDDER_KEYS))})")
    floor = table.get("min_similarity", 0.0)
    if isinstance(floor, bool) or not isinstance(floor, int | float) or not -1.0 <= floor < 1.0:
        raise InvalidInput("embedder.min_similarity", "must be a number from -1 to below 1")
    embedder = _made(table, fetchers)
    embedder.min_similarity = float(floor)
    return embedder


def _made(table: dict[str, Any], fetchers: Fetchers) -> Embedder:
    kind = table.get("kind")
    dims = table.get("dims", 384)
    if not isinstance(dims, int) or isinstance(dims, bool) or not 1 <= dims <= 4096:
        raise InvalidInput("embedder.dims", "must be a whole number from 1 to 4096")
    if kind == "hash":
        return HashEmbedder(dims)
    if kind == "callable":
        name = table.get("name")
        if name not in _REGISTERED:
            raise InvalidInput("embedder.name", f"no embedder {name!r} is registered (register_embedder)")
        fn, dims = _REGISTERED[name]
        return CallableEmbedder(name, fn, dims)
    if kind == "http":
        url, model = table.get("url"), table.get("model")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidInput("embedder.url", "must be an http(s) URL")
        if not isinstance(model, str) or not model:
            raise InvalidInput("embedder.model", "must name the model")
        env = table.get("api_key_env")
        return HttpEmbedder(url, model, dims, fetchers, os.environ.get(env) if isinstance(env, str) else None)
    raise InvalidInput("embedder.kind", "must be one of hash, callable, http")
