"""Upcasting: stored payloads of an older schema read as the current one.
Upcasters are registered per (event type, schema version); the event models
and the schema-1 memory upcaster load with the first event decoded."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ._canonical import content_checksum

if TYPE_CHECKING:
    from ._models import Event

TenantOf = Callable[[str], "str | None"]


class UpcastContext(NamedTuple):
    """What an upcaster may know beyond the payload: the event's stream, and
    the tenant of a stream written before memories had one in their identity."""

    stream: str
    tenant_of: TenantOf


Upcaster = Callable[[dict[str, Any], UpcastContext], dict[str, Any]]
_UPCASTERS: dict[tuple[str, int], Upcaster] = {}


def register_upcaster(event_type: str, from_version: int, upcaster: Upcaster) -> None:
    """Teach the reader to lift ``event_type`` payloads from ``from_version``.

    Stored events are never rewritten (the hash covers them as written);
    old schema versions are lifted on every read, one version at a time.
    """
    _UPCASTERS[(event_type, from_version)] = upcaster


def current_schema_version(event_type: str) -> int:
    cls = _event_types().get(event_type)
    return cls.SCHEMA_VERSION if cls is not None else 1


def _no_legacy(stream: str) -> str | None:
    return None


def upcast(
    event_type: str, schema_version: int, payload: dict[str, Any], context: UpcastContext | None = None
) -> dict[str, Any]:
    target = current_schema_version(event_type)
    context = context or UpcastContext("", _no_legacy)
    while schema_version < target:
        step = _UPCASTERS.get((event_type, schema_version))
        if step is None:
            raise ValueError(f"no upcaster for {event_type} from schema_version {schema_version} to {target}")
        payload = step(payload, context)
        schema_version += 1
    return payload


class LegacyTenants:
    """The tenant of each memory stream written before schema 2 (when a
    stream was the bare memory id): the tenant of the stream's first save.

    ``load`` yields (stream, tenant) of those first saves; it runs when a
    stream is not known yet (a database holds a fixed set of them; an
    import may add more, which the next miss finds). A streaming reader
    (a JSONL file read in seq order) teaches it with ``learn`` instead.
    """

    def __init__(self, load: Callable[[], Iterable[tuple[str, str]]] | None = None) -> None:
        self._known: dict[str, str] = {}
        self._load = load

    def learn(self, stream: str, tenant: str) -> None:
        self._known.setdefault(stream, tenant)

    def __call__(self, stream: str) -> str | None:
        found = self._known.get(stream)
        if found is None and self._load is not None:
            for name, tenant in self._load():
                self._known.setdefault(name, tenant)
            found = self._known.get(stream)
        return found


def _memory_v1_to_v2(payload: dict[str, Any], context: UpcastContext) -> dict[str, Any]:
    """Schema 1 memory events had no tenant: each gets its memory's, the
    tenant of the stream's first save (a save into another tenant's id, which
    schema 1 allowed, stays with the memory it was written into)."""
    tenant = context.tenant_of(context.stream)
    scope = payload.get("scope")
    if tenant is None and isinstance(scope, dict):
        tenant = scope.get("tenant")  # the first save itself, read on its own
    if not isinstance(tenant, str):
        raise ValueError(f"the memory of stream {context.stream!r} has no first save to take its tenant from")
    out = {**payload, "tenant": tenant}
    if isinstance(scope, dict):
        out["scope"] = {**scope, "tenant": tenant}
    if "summary" in out:
        # the summary left the payload in schema 2 (it is text an erasure
        # destroys); what the chain covered of it stays as its checksum
        summary = out.pop("summary")
        out["summary_checksum"] = content_checksum(str(summary))
    return out


@functools.cache
def _event_types() -> Mapping[str, type[Event]]:
    """The event models, loaded with the first event decoded or written (a
    command that reads only the views, ``memwarden get``, never loads them
    or pydantic), and with them the upcaster of schema-1 memory events (one
    registered for the same step first stays)."""
    from ._models import EVENT_TYPES

    for name in EVENT_TYPES:
        if name.startswith("memory."):
            _UPCASTERS.setdefault((name, 1), _memory_v1_to_v2)
    return EVENT_TYPES
