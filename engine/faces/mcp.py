"""The MCP server: stateless tools over the Warden.

Every call carries its scope (tenant, ...); nothing is remembered between
calls. Over HTTP the caller's ``x-api-key`` names who asks, as for the rest
of the API; on stdio the local operator runs it with their own rights (or
with ``MEMWARDEN_API_KEY``, which then binds it like any key). What the
caller may do is the Warden's to decide, as on every face.

Each tool takes the shape of the HTTP API's body for the same request (a
save's ``scope`` is an object, as in ``POST /v1/memories``), checked by the
same model: an unknown argument is refused, and every refusal is the same
``{error, field, problem}`` the HTTP API answers, as the tool's error text.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from memwarden.engine import (
    MAX_PAGE,
    OPERATOR,
    InvalidInput,
    Principal,
    Unauthorized,
    Warden,
    answer,
    field_problems,
    refuse_local_source,
)
from memwarden.events import canonical_json
from pydantic import BaseModel, Field, ValidationError

from .http._models import Body, MinSeq, SaveBody, SaveManyBody, SearchBody

Authenticate = Callable[[str | None], Principal | None]


class QueryArgs(Body):
    """``GET /v1/memories``'s parameters (``include_hidden`` is its ``all``)."""

    tenant: str = Field(min_length=1)
    project: str | None = None
    permission: str | None = None
    user: str | None = None
    agent: str | None = None
    tool: str | None = None
    kind: str | None = None
    text: str | None = None
    include_hidden: bool = False
    limit: int = Field(default=20, ge=1, le=MAX_PAGE)
    min_seq: MinSeq = None
    # past an answer's size bound (truncated), the next page starts at its next_offset
    offset: int = Field(default=0, ge=0, le=100_000)


class GetArgs(Body):
    memory_id: str = Field(min_length=1, description="the memory's id")
    tenant: str | None = Field(None, description="its tenant, when the id is in more than one of yours")
    min_seq: MinSeq = None


class VerifyArgs(Body):
    memory_id: str = Field(min_length=1, description="the memory's id")
    tenant: str | None = Field(None, description="its tenant, when the id is in more than one of yours")
    accept: bool = Field(False, description="save changed content as a new version")


class ExplainArgs(Body):
    memory_id: str = Field(min_length=1, description="the memory's id")
    tenant: str | None = Field(None, description="its tenant, when the id is in more than one of yours")
    as_of: str | None = Field(None, description="a past moment (ISO 8601) to explain it as of")


class ReplayArgs(Body):
    as_of: str | None = Field(None, description="the past moment (ISO 8601); or seq")
    seq: int | None = Field(default=None, ge=0, le=2**62, description="the past point as a seq of the log; or as_of")
    tenant: str | None = Field(None, description="only this tenant's memories")
    include_unusable: bool = Field(False, description="also the memories that were not usable then, with why")
    limit: int = Field(default=100, ge=1, le=MAX_PAGE, description="memories in one page")
    after: str | None = Field(None, description="the previous page's next, for the page that follows")


class _Unchecked(FuncMetadata):
    """Hands a tool its arguments as they came: the tool checks them with
    its own model, so a refusal is memwarden's answer, not the SDK's."""

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        return {"arguments": dict(arguments_to_validate or {})}


def refusal(exc: BaseException) -> ToolError:
    """An error as a tool answers it: the API's JSON answer as its text."""
    found = answer(exc)
    if found is None:
        raise exc
    return ToolError(canonical_json(found.body()))


def checked(model: type[BaseModel], arguments: dict[str, Any]) -> BaseModel:
    """``arguments`` as ``model`` reads them, or the API's 422 answer."""
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        field, problem = field_problems(errors, whole="arguments")[0]
        if errors[0]["type"] == "extra_forbidden":
            problem = "is not an argument of this tool"
        raise ToolError(canonical_json({"error": "invalid_input", "field": field, "problem": problem})) from None


def build_server(
    warden: Warden,
    *,
    authenticate: Authenticate | None = None,
    allow_local_sources: bool = True,
    stdio_key: str | None = None,
) -> MCPServer:
    def caller(ctx: Context | None) -> Principal:
        headers = ctx.headers if ctx is not None else None
        if headers is None:  # stdio: the local operator, unless a key was configured
            if stdio_key is not None:  # set, even empty: a key was meant, and none is no key
                found = authenticate(stdio_key) if authenticate is not None else None
                if found is None:
                    raise Unauthorized("MEMWARDEN_API_KEY is not a valid key")
                return found
            return OPERATOR
        found = authenticate(headers.get("x-api-key")) if authenticate is not None else None
        if found is None:
            raise Unauthorized()
        return found

    tools: list[Tool] = []

    def tool(model: type[BaseModel]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A tool whose arguments are ``model``'s fields (its published
        schema), called with them checked and with who asks."""

        def register(fn: Callable[[Any, Principal], dict[str, Any]]) -> Callable[..., Any]:
            def run(arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
                args = checked(model, arguments)
                try:
                    return fn(args, caller(ctx))
                except ToolError:
                    raise
                except Exception as exc:
                    raise refusal(exc) from None

            run.__name__ = fn.__name__
            run.__doc__ = fn.__doc__
            made = Tool.from_function(run, name=fn.__name__, description=fn.__doc__)
            meta = made.fn_metadata
            tools.append(
                made.model_copy(
                    update={
                        "parameters": model.model_json_schema(),
                        "fn_metadata": _Unchecked(
                            arg_model=meta.arg_model,
                            output_schema=meta.output_schema,
                            output_model=meta.output_model,
                            wrap_output=meta.wrap_output,
                        ),
                    }
                )
            )
            return fn

        return register

    def save_fields(body: SaveBody) -> dict[str, Any]:
        if not allow_local_sources:
            refuse_local_source(body.source_url, body.source)
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

    @tool(SaveBody)
    def memory_save(args: SaveBody, who: Principal) -> dict[str, Any]:
        """Record a memory with its provenance (a new version if the id exists): the body of
        POST /v1/memories. scope is {tenant, project?, permission?, user?, agent?, tool?};
        derived_from names the memories a summary or conclusion was drawn from; fetched_at is
        when the content was read from source_url (default now); ttl like 90s, 15m, 6h, 30d
        (default: the kind's policy). Pass the answer's seq as min_seq to a later read to read
        your write."""
        return warden.positions(who).saved(warden.save(**save_fields(args), caller=who)).as_dict()

    @tool(SaveManyBody)
    def memory_save_many(args: SaveManyBody, who: Principal) -> dict[str, Any]:
        """Record many memories (each with memory_save's fields) in one transaction, all or none.
        A refusal lists each refused memory by index and field; nothing is saved then."""
        fields = [save_fields(item) for item in args.memories]
        positions = warden.positions(who)
        return {"saved": [positions.saved(r).as_dict() for r in warden.save_many(fields, caller=who)]}

    @tool(QueryArgs)
    def memory_query(args: QueryArgs, who: Principal) -> dict[str, Any]:
        """Memories you may use now in a scope, newest first. With include_hidden,
        also the ones you may not use, each with its reason (no content). An answer
        holds at most limits.max_answer_bytes of content (16 MiB unless set): past it,
        truncated is true and offset=next_offset gets the next page."""
        positions = warden.positions(who)
        with positions.waiting():
            views = warden.query(
                tenant=args.tenant,
                project=args.project,
                permission=args.permission,
                user=args.user,
                agent=args.agent,
                tool=args.tool,
                kind=args.kind,
                text=args.text,
                include_unusable=args.include_hidden,
                limit=args.limit,
                min_seq=positions.taken(args.min_seq),
                offset=args.offset,
                caller=who,
            )
        usable = [positions.memory(v.as_dict()) for v in views if v.usable]
        hidden = [
            {"memory_id": v.memory_id, "summary": v.summary, "reason": v.reason, "action": v.action, "detail": v.detail}
            for v in views
            if not v.usable
        ]
        return {"memories": usable, "hidden": hidden, **views.told()}

    @tool(SearchBody)
    def memory_search(args: SearchBody, who: Principal) -> dict[str, Any]:
        """Memories closest in meaning (hybrid: and in words) to query (or to a vector), best
        first, each with its score and found_by; only memories you may use now are answered.
        The body of POST /v1/memories/search."""
        positions = warden.positions(who)
        search = args.search_args(positions.taken(args.min_seq))
        seq = warden.head_seq()
        with positions.waiting():
            found = warden.search(**search, caller=who)  # type: ignore[arg-type]
        results = [positions.memory(f.as_dict()) for f in found]
        return {"results": results, "seq": positions.shown(seq), **found.told(paged=False)}

    @tool(GetArgs)
    def memory_get(args: GetArgs, who: Principal) -> dict[str, Any]:
        """One memory, its text checked against its checksum. Use it only if usable is true.
        tenant names it when the id is in more than one of your tenants."""
        positions = warden.positions(who)
        with positions.waiting():
            view = warden.get(args.memory_id, tenant=args.tenant, min_seq=positions.taken(args.min_seq), caller=who)
        return positions.memory(view.as_dict())

    @tool(VerifyArgs)
    def memory_verify(args: VerifyArgs, who: Principal) -> dict[str, Any]:
        """Re-check a memory against its source; with accept, save changed content as a new version."""
        verified = warden.verify(args.memory_id, tenant=args.tenant, accept=args.accept, caller=who)
        return warden.positions(who).verified(verified).as_dict()

    @tool(ExplainArgs)
    def memory_explain(args: ExplainArgs, who: Principal) -> dict[str, Any]:
        """The memory's history and why it is (not) usable, now or as of a past time."""
        explained = warden.explain(args.memory_id, tenant=args.tenant, as_of=args.as_of, caller=who)
        return warden.positions(who).explained(explained)

    @tool(ReplayArgs)
    def memory_replay(args: ReplayArgs, who: Principal) -> dict[str, Any]:
        """For auditors: what the agents could use at a past moment (as_of, or seq), one page of
        limit memories; pass the answer's next as after for the page that follows.
        include_unusable: also the memories that were not usable then, with why."""
        return warden.replay(
            as_of=args.as_of,
            seq=args.seq,
            tenant=args.tenant,
            include_unusable=args.include_unusable,
            after=args.after,
            limit=args.limit,
            caller=who,
        )

    return MCPServer(
        "memwarden",
        log_level="WARNING",
        tools=tools,
        instructions=(
            "memwarden tells you whether a remembered fact may be used now. Save what you learn with its "
            "source; before relying on a memory, get or query it: only memories marked usable may be used. "
            "A memory that is not usable comes with a reason and an action (reverify, treat_as_unknown)."
        ),
    )


def run_stdio(warden: Warden) -> None:
    from memwarden.engine import KeyStore

    keys = KeyStore(warden)
    key = os.environ.get("MEMWARDEN_API_KEY")
    if key is not None and not key.strip():
        # a config that says "MEMWARDEN_API_KEY": "$KEY" with KEY unset must not run with every right
        raise InvalidInput(
            "MEMWARDEN_API_KEY", "is set but empty: give a key, or unset it to run as the local operator"
        )
    build_server(warden, authenticate=keys.authenticate, stdio_key=key).run("stdio")
