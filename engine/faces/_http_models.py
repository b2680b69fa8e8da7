"""Request bodies of the HTTP API: strict, unknown fields refused."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from fastapi.exceptions import RequestValidationError
from memwarden.engine import MAX_PAGE
from memwarden.events import MAX_EMBEDDINGS
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SkipValidation, StrictBool, ValidationError

# a vector's longest (``memwarden.events``' MAX_DIMS); the engine checks the
# rest (the embedder's length, finite numbers, not all zeros) and names the field
MAX_DIMS = 4096


def _number(value: object) -> object:
    """A vector's value: a JSON number (true is no 1.0, nor "1.5" 1.5)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a number")
    return value


Vector = list[Annotated[float, BeforeValidator(_number)]]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScopeBody(Body):
    tenant: str = Field(min_length=1)
    project: str | None = None
    permission: str | None = None
    user: str | None = None
    agent: str | None = None
    tool: str | None = None


class CacheKeyBody(Body):
    tool: str = Field(min_length=1)
    tool_version: str = Field(min_length=1)
    input_hash: str = Field(min_length=1)


class SaveBody(Body):
    memory_id: str = Field(min_length=1)
    kind: str = Field(min_length=1)
    summary: str = Field(min_length=1)
    content: str
    source_url: str = Field(min_length=1)
    scope: ScopeBody
    fetched_at: str | None = None
    expires_at: str | None = None
    ttl: str | None = None
    verified_at: str | None = None
    source: str | None = None
    branch: str | None = None
    policy: str = "default"
    # checked by the engine, which names the field: a number or a key like "policy-42-v7"
    revocation_version: int | str | None = None
    checksum: str | None = None
    cache_key: CacheKeyBody | None = None
    event_id: str | None = None
    # as many as the store's limits.max_parents allow: the engine refuses past it, naming the limit
    derived_from: list[str] = Field(default_factory=list)
    embedding: Vector | None = Field(
        None, max_length=MAX_DIMS, description="the version's vector (default: the configured embedder's)"
    )
    embeddings: list[Annotated[Vector, Field(max_length=MAX_DIMS)]] | None = Field(
        None,
        min_length=1,
        max_length=MAX_EMBEDDINGS,
        description=(
            "instead of embedding: several vectors of one length for this version (each field of an item "
            "embedded apart); a search finds the memory once, by the closest of them"
        ),
    )


class SaveManyBody(Body):
    memories: list[SaveBody] = Field(min_length=1, max_length=MAX_PAGE)


M = TypeVar("M", bound=BaseModel)
# A body FastAPI documents as the model but leaves unchecked, for the
# endpoint to check with ``parsed`` in its worker thread: FastAPI checks a
# body in the event loop's thread, and a batch of 10,000 memories held
# every other request there for tens of milliseconds (BENCHMARKS.md, hostile)
Unchecked = SkipValidation


def parsed(model: type[M], raw: Any) -> M:
    """``raw`` (a body taken ``Unchecked``) as ``model``, refused as FastAPI
    refuses a body: the same errors, under ``body``."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise RequestValidationError(
            [{**error, "loc": ("body", *error["loc"])} for error in exc.errors(include_url=False)]
        ) from None


class SelectorBody(Body):
    tenant: str | None = None
    project: str | None = None
    permission: str | None = None
    user: str | None = None
    agent: str | None = None
    tool: str | None = None
    kind: str | None = None
    source_prefix: str | None = None
    ids: list[str] = Field(default_factory=list)
    everything: StrictBool = False


class RevokeBody(Body):
    selector: SelectorBody
    reason: str = Field(min_length=1)
    wait: StrictBool = False


class PolicyBody(Body):
    version: int | str = Field(description='a number, or a key like "policy-42-v7"')


class EraseBody(Body):
    memory_id: str | None = None
    user: str | None = None
    tenant: str | None = None
    reason: str = Field(min_length=1)


class RedeliverBody(Body):
    notice_id: str = Field(min_length=1, max_length=200, description="ntc_...: as sinks list and the console show it")
    sink: str | None = Field(None, max_length=64, description="only to this sink (default: every sink it went to)")


class MemoryApiSave(Body):
    agent: str = Field(min_length=1)
    key: str = Field(min_length=1)
    content: str


class SearchBody(Body):
    """``POST /v1/memories/search``: semantic recall (``Warden.search``)."""

    tenant: str = Field(min_length=1)
    query: str | None = Field(
        None,
        description=(
            "the text to search for (give query, vector, or both): at most 1000 characters; in text and hybrid "
            "mode at most 32 distinct words, as GET /v1/memories?text= takes"
        ),
    )
    vector: Vector | None = Field(None, max_length=MAX_DIMS, description="a query vector of the embedder's length")
    limit: int = Field(10, ge=1, le=MAX_PAGE)
    mode: Literal["hybrid", "vector", "text"] = "hybrid"
    weights: list[Annotated[float, Field(ge=0, le=100)]] = Field(
        default_factory=lambda: [1.0, 1.0], min_length=2, max_length=2, description="(text, vector) in the fusion"
    )
    project: str | None = None
    permission: str | None = None
    user: str | None = None
    agent: str | None = None
    tool: str | None = None
    kind: str | None = None
    include_hidden: StrictBool = Field(False, description="staff: the memories the gate refuses too, with why")
    min_seq: int | None = Field(None, ge=0, le=2**62)
    with_content: StrictBool = True
    min_similarity: float | None = Field(
        None, ge=-1, le=1, description="a vector matches only above this similarity (default: the embedder's, else 0)"
    )

    def search_args(self) -> dict[str, object]:
        """``Warden.search``'s keyword arguments (every rule is the engine's)."""
        return dict(
            tenant=self.tenant,
            query_text=self.query,
            vector=self.vector,
            limit=self.limit,
            mode=self.mode,
            weights=tuple(self.weights),
            project=self.project,
            permission=self.permission,
            user=self.user,
            agent=self.agent,
            tool=self.tool,
            kind=self.kind,
            include_hidden=self.include_hidden,
            min_seq=self.min_seq,
            with_content=self.with_content,
            min_similarity=self.min_similarity,
        )
