"""Event models: frozen, keyword-only, strict, one per event type.

Each model holds its envelope fields (``event_id``, ``occurred_at``,
``actor``) and its payload fields; the log stores the envelope as columns
and the payload as canonical JSON. ``stream`` is derived from the payload,
so an event cannot name one memory in its stream and another in its body.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    model_validator,
)

from ._canonical import content_checksum
from ._streams import memory_stream
from ._types import (
    Checksum,
    Identifier,
    NonEmptyStr,
    NonNegativeInt,
    PolicyVersion,
    PositiveInt,
    UTCDateTime,
)
from ._values import CacheKey, Model, ParentRef, Scope, Selector, new_id

ENVELOPE_FIELDS = frozenset({"type", "event_id", "occurred_at", "actor"})


def holds_float(annotation: Any) -> bool:
    """Whether a field of this type may hold a float (``Any`` may, and so
    does ``Literal[0.5]``)."""
    if annotation is float or annotation is Any or annotation is object or isinstance(annotation, float):
        return True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return any(holds_float(f.annotation) for f in annotation.model_fields.values())
    return any(holds_float(arg) for arg in get_args(annotation))


class Event(Model):
    """Base of all events. Subclasses fix ``type`` and add payload fields."""

    SCHEMA_VERSION: ClassVar[int] = 1
    # whether a payload may hold a float: canonical_json leaves those to
    # json, and takes the faster orjson when told there are none
    FLOATS: ClassVar[bool] = False

    type: str
    event_id: Identifier = Field(default_factory=lambda: new_id("ev_"))
    occurred_at: UTCDateTime | None = None
    actor: NonEmptyStr = "system"

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.FLOATS = any(holds_float(f.annotation) for f in cls.model_fields.values())

    @property
    @abstractmethod
    def stream(self) -> str:
        """The stream this event belongs to, derived from its payload."""

    def payload(self) -> dict[str, Any]:
        """The payload as JSON-ready data (what is hashed and stored).

        Absent optional fields are left out rather than written as null:
        the two mean the same, and the shorter form is cheaper to hash.
        """
        # model_dump() without its wrapper, and the envelope dropped
        # afterwards rather than by pydantic's exclude=: this runs per append
        data = type(self).__pydantic_serializer__.to_python(self, mode="json", exclude_none=True)
        del data["type"], data["event_id"], data["actor"]  # never None
        data.pop("occurred_at", None)
        return data


class MemoryEvent(Event):
    """An event about one memory. Schema 2 added ``tenant``: a memory is
    identified by (tenant, memory_id), so two tenants may use one id."""

    SCHEMA_VERSION: ClassVar[int] = 2
    tenant: Identifier
    memory_id: Identifier

    @property
    def stream(self) -> str:
        return memory_stream(self.tenant, self.memory_id)


class MemorySaved(MemoryEvent):
    """A version of a memory. Its texts (summary and content) are not in the
    payload: they live in the text store, per memory and version, so an
    erasure can destroy them while the chain (which covers their checksums)
    still verifies."""

    type: Literal["memory.saved"] = "memory.saved"
    version: PositiveInt
    kind: Identifier
    summary_checksum: Checksum
    content_checksum: Checksum
    content_length: NonNegativeInt
    source_url: NonEmptyStr
    source: NonEmptyStr | None = None
    repo: NonEmptyStr | None = None
    branch: NonEmptyStr | None = None
    fetched_at: UTCDateTime
    expires_at: UTCDateTime | None = None
    verified_at: UTCDateTime | None = None
    scope: Scope
    policy: Identifier = "default"
    revocation_version: PolicyVersion = 1
    derived_from: tuple[ParentRef, ...] = Field(default=(), strict=False)
    cache_key: CacheKey | None = None
    # which embedder made the version's vector (kept outside the chain, with
    # the texts) and its length: absent where the version has none
    embedder: NonEmptyStr | None = None
    embedding_dims: PositiveInt | None = None
    # how many vectors of that length, where more than one (each field of an
    # item embedded apart): absent for one, so older events hash as they did
    embedding_count: PositiveInt | None = None

    @model_validator(mode="before")
    @classmethod
    def _tenant_of_scope(cls, data: Any) -> Any:
        # the identity's tenant is the scope's: given once, it is both
        if isinstance(data, dict) and "tenant" not in data:
            scope = data.get("scope")
            tenant = scope.get("tenant") if isinstance(scope, dict) else getattr(scope, "tenant", None)
            if tenant is not None:
                data = {**data, "tenant": tenant}
        # a summary given as text is recorded as its checksum only (whoever
        # builds the event keeps the text in the text store)
        if isinstance(data, dict) and "summary" in data and "summary_checksum" not in data:
            data = dict(data)
            summary = data.pop("summary")
            if not isinstance(summary, str) or not summary:
                raise ValueError("summary: must be non-empty text")
            data["summary_checksum"] = content_checksum(summary)
        return data

    @model_validator(mode="after")
    def _tenant(self) -> MemorySaved:
        # an expires_at at or before fetched_at is a fact a record file may
        # hold (a memory born expired, due at once); a live save refuses it
        if self.scope.tenant != self.tenant:
            raise ValueError(f"scope.tenant: {self.scope.tenant!r} is not the memory's tenant {self.tenant!r}")
        return self


class MemoryVerified(MemoryEvent):
    type: Literal["memory.verified"] = "memory.verified"
    version: PositiveInt
    content_checksum: Checksum
    fetched_at: UTCDateTime
    verified_at: UTCDateTime
    expires_at: UTCDateTime | None = None
    revocation_version: PolicyVersion
    after_expiry: bool = False


class MemoryVerificationFailed(MemoryEvent):
    type: Literal["memory.verification_failed"] = "memory.verification_failed"
    version: PositiveInt
    error: NonEmptyStr
    attempted_at: UTCDateTime


class MemoryExpired(MemoryEvent):
    type: Literal["memory.expired"] = "memory.expired"
    version: PositiveInt
    expires_at: UTCDateTime


class MemoryInvalidated(MemoryEvent):
    type: Literal["memory.invalidated"] = "memory.invalidated"
    version: PositiveInt
    reason: NonEmptyStr
    detail: str | None = None
    new_checksum: Checksum | None = None
    caused_by: PositiveInt | None = None


class MemoryErased(MemoryEvent):
    """The texts of a memory's versions destroyed: every version up to
    ``version`` (absent in erasures recorded before it was named: every
    version saved before the erasure). A later save starts a new version."""

    type: Literal["memory.erased"] = "memory.erased"
    reason: NonEmptyStr
    content_checksum: Checksum | None = None
    version: PositiveInt | None = None


class MemoryIntegrityFailed(MemoryEvent):
    type: Literal["memory.integrity_failed"] = "memory.integrity_failed"
    version: PositiveInt
    expected_checksum: Checksum
    actual_checksum: Checksum | None = None


class MemoryResynced(MemoryEvent):
    type: Literal["memory.resynced"] = "memory.resynced"
    version: PositiveInt
    content_checksum: Checksum
    resynced_from: NonEmptyStr


class MemoryReembedded(MemoryEvent):
    """A version's vector made again by another embedder (the configured one
    changed). The vector, like the first, is kept outside the chain; this
    records which embedder made it now, and which made it before (None: the
    version had none), so the index on every node follows the change."""

    type: Literal["memory.reembedded"] = "memory.reembedded"
    version: PositiveInt
    embedder: NonEmptyStr
    embedding_dims: PositiveInt
    previous_embedder: NonEmptyStr | None = None
    previous_dims: PositiveInt | None = None


class PolicyVersionChanged(Event):
    type: Literal["policy.version_changed"] = "policy.version_changed"
    policy: Identifier
    version: PolicyVersion
    previous_version: PolicyVersion

    @property
    def stream(self) -> str:
        return f"policy:{self.policy}"


class RevocationIssued(Event):
    type: Literal["revocation.issued"] = "revocation.issued"
    revocation_id: Identifier
    selector: Selector
    reason: NonEmptyStr
    issued_by: NonEmptyStr
    effective_at: UTCDateTime

    @property
    def stream(self) -> str:
        return self.revocation_id


class _Readback(Event):
    revocation_id: Identifier
    paths_checked: tuple[Identifier, ...] = Field(strict=False)
    covered: NonNegativeInt
    latency_ms: Annotated[float, Field(ge=0)]

    @property
    def stream(self) -> str:
        return self.revocation_id


class ReadbackConfirmed(_Readback):
    type: Literal["readback.confirmed"] = "readback.confirmed"
    still_visible: Literal[0] = 0


class ReadbackFailed(_Readback):
    type: Literal["readback.failed"] = "readback.failed"
    still_visible: PositiveInt
    leaked_ids: tuple[Identifier, ...] = Field(strict=False)


class SinkReadbackRecorded(Event):
    """How a sink outside memwarden answered a revocation's read-back (issue
    42): ``confirmed`` (it holds none of the covered ids; ``latency_ms`` from
    the revocation's commit), ``leaked`` (exactly ``leaked_ids`` still held)
    or ``unreachable`` (no answer, ``detail`` says why). ``final``: the sink's
    outcome for good (confirmed, or the state it was left in at its
    read-back deadline); a leak is also recorded when first found (and again
    when what leaks changes), so an auditor sees it while it is retried.
    In the revocation's stream, beside memwarden's own read-back."""

    type: Literal["sink.readback_recorded"] = "sink.readback_recorded"
    revocation_id: Identifier
    sink: Identifier
    sink_kind: Identifier
    notice_id: Identifier
    outcome: Literal["confirmed", "leaked", "unreachable"]
    final: bool
    covered: NonNegativeInt
    attempts: NonNegativeInt
    leaked_ids: tuple[Identifier, ...] = Field(default=(), strict=False)
    latency_ms: Annotated[float, Field(ge=0)] | None = None
    detail: NonEmptyStr | None = None

    @property
    def stream(self) -> str:
        return self.revocation_id

    @model_validator(mode="after")
    def _consistent(self) -> SinkReadbackRecorded:
        # what an outcome claims must be what it carries: a confirmed sink
        # leaks nothing, a leaked one names what it leaks
        if self.outcome == "leaked" and not self.leaked_ids:
            raise ValueError("leaked_ids: a leaked outcome names the ids the sink still holds")
        if self.outcome != "leaked" and self.leaked_ids:
            raise ValueError(f"leaked_ids: must be empty for a {self.outcome} outcome")
        if self.outcome == "confirmed" and not self.final:
            raise ValueError("final: a confirmed outcome is final")
        if self.outcome != "confirmed" and self.latency_ms is not None:
            raise ValueError("latency_ms: only a confirmed outcome has a latency")
        return self


AnyEvent = Annotated[
    MemorySaved
    | MemoryVerified
    | MemoryVerificationFailed
    | MemoryExpired
    | MemoryInvalidated
    | MemoryErased
    | MemoryIntegrityFailed
    | MemoryResynced
    | MemoryReembedded
    | PolicyVersionChanged
    | RevocationIssued
    | ReadbackConfirmed
    | ReadbackFailed
    | SinkReadbackRecorded,
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(AnyEvent, config=ConfigDict(defer_build=True))  # as ``Model``
EVENT_TYPES: dict[str, type[Event]] = {
    cls.model_fields["type"].default: cls
    for cls in (
        MemorySaved,
        MemoryVerified,
        MemoryVerificationFailed,
        MemoryExpired,
        MemoryInvalidated,
        MemoryErased,
        MemoryIntegrityFailed,
        MemoryResynced,
        MemoryReembedded,
        PolicyVersionChanged,
        RevocationIssued,
        ReadbackConfirmed,
        ReadbackFailed,
        SinkReadbackRecorded,
    )
}


def event_from_parts(type_: str, payload: dict[str, Any], **envelope: Any) -> Event:
    """Validate a stored (upcast) payload back into its typed model."""
    cls = EVENT_TYPES.get(type_)
    if cls is None:
        raise ValueError(f"type: unknown event type {type_!r}")
    return cls.model_validate_json(
        _json_of({"type": type_, **payload, **envelope}),
    )


def _json_of(data: dict[str, Any]) -> str:
    from ._canonical import canonical_json

    return canonical_json(data)
