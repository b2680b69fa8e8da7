"""The tool-result cache: a hit only when tool, version, input and scope all match."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from memwarden.events import Scope, canonical_json, sha256_hex
from memwarden.projections import row_of

from ._core import Core
from ._errors import InvalidInput, MemoryNotFound
from ._reading import get
from ._rights import Principal, operation, scope_for_save
from ._saving import save
from ._validation import build
from ._views import MemoryView, SaveResult


@operation("save")
def cache_put(
    core: Core,
    *,
    tool: str,
    tool_version: str,
    input_hash: str,
    scope: Scope | dict[str, Any],
    content: str,
    source_url: str,
    ttl: timedelta | str | None = None,
    kind: str = "tool_result",
    actor: str | None = None,
    caller: Principal,
) -> SaveResult:
    """Store a tool result under its full cache key (tool, version, input, scope)."""
    scope_model = _scope(caller, scope)
    key = _cache_id(tool, tool_version, input_hash, scope_model)
    return save(
        core,
        memory_id=key,
        kind=kind,
        summary=f"{tool} {tool_version} result for {input_hash}",
        content=content,
        source_url=source_url,
        scope=scope_model,
        ttl=ttl,
        cache_key={"tool": tool, "tool_version": tool_version, "input_hash": input_hash},
        actor=actor,
        caller=caller,
    )


@operation("read")
def cache_get(
    core: Core,
    *,
    tool: str,
    tool_version: str,
    input_hash: str,
    scope: Scope | dict[str, Any],
    caller: Principal,
) -> tuple[bool, MemoryView | None, str]:
    """(hit, view, reason): a hit only if every key part matches and it is
    usable. A key the caller may not read is a miss, as one never stored."""
    try:
        scope_model = _scope(caller, scope)
    except PermissionError:
        return False, None, "miss"
    key = _cache_id(tool, tool_version, input_hash, scope_model)
    try:
        view = get(core, key, tenant=scope_model.tenant, caller=caller)
    except MemoryNotFound:
        return False, None, "miss"
    with core.reading() as reader:
        row = row_of(reader, caller.access, scope_model.tenant, key)
    expected = {
        **scope_model.model_dump(),
        "tool": scope_model.tool or tool,
        "tool_version": tool_version,
        "input_hash": input_hash,
    }
    if row is None or any(getattr(row, k) != v for k, v in expected.items()):
        return False, view, "key_mismatch"
    if not view.usable:
        return False, view, view.reason or "not_usable"
    return True, view, "hit"


def _scope(caller: Principal, scope: Scope | dict[str, Any]) -> Scope:
    """The scope a key is kept under: as the caller saves into it (a bound
    key's agent filled in), so a put and a get by the same key agree."""
    given = scope.model_dump(exclude_none=True) if isinstance(scope, Scope) else dict(scope or {})
    return build(Scope, "scope", **scope_for_save(caller, given))


def _cache_id(tool: str, tool_version: str, input_hash: str, scope: Scope) -> str:
    for field, value in (("tool", tool), ("tool_version", tool_version), ("input_hash", input_hash)):
        if not isinstance(value, str) or not value:
            raise InvalidInput(field, "is required")
    digest = sha256_hex(canonical_json([tool, tool_version, input_hash, scope.model_dump()]))
    return f"cache:{digest[:40]}"
