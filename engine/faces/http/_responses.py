"""What the HTTP API answers, as models for the OpenAPI document, so that a
client generator gets types. They document; the routes return plain dicts
(validating every answer against them would cost the query path dearly),
and every model allows fields beyond those named."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field


class Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


# every seq a tenant's request is answered (``memwarden.engine._tokens``)
Token = Annotated[str, Field(pattern=r"^mwt_[A-Za-z0-9_-]{48}$")]
POSITION = (
    "where this answer stands in the log, to pass back as min_seq on a later read (read your writes): "
    "for an agent key a consistency token (mwt_ and 48 characters) that cannot be ordered or counted "
    "with, different each time; for security and auditor keys, which read the whole log, the seq"
)


class ErrorBody(Answer):
    """Every refusal: a code, the field at fault (if one is) and the problem."""

    error: str
    field: str | None = None
    problem: str


class Saved(Answer):
    memory_id: str
    version: int
    checksum: str
    seq: int | Token = Field(description=POSITION)
    expires_at: str | None = None
    tenant: str


class SavedMany(Answer):
    saved: list[Saved]


class Memory(Answer):
    memory_id: str
    version: int
    status: str
    usable: bool
    reason: str | None = None
    action: str
    detail: str | None = None
    kind: str
    summary: str | None = None
    checksum: str | None = None  # withheld once the text is erased
    content: str | None = None
    scope: dict[str, str | None]
    source_url: str
    fetched_at: str
    expires_at: str | None = None
    verified_at: str | None = None
    policy: str
    revocation_version: int | str
    derived_from: list[dict[str, Any]]
    last_seq: int | None = Field(
        description="the seq of the memory's last change, for security and auditor keys; null for an agent key "
        "(a log position counts every tenant's writes)"
    )


class Memories(Answer):
    memories: list[Memory]
    truncated: bool = Field(
        False, description="the answer stopped at limits.max_answer_bytes of content before its limit"
    )
    next_offset: int | None = Field(None, description="where truncated: the offset of the next page")


class SearchResult(Memory):
    """A memory recall found: as the gate judged it, with its fused score."""

    score: float
    found_by: list[str] = Field(description='"text", "vector" or both: the halves that found it')
    similarity: float | None = Field(None, description="the cosine with the query (the vector half)")
    text_rank: int | None = Field(None, description="its place in the full-text answer, from 1")


class SearchResults(Answer):
    results: list[SearchResult]
    seq: int | Token = Field(
        description="the log's head when the search began: the answer is at least this fresh; " + POSITION
    )
    truncated: bool = Field(False, description="the answer stopped at limits.max_answer_bytes of content")


class Verified(Answer):
    memory_id: str
    outcome: str
    detail: str | None = None
    seq: int | Token | None = Field(None, description="where the check wrote an event: " + POSITION)
    tenant: str


class Verifications(Answer):
    results: list[Verified]


class Explanation(Answer):
    memory_id: str
    usable: bool
    reason: str | None = None
    seq: int | Token = Field(description="the point explained: " + POSITION)
    history: list[dict[str, Any]] = Field(
        description="each step, oldest first; its seq for security and auditor keys, null for an agent key"
    )


class DueItem(Answer):
    memory_id: str
    source_url: str
    reason: str
    tenant: str


class Due(Answer):
    due: list[DueItem]


class SinkReadback(Answer):
    """A sink's read-back of a revocation, as it stands."""

    sink: str
    status: str = Field(description="pending, confirmed, leaked or unreachable")
    covered: int = Field(
        description="the ids the sink's notice named: the memories the revocation took out and every memory "
        "drawn from them, in the tenants the sink receives (so it can exceed the revocation's own covered)"
    )
    latency_ms: float | None = Field(None, description="from the revocation's commit, once confirmed")
    leaked_ids: list[str] = Field(default_factory=list, description="the covered ids the sink still holds")
    attempts: int
    checked_at: str | None = None
    detail: str | None = None
    final_seq: int | None = Field(None, description="the log position of its final outcome, once recorded")


class SinkAck(Answer):
    """An acknowledgement accepted: which notice, and what the sink says it removed."""

    sink: str
    notice_id: str
    ack_id: str
    removed: dict[str, list[str]]


class Revocation(Answer):
    revocation_id: str
    seq: int
    covered: int = Field(description="the memories taken out directly, at commit")
    cascaded: int | None = Field(
        None, description="in a revoke's answer: the memories drawn from those, invalidated with them at commit"
    )
    sinks: list[SinkReadback] | None = Field(None, description='with "wait": each sink\'s read-back as it stands')


class Sink(Answer):
    name: str
    kind: str
    url: str
    tenants: list[str] | None = None
    events: list[str]
    pending: int
    delivered: int
    dead: int
    last_error: str | None = None


class Sinks(Answer):
    sinks: list[Sink]


class SinkTest(Answer):
    sink: str
    ok: bool
    round_trip_ms: float | None = None
    problem: str | None = None


class Redelivered(Answer):
    notice_id: str
    sink: str | None = None
    requeued: int


class TenantCovered(Answer):
    tenant: str
    covered: int


class RevocationPreview(Answer):
    """A dry run: what the revocation would take out if issued now."""

    dry_run: bool
    covered: int
    cascaded: int = Field(0, description="memories drawn from those that the cascade would invalidate")
    everything: bool
    tenants: list[TenantCovered]


class Revocations(Answer):
    revocations: list[dict[str, Any]]


class Readback(Answer):
    revocation_id: str
    confirmed: bool
    records: list[dict[str, Any]]
    sink_records: list[dict[str, Any]] = Field(
        default_factory=list,
        description="each sink's outcomes as logged (sink.readback_recorded): confirmed, leaks found, "
        "and its state at the read-back deadline (final)",
    )


class TenantRetired(Answer):
    tenant: str
    retired: int
    memory_api: int


class PolicySet(Answer):
    """The change: how many memories it retired (``unchanged``: the version
    was already current and nothing was written)."""

    policy: str
    version: int | str
    seq: int | None
    retired: int
    memory_api: int
    tenants: list[TenantRetired]
    unchanged: bool


class PolicyPreview(Answer):
    """A dry run: what making the version current would retire now."""

    dry_run: bool
    policy: str
    version: int | str
    current: int | str
    unchanged: bool
    retired: int
    memory_api: int
    tenants: list[TenantRetired]


class Policies(Answer):
    policies: dict[str, int | str]


class Tenants(Answer):
    tenants: list[str]


class Erased(Answer):
    erased: int
    cleared: bool  # false: the bytes leave the store's files once older transactions end


class Replay(Answer):
    as_of: str
    seq: int
    memories: list[dict[str, Any]]
    next: str | None = None  # with limit: the cursor of the next page (None on the last)


class AuditReport(Answer):
    ok: bool
    head_seq: int | None = None
    first_bad_seq: int | None = None
    problem: str | None = None


class Head(Answer):
    seq: int
    hash: str


class Stats(Answer):
    weeks: list[dict[str, Any]]


class Events(Answer):
    events: list[dict[str, Any]]
    head: int


class KeySaved(Answer):
    status: str
    agent: str
    key: str
    version: int
    checksum: str
    seq: int | Token = Field(description=POSITION)


class KeysLoaded(Answer):
    memories: list[dict[str, Any]] = Field(
        description="each key: {key_name, content, saved_at, checksum, status, version, history?}. saved_at is "
        "the time the content stands for: the saved_at of the content's own JSON envelope when it gave one, "
        "else when memwarden took the save. With history, each version has saved_at in the same sense and "
        "recorded_at, when the log recorded that save"
    )
    hidden: list[dict[str, Any]] = Field(
        default_factory=list, description="keys whose content is withheld now: {key_name, reason, action}"
    )


class Health(Answer):
    ok: bool
    head_seq: int | None = Field(None, description="the log's head: only to a security or auditor key")


def documented(model: type[BaseModel], status: int = 200, *errors: int) -> dict[str, Any]:
    """Route arguments that document ``model`` as the answer and every
    refusal the route can give (all routes behind a key can answer 401)."""
    described = {
        400: "the body is not valid JSON",
        401: "no valid x-api-key",
        403: "the key's role or tenants do not allow this",
        404: "no such memory or revocation (or one the key may not see)",
        409: "a conflict: the id is taken, erased, revoked, or the view is behind min_seq "
        '(stale_view: Retry-After when worth retrying; "ahead": true when the log holds no such write)',
        413: "the body or the content is over a limit",
        422: "bad input: the field and the problem",
        429: "the key holds as many waiting requests as one key may",
        503: "the embedder (or the database) could not answer now",
    }
    responses: dict[int | str, dict[str, Any]] = {status: {"model": model}}
    for code in sorted({400, 401, 403, 413, 422, *errors}):
        responses[code] = {"model": ErrorBody, "description": described[code]}
    # the route's own return type (a dict) stays its response model, so
    # pydantic serializes the answer, not FastAPI's generic encoder, which
    # is far slower
    return {"responses": responses, "status_code": status}
