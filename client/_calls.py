"""Each operation of ``memwarden.engine.Memories`` as an HTTP call: the
request it sends and how its answer becomes the engine's own result. Written
once, run by the blocking and the asyncio client alike."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from memwarden.engine import (
    DueItem,
    ErasureResult,
    Found,
    MemoryView,
    Page,
    RevocationResult,
    SaveResult,
    VerifyResult,
)
from memwarden.events import format_ts

# what the answer of an HTTP call becomes
Parse = Callable[[Any], Any]


@dataclass(frozen=True)
class Call:
    """One request. ``idempotent``: sending it twice does what sending it
    once does, so a lost answer may be retried; ``fresh``: a read that takes
    ``min_seq`` (the client adds the seq of its last write); ``wrote``: the
    answer's seqs move the client's seq forward."""

    method: str
    path: str
    parse: Parse
    params: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    idempotent: bool = False
    fresh: bool = False
    wrote: Callable[[Any], list[int]] | None = None


def _path(memory_id: str) -> str:
    if not isinstance(memory_id, str) or not memory_id:
        from memwarden.engine import MemoryNotFound

        raise MemoryNotFound(str(memory_id))
    return quote(memory_id, safe="")


def _json_value(value: Any) -> Any:
    """A save's field as JSON carries it: times in the log's format, a
    duration in seconds (``90s``)."""
    if isinstance(value, datetime):
        return format_ts(value)
    if isinstance(value, timedelta):
        return f"{int(value.total_seconds())}s"
    if isinstance(value, tuple | list):
        return [_json_value(v) for v in value]
    if hasattr(value, "tolist"):  # a numpy array or number (an embedding model's answer)
        return value.tolist()
    if hasattr(value, "model_dump"):  # a Scope, a ParentRef
        return value.model_dump(mode="json", exclude_none=True)
    return value


SAVE_FIELDS = (
    "memory_id",
    "kind",
    "summary",
    "content",
    "source_url",
    "scope",
    "fetched_at",
    "expires_at",
    "ttl",
    "verified_at",
    "source",
    "branch",
    "policy",
    "revocation_version",
    "checksum",
    "cache_key",
    "event_id",
    "derived_from",
    "embedding",
    "embeddings",
)


def save_body(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``POST /v1/memories``'s body from ``save``'s keyword arguments, with an
    event id of the client's own when none is given: the server keeps a save
    once per event id, so a save whose answer was lost is sent again safely."""
    unknown = set(fields) - set(SAVE_FIELDS)
    if unknown:
        from memwarden.engine import InvalidInput

        raise InvalidInput(sorted(unknown)[0], "is not a field of a save over HTTP")
    body = {name: _json_value(value) for name, value in fields.items() if value is not None}
    if isinstance(body.get("derived_from"), str):
        body["derived_from"] = [body["derived_from"]]
    if "derived_from" in body:
        body["derived_from"] = [p if isinstance(p, str) else p["memory_id"] for p in body["derived_from"]]
    body.setdefault("event_id", f"cl_{uuid.uuid4().hex}")
    return body


def _seq(answer: Any) -> list[int]:
    return [answer["seq"]] if isinstance(answer, dict) and isinstance(answer.get("seq"), int) else []


def save(fields: Mapping[str, Any]) -> Call:
    return Call("POST", "/v1/memories", lambda a: SaveResult(**a), body=save_body(fields), idempotent=True, wrote=_seq)


def save_many(memories: Iterable[Mapping[str, Any]]) -> Call:
    return Call(
        "POST",
        "/v1/memories/batch",
        lambda a: [SaveResult(**s) for s in a["saved"]],
        body={"memories": [save_body(m) for m in memories]},
        idempotent=True,
        wrote=lambda a: [s["seq"] for s in a.get("saved", [])],
    )


def get(memory_id: str, tenant: str | None, min_seq: int | None) -> Call:
    return Call(
        "GET",
        f"/v1/memories/{_path(memory_id)}",
        lambda a: MemoryView(**a),
        params={"tenant": tenant, "min_seq": min_seq},
        idempotent=True,
        fresh=True,
    )


QUERY_PARAMS = {
    "project": "project",
    "permission": "permission",
    "user": "user",
    "agent": "agent",
    "tool": "tool",
    "kind": "kind",
    "text": "text",
    "include_unusable": "all",
    "limit": "limit",
    "min_seq": "min_seq",
    "with_content": "content",
    "ids": "ids",
    "status": "status",
    "offset": "offset",
    "id_prefix": "id_prefix",
    "where": "where",
}


def query(tenant: str, filters: Mapping[str, Any]) -> Call:
    unknown = set(filters) - set(QUERY_PARAMS)
    if unknown:
        from memwarden.engine import InvalidInput

        raise InvalidInput(sorted(unknown)[0], "is not a filter of a query")
    params: dict[str, Any] = {"tenant": tenant}
    for name, value in filters.items():
        if value is None:
            continue
        if name == "ids" or (name == "id_prefix" and not isinstance(value, str)):
            value = list(value)
        elif name == "where":
            # JSON in the query string; a NaN or an infinity as Python's json
            # writes them (the server reads them back), since a filter may
            # compare with one
            value = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        params[QUERY_PARAMS[name]] = value
    return Call("GET", "/v1/memories", _page, params, idempotent=True, fresh=True)


def _page(answer: dict[str, Any]) -> Page[MemoryView]:
    """A query's answer as the Warden's: a list that says whether it was
    cut at the answer's size bound and where the next page starts."""
    views = [MemoryView(**m) for m in answer["memories"]]
    return Page.of(views, truncated=bool(answer.get("truncated")), next_offset=answer.get("next_offset"))


_FOUND_KEYS = ("score", "found_by", "similarity", "text_rank")


def _found(answer: dict[str, Any]) -> Found:
    view = MemoryView(**{k: v for k, v in answer.items() if k not in _FOUND_KEYS})
    return Found(view, answer["score"], tuple(answer["found_by"]), answer.get("similarity"), answer.get("text_rank"))


def search(tenant: str, query: str | None, vector: Any, options: Mapping[str, Any]) -> Call:
    """``POST /v1/memories/search``: a read (sent again safely), fresh as the client's writes."""
    body: dict[str, Any] = {"tenant": tenant, "query": query, "vector": list(vector) if vector is not None else None}
    body.update({k: list(v) if k == "weights" else v for k, v in options.items() if v is not None})
    body = {k: v for k, v in body.items() if v is not None}
    return Call("POST", "/v1/memories/search", lambda a: [_found(r) for r in a["results"]], body=body, idempotent=True)


def verify(memory_id: str, tenant: str | None, accept: bool) -> Call:
    # a verification appends what it found; sent twice it checks twice, which
    # changes nothing a second time unless the source changed meanwhile
    return Call(
        "POST",
        f"/v1/memories/{_path(memory_id)}/verify",
        lambda a: VerifyResult(**a["results"][0]),
        params={"tenant": tenant, "accept": accept},
        wrote=lambda a: [r["seq"] for r in a.get("results", []) if isinstance(r.get("seq"), int)],
    )


def due(limit: int | None) -> Call:
    return Call("GET", "/v1/due", lambda a: [DueItem(**d) for d in a["due"]], {"limit": limit}, idempotent=True)


def explain(memory_id: str, tenant: str | None, as_of: str | None) -> Call:
    return Call(
        "GET",
        f"/v1/memories/{_path(memory_id)}/explain",
        lambda a: a,
        {"tenant": tenant, "as_of": as_of},
        idempotent=True,
    )


def erase(memory_id: str | None, user: str | None, tenant: str | None, reason: str) -> Call:
    body = {"memory_id": memory_id, "user": user, "tenant": tenant, "reason": reason}
    return Call(
        "POST", "/v1/erasures", lambda a: ErasureResult(**a), body={k: v for k, v in body.items() if v is not None}
    )


def revoke(selector: Mapping[str, Any], reason: str) -> Call:
    fields = RevocationResult.__dataclass_fields__
    return Call(
        "POST",
        "/v1/revocations",
        lambda a: RevocationResult(**{k: a[k] for k in fields if k in a}),
        body={"selector": dict(selector), "reason": reason},
        wrote=_seq,
    )


def preview_revocation(selector: Mapping[str, Any]) -> Call:
    return Call("POST", "/v1/revocations/dry-run", lambda a: a, body={"selector": dict(selector), "reason": "dry run"})


def revocation(revocation_id: str) -> Call:
    return Call("GET", f"/v1/revocations/{quote(revocation_id, safe='')}", lambda a: a, idempotent=True)


def revocations(limit: int, offset: int) -> Call:
    return Call("GET", "/v1/revocations", lambda a: a["revocations"], {"limit": limit, "offset": offset}, True)


def set_policy(policy: str, version: int | str) -> Call:
    return Call(
        "POST", f"/v1/policies/{quote(policy, safe='')}", lambda a: a["seq"], body={"version": version}, wrote=_seq
    )


def policies() -> Call:
    return Call("GET", "/v1/policies", lambda a: a["policies"], idempotent=True)


def tenants() -> Call:
    return Call("GET", "/v1/tenants", lambda a: a["tenants"], idempotent=True)


def memory_save(agent: str, key: str, content: str, tenant: str | None) -> Call:
    return Call(
        "POST",
        "/memory/save",
        lambda a: a,
        params={"tenant": tenant},
        body={"agent": agent, "key": key, "content": content},
        wrote=_seq,
    )


def memory_load(agent: str, tenant: str | None, history: bool) -> Call:
    params = {"agent": agent, "tenant": tenant, "history": "1" if history else None}
    return Call("GET", "/memory/load", lambda a: a, params, idempotent=True)


def audit_head() -> Call:
    return Call("GET", "/v1/audit/head", lambda a: a, idempotent=True)
