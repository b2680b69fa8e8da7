"""Request bodies of the HTTP API: strict, unknown fields refused."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


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
    derived_from: list[str] = Field(default_factory=list, max_length=1000)


class SaveManyBody(Body):
    memories: list[SaveBody] = Field(min_length=1, max_length=10_000)


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
    everything: bool = False


class RevokeBody(Body):
    selector: SelectorBody
    reason: str = Field(min_length=1)
    wait: bool = False


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
