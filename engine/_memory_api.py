"""The Memory API pair (/memory/save, /memory/load) mapped onto memories.

Existing agent scripts externalise their MEMORY.md files as
``{agent, key, content}``; here each key is a memory of kind
``agent_memory`` in the agent's scope, its content stored byte-exact.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memwarden.events import content_checksum, parse_ts

from ._errors import ChecksumMismatch, InvalidInput, MemoryNotFound

if TYPE_CHECKING:
    from ._warden import Warden

KIND = "agent_memory"


def memory_id_of(agent: str, key: str) -> str:
    return f"mem:{agent}:{key}"


def _envelope(content: str) -> dict[str, Any] | None:
    """Content that is itself JSON with ``text`` (and maybe ``checksum``)."""
    try:
        data = json.loads(content)
    except ValueError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("text"), str) else None


def save(warden: Warden, *, tenant: str, agent: str, key: str, content: str) -> dict[str, Any]:
    for field, value in (("agent", agent), ("key", key)):
        if not value or any(c.isspace() or ord(c) < 32 for c in value):
            raise InvalidInput(field, "must be non-empty, without spaces or control characters")
    envelope = _envelope(content)
    source_url = f"memory-api://{agent}/{key}"
    branch = fetched_at = None
    if envelope is not None:
        given = envelope.get("checksum")
        if given is not None:
            actual = content_checksum(envelope["text"])
            if given != actual:
                raise ChecksumMismatch("content.checksum", str(given), actual)
        if isinstance(envelope.get("source"), str) and envelope["source"].startswith(("http://", "https://")):
            source_url = envelope["source"]
        if isinstance(envelope.get("branch"), str) and envelope["branch"]:
            branch = envelope["branch"]
        fetched_at = _saved_at(envelope.get("saved_at"), warden.clock.now())
    result = warden.save(
        memory_id=memory_id_of(agent, key),
        kind=KIND,
        summary=key,
        content=content,
        source_url=source_url,
        scope={"tenant": tenant, "agent": agent},
        fetched_at=fetched_at,
        branch=branch,
        actor=f"agent:{agent}",
    )
    return {
        "status": "saved",
        "agent": agent,
        "key": key,
        "version": result.version,
        "checksum": result.checksum,
        "seq": result.seq,
    }


def _saved_at(value: Any, now: datetime) -> datetime | None:
    # the client's own saved_at is its fetch time when it is a sane timestamp
    if not isinstance(value, str):
        return None
    try:
        when = parse_ts(value)
    except ValueError:
        return None
    return when if when <= now else None


def load(warden: Warden, *, tenant: str, agent: str, history: bool = False) -> dict[str, Any]:
    prefix = memory_id_of(agent, "")
    views = warden.query(tenant=tenant, agent=agent, kind=KIND, include_unusable=True, limit=10_000)
    memories = []
    for view in sorted(views, key=lambda v: v.memory_id):
        if not view.memory_id.startswith(prefix):
            continue
        entry: dict[str, Any] = {
            "key_name": view.memory_id[len(prefix) :],
            "content": view.content,
            "saved_at": view.fetched_at,
            "checksum": view.checksum,
            "status": "usable" if view.usable else view.reason,
            "version": view.version,
        }
        if history:
            # older texts are served only while the memory itself may be used
            entry["history"] = [
                {**v, "content": v["content"] if view.usable else None} for v in versions(warden, view.memory_id)
            ]
        memories.append(entry)
    return {"memories": memories}


def versions(warden: Warden, memory_id: str) -> list[dict[str, Any]]:
    """Every saved version, oldest first, with its text while it is kept."""
    out = []
    for event in warden.log.read(stream=memory_id, types=("memory.saved",)):
        checksum = event.payload["content_checksum"]
        out.append(
            {
                "version": event.payload["version"],
                "saved_at": event.recorded_at,
                "checksum": checksum,
                "content": warden.blobs.get_text(checksum),
            }
        )
    if not out:
        raise MemoryNotFound(memory_id)
    return out
