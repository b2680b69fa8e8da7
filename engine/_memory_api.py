"""The Memory API pair (/memory/save, /memory/load) mapped onto memories.

Existing agent scripts externalise their MEMORY.md files as
``{agent, key, content}``; here each key is a memory of kind
``agent_memory`` in the agent's scope, its content stored byte-exact.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from memwarden.events import content_checksum, parse_ts
from memwarden.projections import SCOPE_COLUMNS, blocking_revocation, fetched_at

from ._core import Core
from ._errors import ChecksumMismatch, InvalidInput, MemoryNotFound
from ._limits import MAX_PAGE, TooLarge, encoded, normal_checksum
from ._memory_ids import key_name_of, memory_id_of
from ._reading import query
from ._rights import Principal, confine_agent, one_tenant, operation
from ._saving import save as save_memory
from ._views import MemoryView

KIND = "agent_memory"


def _envelope(content: str, max_depth: int) -> dict[str, Any] | None:
    """Content that is itself JSON with ``text`` (and maybe ``checksum``).
    Content is stored as given either way; JSON deeper than the limit is
    refused, since every reader that parses it would have to go as deep."""
    if not content.lstrip().startswith(("{", "[")):
        return None
    try:
        data = json.loads(content)
    except RecursionError:
        raise TooLarge("content", f"is JSON nested deeper than {max_depth} levels (limits.max_json_depth)") from None
    except ValueError:
        return None
    if json_depth(data) > max_depth:
        raise TooLarge("content", f"is JSON nested deeper than {max_depth} levels (limits.max_json_depth)")
    if not isinstance(data, dict) or ("text" not in data and "checksum" not in data):
        return None
    if not isinstance(data.get("text"), str):
        # a checksum beside no text would be recorded as if it vouched for something
        raise InvalidInput("content.text", "must be text when the content is an envelope with a checksum")
    return data


def json_depth(value: Any) -> int:
    """How deeply ``value``'s arrays and objects nest (walked with a stack)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in item)
    return deepest


MAX_NAME = 512  # an agent name or key, as any identifier of a memory


@operation("save")
def save(
    warden: Core, *, tenant: str | None = None, agent: str, key: str, content: str, caller: Principal
) -> dict[str, Any]:
    """``/memory/save``: the memory (tenant, agent, key), a new version each
    time. ``tenant`` may be left out by a key bound to one tenant."""
    for field, value in (("agent", agent), ("key", key)):
        if not isinstance(value, str) or not value or any(c.isspace() or ord(c) < 32 for c in value):
            raise InvalidInput(field, "must be non-empty, without spaces or control characters")
        if len(value) > MAX_NAME:  # the key becomes the summary, the pair the memory id: named here, not there
            raise InvalidInput(field, f"is longer than {MAX_NAME} characters")
        encoded(field, value)
    tenant = one_tenant(caller, tenant)
    if not isinstance(content, str):
        raise InvalidInput("content", "must be text")
    warden.limits.check_text("content", content, "max_content_bytes")
    envelope = _envelope(content, warden.limits.max_json_depth)
    source_url = f"memory-api://{agent}/{key}"
    branch = fetched_at = None
    if envelope is not None:
        given = envelope.get("checksum")
        if given is not None:
            encoded("content.text", envelope["text"])
            actual = content_checksum(envelope["text"])
            if normal_checksum("content.checksum", given) != actual:
                raise ChecksumMismatch("content.checksum", str(given), actual)
        if isinstance(envelope.get("source"), str) and envelope["source"].startswith(("http://", "https://")):
            source_url = envelope["source"]
        if isinstance(envelope.get("branch"), str) and envelope["branch"]:
            branch = envelope["branch"]
        fetched_at = _saved_at(envelope.get("saved_at"), warden.clock.now())
    result = save_memory(
        warden,
        memory_id=memory_id_of(agent, key),
        kind=KIND,
        summary=key,
        content=content,
        source_url=source_url,
        scope={"tenant": tenant, "agent": agent},
        fetched_at=fetched_at,
        branch=branch,
        actor=f"agent:{agent}",
        caller=caller,
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


@operation("read")
def load(
    warden: Core, *, tenant: str | None = None, agent: str, history: bool = False, caller: Principal
) -> dict[str, Any]:
    """``/memory/load``: every key of an agent; texts only while they may be used."""
    if not isinstance(agent, str) or not agent:
        raise InvalidInput("agent", "is required")
    tenant = one_tenant(caller, tenant)
    agent = confine_agent(caller, agent) or agent
    prefix = memory_id_of(agent, "")
    views: list[MemoryView] = []
    while len(views) < MAX_PAGE:  # every key (up to a page's count), paged on past an answer's size bound
        found = query(
            warden,
            tenant=tenant,
            agent=agent,
            kind=KIND,
            include_unusable=True,
            limit=MAX_PAGE - len(views),
            offset=len(views),
            caller=caller,
        )
        views.extend(found)
        if not found.truncated:
            break
    memories, hidden = [], []
    for view in sorted(views, key=lambda v: v.memory_id):
        if not view.memory_id.startswith(prefix):
            continue
        entry: dict[str, Any] = {
            "key_name": key_name_of(view.memory_id[len(prefix) :]),
            "content": view.content,
            # the time the content stands for: the agent's own saved_at when its
            # envelope gave a sane one, else when memwarden took the save (a
            # re-verification moves it); each version in ``history`` says it
            # the same way, beside ``recorded_at``, when the log recorded it
            "saved_at": view.fetched_at,
            "checksum": view.checksum,
            "status": "usable" if view.usable else view.reason,
            "version": view.version,
        }
        if history:
            # no text while the memory itself may not be used; and never the
            # text of a version revoked, invalidated or quarantined
            entry["history"] = [
                {**v, "content": v["content"] if view.usable else None}
                for v in versions(warden, tenant, view.memory_id, reveal=caller.is_staff)
            ]
        memories.append(entry)
        if not view.usable:
            # beside ``memories`` (which clients reading only it keep): what is
            # withheld and why, so a MEMORY.md never vanishes without a reason
            hidden.append({"key_name": entry["key_name"], "reason": view.reason, "action": view.action})
    return {"memories": memories, "hidden": hidden}


def versions(warden: Core, tenant: str, memory_id: str, *, reveal: bool = False) -> list[dict[str, Any]]:
    """Every saved version, oldest first: ``saved_at`` as ``load`` says it
    (the time the content stands for) and ``recorded_at`` (when the log
    recorded the save), with its text only while that
    version may still be served: not covered by any revocation (whatever
    was saved after it), never invalidated or quarantined, not erased, and
    still matching its checksum. An erased version shows no checksum, and
    one that may not be served shows one only when ``reveal`` (staff)."""
    saved: dict[int, dict[str, Any]] = {}
    tainted: set[int] = set()
    erased_through = 0
    for event in warden.log.memory_events(tenant, memory_id):
        p = event.payload
        if event.type == "memory.saved":
            scope = p["scope"]
            saved[p["version"]] = {
                "version": p["version"],
                "seq": event.seq,
                "recorded_at": event.recorded_at,
                "checksum": p["content_checksum"],
                "fetched_at": fetched_at(p, event),
                "row": {
                    "memory_id": memory_id,
                    "kind": p["kind"],
                    "source_url": p["source_url"],
                    **{c: scope.get(c) for c in SCOPE_COLUMNS},
                },
            }
        elif event.type == "memory.verified" and p["version"] in saved:
            saved[p["version"]]["fetched_at"] = fetched_at(p, event)
        elif event.type in ("memory.invalidated", "memory.integrity_failed"):
            tainted.add(p["version"])
        elif event.type == "memory.erased":
            erased_through = max(erased_through, p.get("version") or max(saved, default=0))
    if not saved:
        raise MemoryNotFound(memory_id)
    with warden.reading() as view:
        revocations = view.revocations([tenant])[tenant]
    out = []
    for version, info in sorted(saved.items()):
        row = {**info["row"], "fetched_at": info["fetched_at"]}
        revoked = blocking_revocation(revocations, row, recorded_seq=info["seq"]) is not None
        erased = version <= erased_through
        servable = not (erased or revoked or version in tainted)
        out.append(
            {
                "version": version,
                "saved_at": info["fetched_at"],
                "recorded_at": info["recorded_at"],
                "checksum": info["checksum"] if not erased and (servable or reveal) else None,
                "content": warden.texts.content(tenant, memory_id, version, info["checksum"]) if servable else None,
            }
        )
    return out
