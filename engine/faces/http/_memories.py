"""The memories' routes: save one or a batch, list, search, verify, explain
and read one, what is due; and the Memory API pair (``/memory/save``,
``/memory/load``), a key's content by agent and key."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import FastAPI, Query
from fastapi.responses import JSONResponse
from memwarden.engine import MAX_PAGE, InvalidInput, Warden, refuse_local_source

from . import _responses as R
from ._guard import Caller, MinSeq
from ._models import MemoryApiSave, SaveBody, SaveManyBody, Unchecked, parsed
from ._responses import documented
from ._search import install_search_routes


def where_of(text: str | None) -> Any:
    """A query's ``where`` as the query string carries it: JSON text (the
    client's encoder writes a NaN or an infinity as Python's json does)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidInput("where", f"is not JSON: {exc}") from None


def install_memory_routes(app: FastAPI, warden: Warden, *, allow_local_sources: bool) -> None:
    """The ``/v1/memories`` routes and ``/v1/due``; ``allow_local_sources``
    (development) lets a save name a file or git source or a local address."""

    def save_fields(body: SaveBody) -> dict[str, Any]:
        """``save``'s arguments from a body (the caller's scope is the engine's to check)."""
        return dict(
            memory_id=body.memory_id,
            kind=body.kind,
            summary=body.summary,
            content=body.content,
            source_url=body.source_url,
            scope=body.scope.model_dump(exclude_none=True),
            fetched_at=body.fetched_at,
            expires_at=body.expires_at,
            ttl=body.ttl,
            verified_at=body.verified_at,
            source=body.source,
            branch=body.branch,
            policy=body.policy,
            revocation_version=body.revocation_version,
            checksum=body.checksum,
            cache_key=body.cache_key.model_dump() if body.cache_key else None,
            event_id=body.event_id,
            derived_from=body.derived_from,
            embedding=body.embedding,
            embeddings=body.embeddings,
        )

    def sources_allowed(fields: Mapping[str, Any]) -> None:
        if not allow_local_sources:
            refuse_local_source(fields["source_url"], fields.get("source"))

    @app.post("/v1/memories", tags=["memories"], **documented(R.Saved, 201, 409))
    def save_memory(body: SaveBody, who: Caller) -> dict[str, Any]:
        """Record a memory (agents, in their own tenants)."""
        fields = save_fields(body)
        sources_allowed(fields)
        return warden.positions(who).saved(warden.save(**fields, caller=who)).as_dict()

    @app.post("/v1/memories/batch", tags=["memories"], **documented(R.SavedMany, 201, 409))
    def save_memories(body: Annotated[SaveManyBody, Unchecked], who: Caller) -> JSONResponse:
        """Record many memories in one transaction, all or none: a refusal
        (422 ``batch_refused``) lists each refused memory by index and field."""
        # checked and answered here, in the worker thread: the event loop only reads the bytes
        fields = [save_fields(item) for item in parsed(SaveManyBody, body).memories]
        saved = warden.save_many(fields, caller=who, check=sources_allowed)
        positions = warden.positions(who)
        return JSONResponse({"saved": [positions.saved(r).as_dict() for r in saved]}, status_code=201)

    @app.get("/v1/memories", tags=["memories"], **documented(R.Memories, 200, 409))
    def query_memories(
        who: Caller,
        tenant: str,
        project: str | None = None,
        permission: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        tool: str | None = None,
        kind: str | None = None,
        text: str | None = None,
        all: bool = False,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
        min_seq: MinSeq = None,
        content: bool = True,
        ids: Annotated[list[str] | None, Query()] = None,
        status: str | None = None,
        offset: Annotated[int, Query(ge=0, le=100_000)] = 0,
        id_prefix: Annotated[list[str] | None, Query()] = None,
        where: str | None = None,
    ) -> dict[str, Any]:
        """Usable memories in a scope (``all=true``: every memory and why not);
        ``status`` narrows to the view's stored status, ``offset`` skips that
        many answers (a page of a listing); ``id_prefix`` (repeatable) keeps
        the ids starting with one, ``where`` (a JSON object, LangGraph's
        filter language) the memories whose JSON content passes it, both
        counted before ``limit`` and ``offset``. An answer holds at most
        ``limits.max_answer_bytes`` of content: past it, ``truncated`` is true
        and the next page starts at ``next_offset``."""
        positions = warden.positions(who)
        with positions.waiting():
            views = warden.query(
                tenant=tenant,
                project=project,
                permission=permission,
                user=user,
                agent=agent,
                tool=tool,
                kind=kind,
                text=text,
                include_unusable=all,
                limit=limit,
                min_seq=positions.taken(min_seq),
                with_content=content,
                ids=ids,
                status=status,
                offset=offset,
                id_prefix=id_prefix,
                where=where_of(where),
                caller=who,
            )
        return {"memories": [positions.memory(v.as_dict()) for v in views], **views.told()}

    install_search_routes(app, warden)

    # ids may hold "/" (sent as %2F): the routes take the rest of the path,
    # and the plain read is declared last so ".../explain" is not read as an id
    @app.post("/v1/memories/{memory_id:path}/verify", tags=["memories"], **documented(R.Verifications, 200, 404))
    def verify_memory(memory_id: str, who: Caller, tenant: str | None = None, accept: bool = False) -> dict[str, Any]:
        """Re-check a memory against its source."""
        verified = warden.verify(memory_id, tenant=tenant, caller=who, accept=accept)
        return {"results": [warden.positions(who).verified(verified).as_dict()]}

    @app.get("/v1/memories/{memory_id:path}/explain", tags=["auditors"], **documented(R.Explanation, 200, 404))
    def explain_memory(
        memory_id: str, who: Caller, tenant: str | None = None, as_of: str | None = None
    ) -> dict[str, Any]:
        """The memory's history and why it is (not) usable (for an agent key,
        its steps in order without their seqs, and ``seq`` a token)."""
        return warden.positions(who).explained(warden.explain(memory_id, tenant=tenant, caller=who, as_of=as_of))

    @app.get("/v1/memories/{memory_id:path}", tags=["memories"], **documented(R.Memory, 200, 404, 409))
    def get_memory(memory_id: str, who: Caller, tenant: str | None = None, min_seq: MinSeq = None) -> dict[str, Any]:
        """One memory, its text checked now; ``usable`` says whether to use it.
        A memory outside the key's rights is 404, as one that does not exist;
        ``tenant`` names it where the id is in more than one of the key's tenants."""
        positions = warden.positions(who)
        with positions.waiting():
            view = warden.get(memory_id, tenant=tenant, caller=who, min_seq=positions.taken(min_seq))
        return positions.memory(view.as_dict())

    @app.get("/v1/due", tags=["memories"], **documented(R.Due))
    def due(who: Caller, limit: Annotated[int | None, Query(ge=1, le=2**31)] = None) -> dict[str, Any]:
        """What must be re-verified now (for an agent key: in its rights only)."""
        return {"due": [i.as_dict() for i in warden.due(limit=limit, caller=who)]}


def install_memory_api_routes(app: FastAPI, warden: Warden) -> None:
    @app.post("/memory/save", tags=["memory api"], **documented(R.KeySaved, 200, 409))
    def memory_save(body: MemoryApiSave, who: Caller, tenant: str | None = None) -> dict[str, Any]:
        """Save a key's content (a new version if the key exists)."""
        saved = warden.memory_save(tenant=tenant, agent=body.agent, key=body.key, content=body.content, caller=who)
        return warden.positions(who).answer(saved)

    @app.get("/memory/load", tags=["memory api"], **documented(R.KeysLoaded))
    def memory_load(who: Caller, agent: str, tenant: str | None = None, history: bool = False) -> dict[str, Any]:
        """Every key of an agent; content only while it may be used."""
        return warden.memory_load(tenant=tenant, agent=agent, history=history, caller=who)
