"""The values events carry: a memory's scope, the parents a derived memory
names, a tool run's cache key, a revocation's selector, and the
time-ordered ids of events and memories.

They are validated as the events are (frozen, keyword-only, strict), and
the engine takes them as its arguments before any event is built.
"""

from __future__ import annotations

import secrets
import threading
import time

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._types import Identifier, NonEmptyStr, PositiveInt


def new_id(prefix: str = "") -> str:
    """A unique id that sorts by creation time, like a UUIDv7: 14 hex digits
    of microseconds since the epoch, then 72 random bits.

    The log's event_id index takes each new id near its right edge, so a
    batch dirties a handful of index pages; random ids (uuid4) scattered
    each batch over a page apiece, and the commit wrote them all.
    """
    global _last_micros
    with _id_clock:
        # two ids in one microsecond would sort by their random bits: step on
        _last_micros = max(time.time_ns() // 1000, _last_micros + 1)
        micros = _last_micros
    return f"{prefix}{micros:014x}{secrets.token_hex(9)}"


_id_clock = threading.Lock()
_last_micros = 0


class Model(BaseModel):
    # defer_build: each model's validator is built when first used, not at
    # import; a command that validates no event (a read) never builds one
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)


class Scope(Model):
    """Who a memory belongs to and under which permission it was obtained."""

    tenant: Identifier
    project: Identifier | None = None
    permission: Identifier | None = None
    user: Identifier | None = None
    agent: Identifier | None = None
    tool: Identifier | None = None


class ParentRef(Model):
    memory_id: Identifier
    version: PositiveInt


class CacheKey(Model):
    tool: Identifier
    tool_version: NonEmptyStr
    input_hash: NonEmptyStr


class Selector(Model):
    """What a revocation covers. Every given field must match (AND)."""

    tenant: Identifier | None = None
    project: Identifier | None = None
    permission: Identifier | None = None
    user: Identifier | None = None
    agent: Identifier | None = None
    tool: Identifier | None = None
    kind: Identifier | None = None
    source_prefix: NonEmptyStr | None = None
    ids: tuple[Identifier, ...] = Field(default=(), strict=False)
    everything: bool = False

    @model_validator(mode="after")
    def _not_empty(self) -> Selector:
        named = [k for k, v in self.model_dump().items() if v not in (None, (), False)]
        if self.everything and len(named) > 1:
            raise ValueError("'everything' cannot be combined with other fields")
        if not named:
            raise ValueError(
                "an empty selector is refused; name at least one of tenant, project, "
                "permission, user, agent, tool, kind, source_prefix, ids (or everything)"
            )
        return self
