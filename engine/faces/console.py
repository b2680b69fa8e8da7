"""The web console at ``/console``: what security staff and auditors look
at (and, for an agent key, its own tenants' memories).

Server-rendered pages (Jinja2) over the Warden, as every face is: each
page asks the Warden as the signed-in key, which decides what the key may
see and do, so a memory the key may not read is not found here either. The few scripts (the chart, the
audit's progress, copying the head) and the styles ship in ``static/``;
no page loads anything from another host.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from memwarden.engine import (
    InvalidInput,
    KeyStore,
    Principal,
    Warden,
    readback_records,
)
from memwarden.projections import STATUSES
from starlette.concurrency import run_in_threadpool

from ._console_pages import PageError, Pages, harden, local_path, memories_url, path_part, refusal
from ._console_search import meaning_form, search_rows
from ._console_session import COOKIE, LOGIN_COOKIE, Session, Sessions, same_origin, token_matches
from ._docs import install_docs

HERE = Path(__file__).parent
STATIC = HERE / "static"
PAGE_SIZE = 25
SELECTOR_FIELDS = ("tenant", "project", "permission", "user", "agent", "tool", "kind", "source_prefix")


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
            response = render(request, "login.html", 401, who=None, login_token=token, next=back, failed=True)
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
            number = _page_number(query.get("page"))
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
        search = {name: _blank(query.get(name)) for name in ("tenant", "project", "agent", "kind", "status", "text")}
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
        as_of = _blank(request.query_params.get("as_of"))
        now = warden.explain(memory_id, tenant=tenant, caller=who)  # not found: the error page
        then: dict[str, Any] | None = None
        error: str | None = None
        code = 200
        if as_of is not None:
            try:
                then = warden.explain(memory_id, tenant=tenant, caller=who, as_of=as_of)
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

    # -- revocations ---------------------------------------------------------------------------

    def revocation_list(
        request: Request,
        session: Session,
        who: Principal,
        page: str | None = None,
        *,
        code: int = 200,
        error: str | None = None,
        given: dict[str, Any] | None = None,
    ) -> Response:
        number = _page_number(page)
        found = warden.revocations(limit=PAGE_SIZE + 1, offset=(number - 1) * PAGE_SIZE, caller=who)
        return render(
            request,
            "revocations.html",
            code,
            who=who,
            csrf=session.csrf,
            nav="revocations",
            revocations=found[:PAGE_SIZE],
            page=number,
            previous=f"?page={number - 1}" if number > 1 else None,
            next=f"?page={number + 1}" if len(found) > PAGE_SIZE else None,
            fields=SELECTOR_FIELDS,
            error=error,
            given=given or {},
        )

    @router.get("/revocations")
    @page()
    def revocations(request: Request, session: Session, who: Principal, page: str | None = None) -> Response:
        return revocation_list(request, session, who, page)

    @router.post("/revocations/dry-run")
    @page()
    def revocation_dry_run(request: Request, session: Session, who: Principal, form: Any) -> Response:
        try:
            selector, reason = _selector(form)
            preview = warden.preview_revocation(selector, caller=who)
        except Exception as exc:  # the form again, filled in as it was sent, saying what is wrong
            code, problem = refusal(exc)
            return revocation_list(request, session, who, code=code, error=problem, given=_given(form))
        return render(
            request,
            "revocation_confirm.html",
            who=who,
            csrf=session.csrf,
            nav="revocations",
            preview=preview,
            selector=selector,
            reason=reason,
            ids=" ".join(selector.get("ids", ())),
            fields=SELECTOR_FIELDS,
        )

    @router.post("/revocations")
    @page()
    def revocation_issue(request: Request, session: Session, who: Principal, form: Any) -> Response:
        try:
            if form.get("confirmed") != "yes":
                raise PageError(422, "confirmed: a revocation is issued only from its dry run's confirmation")
            selector, reason = _selector(form)
            result = warden.revoke(selector, reason=reason, caller=who)
        except Exception as exc:
            code, problem = refusal(exc)
            return revocation_list(request, session, who, code=code, error=problem, given=_given(form))
        read_back(result.revocation_id, who)
        return RedirectResponse(f"/console/revocations/{path_part(result.revocation_id)}", status_code=303)

    @router.get("/revocations/{revocation_id}")
    @page()
    def revocation(request: Request, session: Session, who: Principal, revocation_id: str) -> Response:
        data = warden.revocation(revocation_id, caller=who)
        records = readback_records(warden, revocation_id, caller=who)
        sinks = warden.sink_readbacks(revocation_id, caller=who)
        return render(
            request,
            "revocation.html",
            who=who,
            csrf=session.csrf,
            nav="revocations",
            r=data,
            records=records,
            sinks=sinks,
        )

    # -- policies ------------------------------------------------------------------------------

    def policy_list(
        request: Request,
        session: Session,
        who: Principal,
        *,
        code: int = 200,
        error: str | None = None,
        given: dict[str, Any] | None = None,
    ) -> Response:
        done, session.notice = session.notice, None  # a change's answer is shown once
        return render(
            request,
            "policies.html",
            code,
            who=who,
            csrf=session.csrf,
            nav="policies",
            policies=sorted(warden.policies(caller=who).items()),
            done=done,
            error=error,
            given=given or {},
        )

    @router.get("/policies")
    @page()
    def policies(request: Request, session: Session, who: Principal) -> Response:
        return policy_list(request, session, who)

    @router.post("/policies/dry-run")
    @page()
    def policy_dry_run(request: Request, session: Session, who: Principal, form: Any) -> Response:
        name, version = _blank(form.get("policy")) or "", _blank(form.get("version")) or ""
        try:
            preview = warden.preview_policy(name, version, caller=who)
        except Exception as exc:
            code, problem = refusal(exc)
            return policy_list(request, session, who, code=code, error=problem, given=_given(form))
        return render(request, "policy_confirm.html", who=who, csrf=session.csrf, nav="policies", preview=preview)

    @router.post("/policies")
    @page()
    def policy_change(request: Request, session: Session, who: Principal, form: Any) -> Response:
        name, version = _blank(form.get("policy")) or "", _blank(form.get("version")) or ""
        try:
            if form.get("confirmed") != "yes":
                raise PageError(422, "confirmed: a policy is changed only from its dry run's confirmation")
            session.notice = warden.change_policy(name, version, caller=who)
        except Exception as exc:
            code, problem = refusal(exc)
            return policy_list(request, session, who, code=code, error=problem, given=_given(form))
        # after the change, a page to reload freely: the answer travels in the session
        return RedirectResponse("/console/policies", status_code=303)

    # -- weekly counters -------------------------------------------------------------------

    @router.get("/weekly")
    @page()
    def weekly(request: Request, session: Session, who: Principal) -> Response:
        weeks = warden.stats(caller=who)
        sinks = warden.sinks_status(caller=who)
        leaks = warden.sink_leaks(caller=who)
        return render(
            request, "weekly.html", who=who, csrf=session.csrf, nav="weekly", weeks=weeks, sinks=sinks, leaks=leaks
        )

    # -- the audit --------------------------------------------------------------------------

    @router.get("/audit")
    @page()
    def audit(request: Request, session: Session, who: Principal, kept: str | None = None) -> Response:
        """The head; with ``kept`` (a head kept earlier, SEQ:HASH), that head
        checked against today's log (a read: a plain GET form)."""
        kept = _blank(kept)
        report, error, code = None, None, 200
        if kept:
            try:
                report = warden.audit_verify(kept, caller=who)
            except Exception as exc:  # a head that is no head: the form again, saying why
                code, error = refusal(exc)
        return render(
            request,
            "audit.html",
            code,
            who=who,
            csrf=session.csrf,
            nav="audit",
            head=warden.audit_head(caller=who),
            anchor=report,
            kept=kept,
            error=error,
        )

    @router.post("/audit/verify")
    @page()
    def audit_verify_start(request: Request, session: Session, who: Principal, form: Any) -> Response:
        warden.audit_head(caller=who)  # the same right as the verification: refused here, not in the thread
        job_id = uuid.uuid4().hex
        job: dict[str, Any] = {"checked": 0, "total": warden.head_seq(), "done": False, "report": None}
        session.jobs = {job_id: job}  # one verification a session at a time

        def advance(n: int) -> None:
            job["checked"] += n

        def run() -> None:
            try:
                job["report"] = warden.audit_verify(progress=advance, caller=who)
            except Exception as exc:  # the page must learn the job ended
                job["report"] = {"ok": False, "problem": f"the check could not run: {exc}"}
            job["done"] = True

        threading.Thread(target=run, name="console-audit-verify", daemon=True).start()
        return JSONResponse({"job": job_id})

    @router.get("/audit/verify/{job_id}")
    @page()
    def audit_verify_progress(request: Request, session: Session, who: Principal, job_id: str) -> Response:
        job = session.jobs.get(job_id)
        if job is None:
            raise PageError(404, f"verification {job_id!r} not found")
        return JSONResponse(job)

    return router


def _blank(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _page_number(value: str | None) -> int:
    """A list's page number, from the query string as typed."""
    if value is None or value == "":
        return 1
    if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= 4000:
        raise InvalidInput("page", "must be between 1 and 4000")
    return int(value)


def _given(form: Any) -> dict[str, str]:
    """A form's text fields as sent, to fill it in again."""
    return {k: v for k, v in form.items() if isinstance(v, str) and k not in ("csrf", "confirmed")}


def _selector(form: Any) -> tuple[dict[str, Any], str]:
    """The selector and reason a revocation form names (the engine checks them)."""
    selector: dict[str, Any] = {}
    for name in SELECTOR_FIELDS:
        value = _blank(form.get(name))
        if value is not None:
            selector[name] = value
    ids = str(form.get("ids") or "").split()
    if ids:
        selector["ids"] = ids
    if form.get("everything") == "yes":
        selector["everything"] = True
    reason = _blank(form.get("reason"))
    if reason is None:
        raise InvalidInput("reason", "is required: it is kept in the log")
    return selector, reason
