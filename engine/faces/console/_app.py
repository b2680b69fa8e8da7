"""The web console at ``/console``: what security staff and auditors look
at (and, for an agent key, its own tenants' memories).

Server-rendered pages (Jinja2) over the Warden, as every face is: each
page asks the Warden as the signed-in key, which decides what the key may
see and do, so a memory the key may not read is not found here either. The few scripts (the chart, the
audit's progress, copying the head) and the styles ship in ``static/``;
no page loads anything from another host.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from memwarden.engine import (
    InvalidInput,
    KeyStore,
    Principal,
    Warden,
)
from memwarden.projections import STATUSES
from starlette.concurrency import run_in_threadpool

from ._docs import install_docs
from ._pages import (
    PAGE_SIZE,
    PageError,
    Pages,
    blank,
    harden,
    local_path,
    memories_url,
    page_number,
    refusal,
)
from ._search import meaning_form, search_rows
from ._session import COOKIE, LOGIN_COOKIE, Session, Sessions, same_origin, token_matches
from ._staff import add_staff_pages

HERE = Path(__file__).parent
STATIC = HERE / "static"


def install_console(
    app: FastAPI, warden: Warden, keys: KeyStore, *, read_back: Callable[[str, Principal], dict[str, Any]]
) -> None:
    """The console at ``/console``, the files its pages load at ``/static``,
    and the API's documentation from those files (``/docs``, ``/redoc``)."""
    app.include_router(build_console(warden, keys, read_back=read_back))
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    install_docs(app)


def build_console(
    warden: Warden,
    keys: KeyStore,
    *,
    read_back: Callable[[str, Principal], dict[str, Any]],
    idle: float = 1800.0,
) -> APIRouter:
    """The console's routes. ``read_back`` confirms a revocation issued here
    through the same read paths the scheduler checks."""
    sessions = Sessions(keys, idle=idle)
    router = APIRouter(prefix="/console", include_in_schema=False)

    pages = Pages(sessions, HERE / "templates")
    render, page = pages.render, pages.page

    # -- signing in --------------------------------------------------------------------------

    @router.get("")
    def home() -> RedirectResponse:
        return RedirectResponse("/console/memories", status_code=303)

    @router.get("/login")
    def login_form(request: Request, next: str = "/console/memories") -> HTMLResponse:
        token = uuid.uuid4().hex
        response = render(request, "login.html", who=None, login_token=token, next=local_path(next), failed=False)
        response.set_cookie(LOGIN_COOKIE, token, httponly=True, samesite="strict", path="/console/login")
        return response

    @router.post("/login")
    async def login(request: Request) -> Response:
        form = await request.form()
        expected = request.cookies.get(LOGIN_COOKIE)
        if not same_origin(request) or not expected or not token_matches(expected, form.get("login_token")):
            return harden(HTMLResponse("the sign-in form is out of date: reload it", status_code=403))
        key = form.get("key")
        started = await run_in_threadpool(sessions.start, key) if isinstance(key, str) else None
        if started is None:
            token = uuid.uuid4().hex
            back = local_path(str(form.get("next")))
            response: Response = render(request, "login.html", 401, who=None, login_token=token, next=back, failed=True)
            response.set_cookie(LOGIN_COOKIE, token, httponly=True, samesite="strict", path="/console/login")
            return response
        session, _ = started
        response = RedirectResponse(local_path(str(form.get("next") or "")), status_code=303)
        response.set_cookie(
            COOKIE,
            session.token,
            httponly=True,
            samesite="strict",
            path="/console",
            secure=request.url.scheme == "https",
        )
        response.delete_cookie(LOGIN_COOKIE, path="/console/login")
        return response

    @router.post("/logout")
    @page()
    def logout(request: Request, session: Session, who: Principal, form: Any) -> Response:
        sessions.end(session.token)
        response = RedirectResponse("/console/login", status_code=303)
        response.delete_cookie(COOKIE, path="/console")
        return response

    # -- memories ------------------------------------------------------------------------------

    def list_rows(
        search: dict[str, str | None], query: dict[str, str | None], who: Principal, context: dict[str, Any]
    ) -> int:
        """The list's page of rows into ``context``; its status."""
        code = 200
        try:
            number = page_number(query.get("page"))
            context["page"] = number
            if search["tenant"] is None and any(search.values()):
                raise InvalidInput("tenant", "name the tenant to search in")
            if search["tenant"] is not None:
                views = warden.query(
                    **search,  # type: ignore[arg-type]
                    include_unusable=True,
                    limit=PAGE_SIZE + 1,
                    offset=(number - 1) * PAGE_SIZE,
                    with_content=False,
                    caller=who,
                )
                context["rows"] = [v.as_dict() for v in views[:PAGE_SIZE]]
                if number > 1:
                    context["previous"] = memories_url(**search, page=number - 1)
                if len(views) > PAGE_SIZE:
                    context["next"] = memories_url(**search, page=number + 1)
        except Exception as exc:  # the search form again, with what was wrong with it
            code, context["error"] = refusal(exc)
        return code

    def memory_list(request: Request, session: Session, who: Principal, query: dict[str, str | None]) -> Response:
        tenants = warden.tenants(caller=who)
        search = {name: blank(query.get(name)) for name in ("tenant", "project", "agent", "kind", "status", "text")}
        if search["tenant"] is None and len(tenants) == 1:
            search["tenant"] = tenants[0]  # the only one this key may see: nothing to choose
        context: dict[str, Any] = {"rows": [], "page": 1, "previous": None, "next": None, "error": None}
        meaning = meaning_form(warden, who, query)
        if meaning["asked"]:  # a search by meaning: its best rows, scored, in place of the list
            code, context["rows"], context["error"] = search_rows(warden, who, search["tenant"], meaning)
        else:
            code = list_rows(search, query, who, context)
        return render(
            request,
            "memories.html",
            code,
            who=who,
            csrf=session.csrf,
            nav="memories",
            search=search,
            meaning=meaning,
            tenants=tenants,
            statuses=STATUSES,
            **context,
        )

    @router.get("/memories")
    @page()
    def memories(request: Request, session: Session, who: Principal) -> Response:
        return memory_list(request, session, who, dict(request.query_params))

    def memory_page(request: Request, session: Session, who: Principal, tenant: str, memory_id: str) -> Response:
        as_of = blank(request.query_params.get("as_of"))
        # an agent key's pages show no seq: a log position counts every tenant's writes (``_tokens``)
        positions = warden.positions(who)
        now = positions.explained(warden.explain(memory_id, tenant=tenant, caller=who))  # not found: the error page
        then: dict[str, Any] | None = None
        error: str | None = None
        code = 200
        if as_of is not None:
            try:
                then = positions.explained(warden.explain(memory_id, tenant=tenant, caller=who, as_of=as_of))
            except Exception as exc:  # a bad or too early moment: today's page, and the form saying why
                code, error = refusal(exc)
        shown = then or now
        content = None
        if then is None and now["usable"]:
            content = warden.get(memory_id, tenant=now["tenant"], caller=who).content
        versions = [
            {"version": h["version"], "checksum": h["checksum"], "seq": h["seq"], "recorded_at": h["recorded_at"]}
            for h in shown["history"]
            if h["event"] == "memory.saved"
        ]
        return render(
            request,
            "memory.html",
            code,
            who=who,
            csrf=session.csrf,
            nav="memories",
            m=shown,
            now=now,
            then=then,
            tenant=now["tenant"],
            content=content,
            versions=versions,
            seqs=positions.reads_log,
            as_of=as_of,
            error=error,
        )

    @router.get("/memory")
    @page()
    def memory(
        request: Request, session: Session, who: Principal, tenant: str = "", id: str = "", ref: str = ""
    ) -> Response:
        """A memory's page: tenant and id in the query string (``memory_url``),
        or as ``ref``, both percent-encoded (``memory_ref``): how the as-of
        form names the memory without a raw control character in the page."""
        if ref and "/" in ref:
            tenant, id = (unquote(part) for part in ref.split("/", 1))
        if not tenant or not id:
            raise PageError(422, "tenant and id: a memory's page names both")
        return memory_page(request, session, who, tenant, id)

    @router.get("/memories/{tenant}/{memory_id:path}")
    @page()
    def memory_by_path(request: Request, session: Session, who: Principal, tenant: str, memory_id: str) -> Response:
        """The same page at a path (links made before ``/memory``): the
        segments as sent, so a ``%2F`` in the tenant stays in the tenant."""
        raw = request.scope.get("raw_path")
        if isinstance(raw, bytes):
            sent = raw.decode("latin-1").split("?", 1)[0]
            prefix = "/console/memories/"
            if sent.startswith(prefix) and "/" in sent[len(prefix) :]:
                raw_tenant, raw_id = sent[len(prefix) :].split("/", 1)
                tenant, memory_id = unquote(raw_tenant), unquote(raw_id)
        return memory_page(request, session, who, tenant, memory_id)

    add_staff_pages(router, warden, pages, read_back=read_back)
    return router
