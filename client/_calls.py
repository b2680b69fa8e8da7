"""Each operation of ``memwarden.engine.Memories`` as an HTTP call: the
request it sends and how its answer becomes the engine's own result, once
``_checks`` has found it is the answer to that request. Written once, run
by the blocking and the asyncio client alike."""

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
    Page,
    RevocationResult,
    SaveResult,
    VerifyResult,
)
from memwarden.engine._tokens import Position
from memwarden.events import format_ts

from . import _checks as checks

# what the answer of an HTTP call becomes
Parse = Callable[[Any], Any]


@dataclass(frozen=True)
class Call:
    """One request. ``idempotent``: sending it twice does what sending it
    once does, so a lost answer may be retried; ``fresh``: a read that takes
    ``min_seq`` in its query (``fresh_body``: in its body; the client adds
    the positions of its last writes where none is given); ``wrote``:
    the positions the answer gives, in the log's order (the client keeps the last)."""

    method: str
    path: str
    parse: Parse
    params: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    idempotent: bool = False
    fresh: bool = False
    fresh_body: bool = False  # a read that takes min_seq in its body (a search: a POST)
    wrote: Callable[[Any], list[Position]] | None = None


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


def _seq(answer: Any) -> list[Position]:
    """The answer's own position (``seq``), which it must give."""
    return [checks.position(checks.obj(answer).get("seq"))]


def _tenant(body: Mapping[str, Any]) -> Any:
    scope = body.get("scope")
    return scope.get("tenant") if isinstance(scope, dict) else None


def _saved(answer: Any, body: Mapping[str, Any], where: str = "answer") -> SaveResult:
    """A save's answer: the memory and tenant the body named, at a position a server can issue."""
    result = checks.record(SaveResult, answer, where)
    checks.same(answer, "memory_id", body.get("memory_id"), where)
    checks.same(answer, "tenant", _tenant(body), where)
    checks.position(result.seq, f"{where}.seq")
    return result


def save(fields: Mapping[str, Any]) -> Call:
    body = save_body(fields)
    return Call("POST", "/v1/memories", lambda a: _saved(a, body), body=body, idempotent=True, wrote=_seq)


def _saved_many(answer: Any, bodies: list[dict[str, Any]]) -> list[SaveResult]:
    saved = checks.items(answer, "saved")
    if len(saved) != len(bodies):
        raise checks.UntrustedAnswer("saved", f"holds {len(saved)} answers for the {len(bodies)} memories sent")
    return [_saved(a, b, f"saved[{i}]") for i, (a, b) in enumerate(zip(saved, bodies, strict=True))]


def save_many(memories: Iterable[Mapping[str, Any]]) -> Call:
    bodies = [save_body(m) for m in memories]
    return Call(
        "POST",
        "/v1/memories/batch",
        lambda a: _saved_many(a, bodies),
        body={"memories": bodies},
        idempotent=True,
        # one transaction: a view that holds any of its events holds them all, the last the surest
        wrote=lambda a: [checks.position(s.get("seq")) for s in checks.items(a, "saved")][-1:],
    )


def get(memory_id: str, tenant: str | None, min_seq: Any) -> Call:
    return Call(
        "GET",
        f"/v1/memories/{_path(memory_id)}",
        lambda a: checks.view(a, tenant=tenant, memory_id=memory_id),
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
        if name in ("ids", "min_seq") and not isinstance(value, str | int):
            value = list(value)
        elif name == "id_prefix" and not isinstance(value, str):
            value = list(value)
        elif name == "where":
            # JSON in the query string; a NaN or an infinity as Python's json
            # writes them (the server reads them back), since a filter may
            # compare with one
            value = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        params[QUERY_PARAMS[name]] = value
    ids = params.get("ids")

    def parse(answer: Any) -> Page[Any]:
        """A query's answer as the Warden's: each memory checked, in a list
        that says whether it was cut at the answer's size bound and where
        the next page starts."""
        views = checks.views(checks.items(answer, "memories"), tenant=tenant, ids=ids, key="memories")
        truncated = answer.get("truncated") is True
        next_offset = answer.get("next_offset") if truncated else None
        if next_offset is not None and (not isinstance(next_offset, int) or isinstance(next_offset, bool)):
            raise checks.UntrustedAnswer("next_offset", "is not a whole number")
        return Page.of(views, truncated=truncated, next_offset=next_offset)

    return Call("GET", "/v1/memories", parse, params, idempotent=True, fresh=True)


def _found(answer: Any, tenant: str, where: str) -> Found:
    view = checks.view(answer, tenant=tenant, where=where)
    score, found_by = answer.get("score"), answer.get("found_by")
    if not isinstance(score, int | float) or not isinstance(found_by, list):
        raise checks.UntrustedAnswer(f"{where}.score", "or found_by is missing")
    return Found(view, score, tuple(found_by), answer.get("similarity"), answer.get("text_rank"))


def search(tenant: str, query: str | None, vector: Any, options: Mapping[str, Any]) -> Call:
    """``POST /v1/memories/search``: a read (sent again safely), fresh as the client's writes."""
    body: dict[str, Any] = {"tenant": tenant, "query": query, "vector": list(vector) if vector is not None else None}
    body.update({k: list(v) if k == "weights" else v for k, v in options.items() if v is not None})
    body = {k: v for k, v in body.items() if v is not None}

    def parse(answer: Any) -> Page[Found]:
        found = [_found(r, tenant, f"results[{i}]") for i, r in enumerate(checks.items(answer, "results"))]
        page = Page.of(found, truncated=answer.get("truncated") is True)
        hidden = answer.get("hidden")
        page.hidden = checks.counts(hidden, "hidden") if hidden is not None else None
        return page

    return Call("POST", "/v1/memories/search", parse, body=body, idempotent=True, fresh_body=True)


def _verified(answer: Any, memory_id: str, tenant: str | None) -> VerifyResult:
    results = checks.items(answer, "results")
    if len(results) != 1:
        raise checks.UntrustedAnswer("results", f"holds {len(results)} answers for the one memory verified")
    result = checks.record(VerifyResult, results[0], "results[0]")
    checks.same(results[0], "memory_id", memory_id, "results[0]")
    checks.same(results[0], "tenant", tenant, "results[0]")
    if result.seq is not None:
        checks.position(result.seq, "results[0].seq")
    return result


def verify(memory_id: str, tenant: str | None, accept: bool) -> Call:
    # a verification appends what it found; sent twice it checks twice, which
    # changes nothing a second time unless the source changed meanwhile
    return Call(
        "POST",
        f"/v1/memories/{_path(memory_id)}/verify",
        lambda a: _verified(a, memory_id, tenant),
        params={"tenant": tenant, "accept": accept},
        wrote=lambda a: [checks.position(r["seq"]) for r in checks.items(a, "results") if r.get("seq") is not None],
    )


def due(limit: int | None) -> Call:
    def parse(answer: Any) -> list[DueItem]:
        return [checks.record(DueItem, d, f"due[{i}]") for i, d in enumerate(checks.items(answer, "due"))]

    return Call("GET", "/v1/due", parse, {"limit": limit}, idempotent=True)


def _explained(answer: Any, memory_id: str, tenant: str | None) -> dict[str, Any]:
    checks.same(checks.obj(answer), "memory_id", memory_id)
    checks.same(answer, "tenant", tenant)
    return answer


def explain(memory_id: str, tenant: str | None, as_of: str | None) -> Call:
    return Call(
        "GET",
        f"/v1/memories/{_path(memory_id)}/explain",
        lambda a: _explained(a, memory_id, tenant),
        {"tenant": tenant, "as_of": as_of},
        idempotent=True,
    )


def erase(memory_id: str | None, user: str | None, tenant: str | None, reason: str) -> Call:
    body = {"memory_id": memory_id, "user": user, "tenant": tenant, "reason": reason}
    return Call(
        "POST",
        "/v1/erasures",
        lambda a: checks.record(ErasureResult, a),
        body={k: v for k, v in body.items() if v is not None},
    )


def revoke(selector: Mapping[str, Any], reason: str) -> Call:
    return Call(
        "POST",
        "/v1/revocations",
        lambda a: checks.record(RevocationResult, a),
        body={"selector": dict(selector), "reason": reason},
        wrote=_seq,
    )


def preview_revocation(selector: Mapping[str, Any]) -> Call:
    return Call("POST", "/v1/revocations/dry-run", checks.obj, body={"selector": dict(selector), "reason": "dry run"})


def revocation(revocation_id: str) -> Call:
    def parse(answer: Any) -> dict[str, Any]:
        checks.same(checks.obj(answer), "revocation_id", revocation_id)
        return answer

    return Call("GET", f"/v1/revocations/{quote(revocation_id, safe='')}", parse, idempotent=True)


def revocations(limit: int, offset: int) -> Call:
    return Call(
        "GET", "/v1/revocations", lambda a: checks.items(a, "revocations"), {"limit": limit, "offset": offset}, True
    )


def set_policy(policy: str, version: int | str) -> Call:
    def parse(answer: Any) -> Position | None:
        checks.same(checks.obj(answer), "policy", policy)
        seq = answer.get("seq")
        return None if seq is None else checks.position(seq)

    return Call(
        "POST",
        f"/v1/policies/{quote(policy, safe='')}",
        parse,
        body={"version": version},
        # the version already current writes nothing: no position to read after
        wrote=lambda a: [] if checks.obj(a).get("seq") is None else _seq(a),
    )


def policies() -> Call:
    return Call("GET", "/v1/policies", lambda a: checks.obj(checks.obj(a).get("policies"), "policies"), idempotent=True)


def tenants() -> Call:
    return Call("GET", "/v1/tenants", lambda a: checks.items(a, "tenants"), idempotent=True)


def _key_saved(answer: Any, agent: str, key: str) -> dict[str, Any]:
    checks.same(checks.obj(answer), "agent", agent)
    checks.same(answer, "key", key)
    checks.position(answer.get("seq"))
    return answer


def memory_save(agent: str, key: str, content: str, tenant: str | None) -> Call:
    return Call(
        "POST",
        "/memory/save",
        lambda a: _key_saved(a, agent, key),
        params={"tenant": tenant},
        body={"agent": agent, "key": key, "content": content},
        wrote=_seq,
    )


def memory_load(agent: str, tenant: str | None, history: bool) -> Call:
    params = {"agent": agent, "tenant": tenant, "history": "1" if history else None}

    def parse(answer: Any) -> dict[str, Any]:
        checks.items(answer, "memories")
        return answer

    return Call("GET", "/memory/load", parse, params, idempotent=True)


def audit_head() -> Call:
    def parse(answer: Any) -> dict[str, Any]:
        checks.position(checks.obj(answer).get("seq"))
        return answer

    return Call("GET", "/v1/audit/head", parse, idempotent=True)
