"""The MCP server: stateless tools over the Warden.

Every call carries its scope (tenant, ...); nothing is remembered between
calls. Over HTTP the caller's ``x-api-key`` decides what it may see, as for
the rest of the API; on stdio the local user runs it with their own rights
(or with ``MEMWARDEN_API_KEY``, which then binds it like any key).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from memwarden.engine import (
    BatchRefused,
    ChecksumMismatch,
    InvalidInput,
    MemoryErased,
    MemoryNotFound,
    Principal,
    RevokedScope,
    ScopeNotAllowed,
    StaleView,
    Warden,
    refuse_local_source,
)
from memwarden.events import canonical_json
from pydantic import BaseModel, ConfigDict

LOCAL = Principal("local", "security")


class MemoryInput(BaseModel):
    """One memory of memory_save_many: memory_save's fields."""

    model_config = ConfigDict(extra="forbid")
    memory_id: str
    kind: str
    summary: str
    content: str
    source_url: str
    tenant: str
    project: str | None = None
    permission: str | None = None
    user: str | None = None
    agent: str | None = None
    tool: str | None = None
    fetched_at: str | None = None
    ttl: str | None = None
    checksum: str | None = None
    derived_from: list[str] | None = None


Authenticate = Callable[[str | None], Principal | None]
DOMAIN_ERRORS = (InvalidInput, ChecksumMismatch, RevokedScope, MemoryErased, MemoryNotFound, StaleView, ValueError)


def _tool_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    # A refused call is an answer the model should read, not a crash.
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BatchRefused as exc:  # every refused memory, not only the first
            raise ToolError(f"{exc} (all: {canonical_json(exc.problems)})") from None
        except DOMAIN_ERRORS as exc:
            raise ToolError(str(exc)) from None
        except PermissionError as exc:
            raise ToolError(f"denied: {exc}") from None

    return wrapper


def build_server(
    warden: Warden,
    *,
    authenticate: Authenticate | None = None,
    allow_local_sources: bool = True,
    stdio_key: str | None = None,
) -> MCPServer:
    server = MCPServer(
        "memwarden",
        log_level="WARNING",
        instructions=(
            "memwarden tells you whether a remembered fact may be used now. Save what you learn with its "
            "source; before relying on a memory, get or query it: only memories marked usable may be used. "
            "A memory that is not usable comes with a reason and an action (reverify, treat_as_unknown)."
        ),
    )

    def caller(ctx: Context | None) -> Principal:
        headers = ctx.headers if ctx is not None else None
        if headers is None:  # stdio: the local user, unless a key was configured
            if stdio_key and authenticate is not None:
                found = authenticate(stdio_key)
                if found is None:
                    raise PermissionError("MEMWARDEN_API_KEY is not a valid key")
                return found
            return LOCAL
        found = authenticate(headers.get("x-api-key")) if authenticate is not None else None
        if found is None:
            raise PermissionError("a valid x-api-key header is required")
        return found

    def check_tenant(who: Principal, tenant: str) -> None:
        if not who.reads_tenant(tenant):
            raise PermissionError(f"this key is not bound to tenant {tenant!r}")

    @server.tool()
    @_tool_errors
    def memory_save(
        memory_id: str,
        kind: str,
        summary: str,
        content: str,
        source_url: str,
        tenant: str,
        ctx: Context,
        project: str | None = None,
        permission: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        tool: str | None = None,
        fetched_at: str | None = None,
        ttl: str | None = None,
        checksum: str | None = None,
        derived_from: list[str] | None = None,
    ) -> dict[str, Any]:
        """Record a memory with its provenance (a new version if the id exists).
        derived_from names the memories a summary or conclusion was drawn from.
        fetched_at is when the content was read from source_url (default now);
        ttl like 90s, 15m, 6h, 30d (default: the kind's policy)."""
        who = may_save(caller(ctx))
        item = MemoryInput(
            memory_id=memory_id,
            kind=kind,
            summary=summary,
            content=content,
            source_url=source_url,
            tenant=tenant,
            project=project,
            permission=permission,
            user=user,
            agent=agent,
            tool=tool,
            fetched_at=fetched_at,
            ttl=ttl,
            checksum=checksum,
            derived_from=derived_from,
        )
        return warden.save(**save_args(who, item), access=who.access).as_dict()

    @server.tool()
    @_tool_errors
    def memory_save_many(memories: list[MemoryInput], ctx: Context) -> dict[str, Any]:
        """Record many memories (each with memory_save's fields) in one transaction, all or none.
        A refusal lists each refused memory by index and field; nothing is saved then."""
        who = may_save(caller(ctx))
        fields, problems = [], []
        for index, item in enumerate(memories):
            try:
                fields.append(save_args(who, item))
            except (ValueError, PermissionError) as exc:
                problem = getattr(exc, "problem", None) or str(exc)
                problems.append({"index": index, "field": getattr(exc, "field", None), "problem": problem})
        if problems:
            raise BatchRefused(problems)
        return {"saved": [r.as_dict() for r in warden.save_many(fields, access=who.access)]}

    def may_save(who: Principal) -> Principal:
        if who.role not in ("agent", "security") or (who.role == "security" and who is not LOCAL):
            raise PermissionError(f"the {who.role} role may not save memories")
        return who

    def save_args(who: Principal, item: MemoryInput) -> dict[str, Any]:
        """``save``'s arguments from a tool's fields, the key's tenant and agent checked."""
        check_tenant(who, item.tenant)
        agent = item.agent
        if who.agent is not None:
            agent = agent or who.agent
            if agent != who.agent:
                raise ScopeNotAllowed("agent", f"this key saves only as agent {who.agent!r}")
        if not allow_local_sources:
            refuse_local_source(item.source_url)
        scope = {
            k: v
            for k, v in dict(
                tenant=item.tenant,
                project=item.project,
                permission=item.permission,
                user=item.user,
                agent=agent,
                tool=item.tool,
            ).items()
            if v is not None
        }
        return dict(
            memory_id=item.memory_id,
            kind=item.kind,
            summary=item.summary,
            content=item.content,
            source_url=item.source_url,
            scope=scope,
            fetched_at=item.fetched_at,
            ttl=item.ttl,
            checksum=item.checksum,
            derived_from=item.derived_from or (),
            actor=f"mcp:{who.key_id}",
        )

    @server.tool()
    @_tool_errors
    def memory_query(
        tenant: str,
        ctx: Context,
        project: str | None = None,
        permission: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        tool: str | None = None,
        kind: str | None = None,
        text: str | None = None,
        include_hidden: bool = False,
        limit: int = 20,
    ) -> dict[str, Any]:
        """Memories you may use now in a scope, newest first. With include_hidden,
        also the ones you may not use, each with its reason (no content)."""
        who = caller(ctx)
        check_tenant(who, tenant)
        if who.agent is not None:
            agent = who.agent
        views = warden.query(
            tenant=tenant,
            project=project,
            permission=permission,
            user=user,
            agent=agent,
            tool=tool,
            kind=kind,
            text=text,
            include_unusable=include_hidden,
            limit=limit,
            access=who.access,
        )
        usable = [v.as_dict() for v in views if v.usable]
        hidden = [
            {"memory_id": v.memory_id, "summary": v.summary, "reason": v.reason, "action": v.action, "detail": v.detail}
            for v in views
            if not v.usable
        ]
        return {"memories": usable, "hidden": hidden}

    @server.tool()
    @_tool_errors
    def memory_get(memory_id: str, ctx: Context, tenant: str | None = None) -> dict[str, Any]:
        """One memory, its text checked against its checksum. Use it only if usable is true.
        tenant names it when the id is in more than one of your tenants."""
        return warden.get(memory_id, tenant=tenant, access=caller(ctx).access).as_dict()

    @server.tool()
    @_tool_errors
    def memory_verify(memory_id: str, ctx: Context, tenant: str | None = None, accept: bool = False) -> dict[str, Any]:
        """Re-check a memory against its source; with accept, save changed content as a new version."""
        who = caller(ctx)
        if who.role == "auditor":
            raise PermissionError("the auditor role may not verify (it writes events)")
        return warden.verify(memory_id, tenant=tenant, access=who.access, accept=accept).as_dict()

    @server.tool()
    @_tool_errors
    def memory_explain(
        memory_id: str, ctx: Context, tenant: str | None = None, as_of: str | None = None
    ) -> dict[str, Any]:
        """The memory's history and why it is (not) usable, now or as of a past time."""
        return warden.explain(memory_id, tenant=tenant, access=caller(ctx).access, as_of=as_of)

    @server.tool()
    @_tool_errors
    def memory_replay(
        ctx: Context,
        as_of: str | None = None,
        seq: int | None = None,
        tenant: str | None = None,
        include_unusable: bool = False,
        limit: int = 100,
        after: str | None = None,
    ) -> dict[str, Any]:
        """For auditors: what the agents could use at a past moment (as_of, or seq), one page of
        limit memories; pass the answer's next as after for the page that follows.
        include_unusable: also the memories that were not usable then, with why."""
        who = caller(ctx)
        if who.role not in ("security", "auditor"):
            raise PermissionError(f"the {who.role} role may not replay the view (security and auditor keys may)")
        return warden.replay(
            as_of=as_of, seq=seq, tenant=tenant, include_unusable=include_unusable, after=after, limit=limit
        )

    return server


def run_stdio(warden: Warden) -> None:
    from memwarden.engine import KeyStore

    keys = KeyStore(warden)
    build_server(warden, authenticate=keys.authenticate, stdio_key=os.environ.get("MEMWARDEN_API_KEY")).run("stdio")
