"""How a console page is served: rendered from a template with the
security headers every page sends, behind a signed-in session, its
refusals answered as pages that say why."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape
from memwarden.engine import ACTIONS, InvalidInput, Principal, answer, may
from starlette.concurrency import run_in_threadpool

from .._visible import visible
from ._session import Session, Sessions, same_origin, token_matches

# what a console page may load: only this server's own files
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


class PageError(Exception):
    """A page's refusal, answered with ``status`` and a page saying ``problem``."""

    def __init__(self, status: int, problem: str) -> None:
        super().__init__(problem)
        self.status = status
        self.problem = problem


def refusal(exc: Exception) -> tuple[int, str]:
    """The status and message of a refusal, for a page that shows it in
    place (its form again, saying what is wrong); anything else is a fault
    of memwarden's own and goes on up."""
    if isinstance(exc, PageError):
        return exc.status, exc.problem
    found = answer(exc)
    if found is None:
        raise exc
    return found.status, found.message


def _shown(value: Any) -> Any:
    """What a value in a page reads as: a text through ``visible``; never a
    Python spelling (``True``, ``None``, ``['a']``) a person would have to
    decode."""
    if isinstance(value, Markup):  # a macro's or filter's HTML, its values already shown
        return value
    if isinstance(value, str):
        return visible(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(str(_shown(v)) for v in value)
    if isinstance(value, Mapping):
        return ", ".join(f"{_shown(k)}={_shown(v)}" for k, v in value.items())
    return value


_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")


def timed(value: Any) -> Markup:
    """A text the engine wrote (a gate's detail, a step's note) with each
    time in it shown as ``moment`` shows one."""
    text = visible(value) if isinstance(value, str) else str(_shown(value))
    out, at = Markup(""), 0
    for found in _TIME.finditer(text):
        out += escape(text[at : found.start()]) + moment(found.group())
        at = found.end()
    return out + escape(text[at:])


def memory_url(tenant: str, memory_id: str, as_of: str | None = None) -> str:
    """A memory's page. Tenant and id travel in the query string, each
    encoded whole: a path segment cannot carry every id (a browser resolves
    ``..`` and ``%2E%2E`` in a path, and a proxy may decode ``%2F``)."""
    params = {"tenant": tenant, "id": memory_id}
    if as_of is not None:
        params["as_of"] = as_of
    return "/console/memory?" + urlencode(params, quote_via=quote)


def memory_ref(tenant: str, memory_id: str) -> str:
    """Tenant and id as one ASCII value (each percent-encoded whole), for a
    form field: a hidden field holds no raw control or direction character."""
    return f"{quote(tenant, safe='')}/{quote(memory_id, safe='')}"


def memories_url(**params: Any) -> str:
    """The memory list searched by ``params`` (those given)."""
    given = {k: v for k, v in params.items() if v not in (None, "")}
    return "/console/memories" + ("?" + urlencode(given, quote_via=quote) if given else "")


def path_part(value: str) -> str:
    """``value`` as one path segment, every reserved character encoded."""
    return quote(value, safe="")


def moment(value: Any) -> Markup:
    """A recorded time as a person reads it: to the second, never split
    across lines, with its UTC value in ``datetime`` (which the page's
    script shows in the viewer's own zone, and ``title`` keeps exact)."""
    if not isinstance(value, str) or not value:
        return Markup("")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:  # not a time after all: shown as it is
        return Markup(escape(visible(value)))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    utc = parsed.astimezone(UTC).replace(microsecond=0)
    stamp = utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    shown = utc.strftime("%Y-%m-%d %H:%M:%S UTC")
    return Markup('<time datetime="{}" title="{}">{}</time>').format(stamp, visible(value), shown)


class Pages:
    def __init__(self, sessions: Sessions, templates: Path) -> None:
        self.sessions = sessions
        self.templates = Jinja2Templates(directory=str(templates))
        self.templates.env.globals.update(
            actions=ACTIONS,
            may=may,
            memory_url=memory_url,
            memory_ref=memory_ref,
            memories_url=memories_url,
            path_part=path_part,
        )
        self.templates.env.filters["moment"] = moment
        self.templates.env.filters["timed"] = timed
        # every value a page shows passes the one rule for text a person
        # reads (``_visible``): a direction override or control an agent
        # put in an id or summary is shown as its escape. A form field
        # that must post a value back as it was says so (``as_given``).
        self.templates.env.finalize = _shown
        self.templates.env.filters["as_given"] = lambda value: escape(value)

    def render(self, request: Request, name: str, code: int = 200, **context: Any) -> HTMLResponse:
        return harden(self.templates.TemplateResponse(request, name, context, status_code=code))

    def error(self, request: Request, who: Principal, session: Session, status: int, problem: str) -> HTMLResponse:
        return self.render(request, "error.html", status, who=who, csrf=session.csrf, status=status, problem=problem)

    def page(self) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A signed-in page: the session and who it is come first; what the
        key may see and do is the Warden's to decide, and a refusal is a
        page that says why, with the status the API would answer. A POST is a form: its origin and CSRF
        token are checked before the page sees it (as ``form``). The page's
        own work runs in the thread pool: it reads the store, and may call
        this server back (a revocation's read-back)."""

        def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
            async def run(request: Request, **kwargs: Any) -> Response:
                found = await run_in_threadpool(self.sessions.find, request)
                if found is None:
                    target = "/console/login?" + urlencode({"next": local_path(request.url.path)})
                    return RedirectResponse(target, status_code=303)
                session, who = found
                try:
                    if request.method == "POST":
                        if not same_origin(request):
                            raise PageError(403, "this form was sent from another site")
                        kwargs["form"] = await request.form()
                        if not token_matches(session.csrf, kwargs["form"].get("csrf")):
                            raise PageError(403, "the form's token is missing or out of date: reload the page")
                    return await run_in_threadpool(fn, request, session, who, **kwargs)
                except PageError as exc:
                    return self.error(request, who, session, exc.status, exc.problem)
                except Exception as exc:
                    said = answer(exc)
                    if said is None:
                        raise
                    return self.error(request, who, session, said.status, said.message)

            # FastAPI reads the route's parameters from this: the page's own,
            # without the session, principal and form handed in above
            own = inspect.signature(fn)
            run.__signature__ = own.replace(  # type: ignore[attr-defined]
                parameters=[p for name, p in own.parameters.items() if name not in ("session", "who", "form")]
            )
            run.__name__ = fn.__name__
            run.__doc__ = fn.__doc__
            return run

        return wrap


AnyResponse = TypeVar("AnyResponse", bound=Response)


def harden(response: AnyResponse) -> AnyResponse:
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["X-Content-Type-Options"] = "nosniff"
    # "same-origin": the browser still sends Origin on our own forms (no-referrer makes it "null")
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["Cache-Control"] = "no-store"
    return response


def local_path(path: str) -> str:
    """A path on this console to go to after signing in, never another site."""
    if not path.startswith("/console") or path.startswith("//") or "\\" in path:
        return "/console/memories"
    return path


PAGE_SIZE = 25  # rows a console list shows a page


def blank(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def page_number(value: str | None) -> int:
    """A list's page number, from the query string as typed."""
    if value is None or value == "":
        return 1
    if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= 4000:
        raise InvalidInput("page", "must be between 1 and 4000")
    return int(value)
