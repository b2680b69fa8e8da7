"""Request bodies of the HTTP API: strict, unknown fields refused."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from fastapi.exceptions import RequestValidationError
from memwarden.engine import MAX_BATCH, MAX_PAGE
from memwarden.events import MAX_EMBEDDINGS
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SkipValidation,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)

# a vector's longest (``memwarden.events``' MAX_DIMS); the engine checks the
# rest (the embedder's length, finite numbers, not all zeros) and names the field
MAX_DIMS = 4096


def _number(value: object) -> object:
    """A vector's value: a JSON number (true is no 1.0, nor "1.5" 1.5)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a number")
    return value


Vector = list[Annotated[float, BeforeValidator(_number)]]

# a read's min_seq in a body: one position or several, as earlier answers gave them; what each
# may be (a token, or for staff a seq) is the engine's ``Positions`` to check, naming the field
MinSeq = Annotated[
    StrictInt | StrictStr | list[StrictInt | StrictStr] | None,
    Field(
        description="at least as fresh as this: the seq an earlier answer gave (a consistency token, mwt_..., "
        "for an agent key; security and auditor keys may give seqs), or a list of them (at most 32): "
        "the read waits for the newest",
    ),
]


class Body(BaseModel):
    # strict: a JSON body's number is a number (``"limit": "5"`` or ``true`` is refused
    # naming the field, as any other wrong type), its text text
    model_config = ConfigDict(extra="forbid", strict=True)


class ScopeBody(Body):
    tenant: str = Field(min_length=1, description="the tenant: the wall no read or write crosses")
    project: str | None = Field(None, description="the project within the tenant")
    permission: str | None = Field(None, description="the permission the fact was read under")
    user: str | None = Field(None, description="the user it concerns (erase --user names it)")
    agent: str | None = Field(None, description="the agent it belongs to (an agent-bound key fills in its own)")
    tool: str | None = Field(None, description="the tool whose result it is")


class CacheKeyBody(Body):
    tool: str = Field(min_length=1, description="the tool's name")
    tool_version: str = Field(min_length=1, description="the tool's version")
    input_hash: str = Field(min_length=1, description="a hash of the tool's input")


class SaveBody(Body):
    memory_id: str = Field(
        min_length=1, description="the memory's id in its tenant; an id saved before gets a new version"
    )
    kind: str = Field(min_length=1, description="the kind of memory: sets its TTL from the policy file's [kinds]")
    summary: str = Field(min_length=1, description="what the memory says, in short")
    content: str = Field(description="the remembered text (UTF-8, kept byte for byte)")
    source_url: str = Field(
        min_length=1, description="where the content came from: a URL with a scheme, or an absolute path"
    )
    scope: ScopeBody = Field(description="the tenant and the parts of the scope below it")
    fetched_at: str | None = Field(
        None, description="when the content was read from its source (ISO 8601; default now)"
    )
    expires_at: str | None = Field(None, description="when it stops being usable (default: fetched_at plus the TTL)")
    ttl: str | None = Field(None, description="its lifetime from fetched_at: 90s, 15m, 6h, 30d (default: the kind's)")
    verified_at: str | None = Field(None, description="when it was last checked against its source")
    source: str | None = Field(None, description="a path in a git repository (with branch), instead of a URL")
    branch: str | None = Field(None, description="the git branch of source (default HEAD)")
    policy: str = Field("default", description="the policy it was checked under")
    # checked by the engine, which names the field: a number or a key like "policy-42-v7"
    revocation_version: StrictInt | str | None = Field(
        None, description="the policy's version (default: its current one)"
    )
    checksum: str | None = Field(None, description="sha256:<hex> the content must match")
    cache_key: CacheKeyBody | None = Field(None, description="a tool result's full cache key")
    event_id: str | None = Field(
        None, description="an idempotency key in the tenant: the same save again answers the first"
    )
    # as many as the store's limits.max_parents allow: the engine refuses past it, naming the limit
    derived_from: list[str] = Field(default_factory=list, description="the memories of the tenant it was drawn from")
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
    memories: list[SaveBody] = Field(min_length=1, max_length=MAX_BATCH)


M = TypeVar("M", bound=BaseModel)
# A body FastAPI documents as the model but leaves unchecked, for the
# endpoint to check with ``parsed`` in its worker thread: FastAPI checks a
# body in the event loop's thread, where a large batch's check holds every
# other request
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
    version: StrictInt | str = Field(description='a number, or a key like "policy-42-v7"')


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
    min_seq: MinSeq = None
    with_content: StrictBool = True
    min_similarity: float | None = Field(
        None, ge=-1, le=1, description="a vector matches only above this similarity (default: the embedder's, else 0)"
    )

    def search_args(self, min_seq: int | None) -> dict[str, object]:
        """``Warden.search``'s keyword arguments (every rule is the engine's),
        with ``min_seq`` as the caller's ``Positions`` read it."""
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
            min_seq=min_seq,
            with_content=self.with_content,
            min_similarity=self.min_similarity,
        )
