"""The console's search by meaning: the memory list page asked with
``similar`` (the text), ``mode`` and, for staff, ``all``.

A thin caller of ``Warden.search`` as the signed-in key, as the list is of
``Warden.query``: the engine decides which tenants and agents the key may
read and whether it may see the hidden ones (``include_hidden`` needs the
review right); this module only reads the form and shapes the rows."""

from __future__ import annotations

from typing import Any

from memwarden.engine import SEARCH_MODES, Principal, Warden, may

from ._pages import refusal

# the list page's page size: a search answers its best, there is no next page
LIMIT = 25


def modes(warden: Warden) -> tuple[str, ...]:
    """The modes worth offering: without an embedder only the words can be
    searched (the other two would always be refused)."""
    return SEARCH_MODES if warden.embedder is not None else ("text",)


def meaning_form(warden: Warden, who: Principal, query: dict[str, str | None]) -> dict[str, Any]:
    """The search-by-meaning form as sent (or empty), with what it offers."""
    offered = modes(warden)
    mode = (query.get("mode") or "").strip() or offered[0]
    return {
        "asked": "similar" in query,
        "similar": query.get("similar") or "",
        "mode": mode,
        "modes": offered,
        "all": query.get("all") == "yes",
        "may_all": may(who, "review"),
    }


def search_rows(
    warden: Warden, who: Principal, tenant: str | None, form: dict[str, Any]
) -> tuple[int, list[dict[str, Any]], str | None]:
    """The status, the rows found and the refusal (if any) of a search by
    meaning in ``tenant``. Every check is the engine's: an empty query, a
    mode it does not know, a tenant the key may not read, ``all`` from a
    key without the review right; each comes back as the page's message."""
    try:
        found = warden.search(
            tenant=tenant or "",
            query_text=form["similar"],
            mode=form["mode"],
            limit=LIMIT,
            include_hidden=form["all"],
            with_content=False,
            caller=who,
        )
    except Exception as exc:  # the form again, saying what was wrong with it
        code, problem = refusal(exc)
        return code, [], problem
    rows = []
    for f in found:
        row = f.as_dict()
        row["found"] = "both" if len(f.found_by) > 1 else f.found_by[0]
        rows.append(row)
    return 200, rows, None
