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
from urllib.parse import urlencode

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

from ._console_pages import PageError, Pages, harden, local_path
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

    @router.get("/memories")
    @page()
    def memories(
        request: Request,
        session: Session,
        who: Principal,
        tenant: str | None = None,
        project: str | None = None,
        agent: str | None = None,
        kind: str | None = None,
        status: str | None = None,
        text: str | None = None,
        page: int = 1,
    ) -> Response:
        tenants = warden.tenants(caller=who)
        search = {
            "tenant": _blank(tenant) or (tenants[0] if tenants else None),
            "project": _blank(project),
            "agent": _blank(agent),
            "kind": _blank(kind),
            "status": _blank(status),
            "text": _blank(text),
        }
        if not isinstance(page, int) or page < 1 or page > 4000:
            raise InvalidInput("page", "must be between 1 and 4000")
        rows: list[dict[str, Any]] = []
        more = False
        if search["tenant"] is not None:
            views = warden.query(
                tenant=search["tenant"],
                project=search["project"],
                agent=search["agent"],
                kind=search["kind"],
                status=search["status"],
                text=search["text"],
                include_unusable=True,
                limit=PAGE_SIZE + 1,
                offset=(page - 1) * PAGE_SIZE,
                with_content=False,
                caller=who,
            )
            rows = [v.as_dict() for v in views[:PAGE_SIZE]]
            more = len(views) > PAGE_SIZE
        link = {k: v for k, v in search.items() if v is not None}
        return render(
            request,
            "memories.html",
            who=who,
            csrf=session.csrf,
            nav="memories",
            search=search,
            tenants=tenants,
            statuses=STATUSES,
            rows=rows,
            page=page,
            previous=f"?{urlencode({**link, 'page': page - 1})}" if page > 1 else None,
            next=f"?{urlencode({**link, 'page': page + 1})}" if more else None,
        )

    @router.get("/memories/{tenant}/{memory_id:path}")
    @page()
    def memory(
        request: Request, session: Session, who: Principal, tenant: str, memory_id: str, as_of: str | None = None
    ) -> Response:
        as_of = _blank(as_of)
        data = warden.explain(memory_id, tenant=tenant, caller=who, as_of=as_of)
        now = data if as_of is None else warden.explain(memory_id, tenant=tenant, caller=who)
        content = None
        if as_of is None and data["usable"]:
            content = warden.get(memory_id, tenant=tenant, caller=who).content
        versions = [
            {"version": h["version"], "checksum": h["checksum"], "seq": h["seq"], "recorded_at": h["recorded_at"]}
            for h in data["history"]
            if h["event"] == "memory.saved"
        ]
        return render(
            request,
            "memory.html",
            who=who,
            csrf=session.csrf,
            nav="memories",
            m=data,
            now=now,
            tenant=tenant,
            content=content,
            versions=versions,
            as_of=as_of,
        )

    # -- revocations ---------------------------------------------------------------------------

    @router.get("/revocations")
    @page()
    def revocations(request: Request, session: Session, who: Principal, page: int = 1) -> Response:
        if not isinstance(page, int) or page < 1 or page > 4000:
            raise InvalidInput("page", "must be between 1 and 4000")
        found = warden.revocations(limit=PAGE_SIZE + 1, offset=(page - 1) * PAGE_SIZE, caller=who)
        return render(
            request,
            "revocations.html",
            who=who,
            csrf=session.csrf,
            nav="revocations",
            revocations=found[:PAGE_SIZE],
            page=page,
            previous=f"?page={page - 1}" if page > 1 else None,
            next=f"?page={page + 1}" if len(found) > PAGE_SIZE else None,
            fields=SELECTOR_FIELDS,
        )

    @router.post("/revocations/dry-run")
    @page()
    def revocation_dry_run(request: Request, session: Session, who: Principal, form: Any) -> Response:
        selector, reason = _selector(form)
        preview = warden.preview_revocation(selector, caller=who)
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
        if form.get("confirmed") != "yes":
            raise PageError(422, "confirmed: a revocation is issued only from its dry run's confirmation")
        selector, reason = _selector(form)
        result = warden.revoke(selector, reason=reason, caller=who)
        read_back(result.revocation_id, who)
        return RedirectResponse(f"/console/revocations/{result.revocation_id}", status_code=303)

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
        report = warden.audit_verify(kept, caller=who) if kept else None
        return render(
            request,
            "audit.html",
            who=who,
            csrf=session.csrf,
            nav="audit",
            head=warden.audit_head(caller=who),
            anchor=report,
            kept=kept,
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


def _blank(value: str | None) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


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
