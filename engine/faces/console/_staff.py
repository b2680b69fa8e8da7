"""The console's pages for security staff and auditors: revocations (a dry
run, then the confirmed issue and its read-back), policy versions, the
weekly counters and the audit of the chain. As every console page, each
asks the Warden as the signed-in key, which decides what it may do."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from memwarden.engine import InvalidInput, Principal, Warden, readback_records

from ._pages import PAGE_SIZE, PageError, Pages, blank, page_number, path_part, refusal
from ._session import Session

SELECTOR_FIELDS = ("tenant", "project", "permission", "user", "agent", "tool", "kind", "source_prefix")


def add_staff_pages(
    router: APIRouter, warden: Warden, pages: Pages, *, read_back: Callable[[str, Principal], dict[str, Any]]
) -> None:
    """The staff's routes on the console's ``router``."""
    render, page = pages.render, pages.page

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
        number = page_number(page)
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
        name, version = blank(form.get("policy")) or "", blank(form.get("version")) or ""
        try:
            preview = warden.preview_policy(name, version, caller=who)
        except Exception as exc:
            code, problem = refusal(exc)
            return policy_list(request, session, who, code=code, error=problem, given=_given(form))
        return render(request, "policy_confirm.html", who=who, csrf=session.csrf, nav="policies", preview=preview)

    @router.post("/policies")
    @page()
    def policy_change(request: Request, session: Session, who: Principal, form: Any) -> Response:
        name, version = blank(form.get("policy")) or "", blank(form.get("version")) or ""
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
        kept = blank(kept)
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


def _given(form: Any) -> dict[str, str]:
    """A form's text fields as sent, to fill it in again."""
    return {k: v for k, v in form.items() if isinstance(v, str) and k not in ("csrf", "confirmed")}


def _selector(form: Any) -> tuple[dict[str, Any], str]:
    """The selector and reason a revocation form names (the engine checks them)."""
    selector: dict[str, Any] = {}
    for name in SELECTOR_FIELDS:
        value = blank(form.get(name))
        if value is not None:
            selector[name] = value
    ids = str(form.get("ids") or "").split()
    if ids:
        selector["ids"] = ids
    if form.get("everything") == "yes":
        selector["everything"] = True
    reason = blank(form.get("reason"))
    if reason is None:
        raise InvalidInput("reason", "is required: it is kept in the log")
    return selector, reason
