"""Semantic recall over HTTP: ``POST /v1/memories/search``.

A thin caller of ``Warden.search``: the engine decides what the caller may
see (its tenants, its agent, ``include_hidden`` for staff only) and the
gate what may be used now; this route only reads the body and answers.
It is a POST, not a GET, because a query vector does not fit in a URL.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from memwarden.engine import Warden

from . import _responses as R
from ._guard import Caller
from ._models import SearchBody
from ._responses import documented


def install_search_routes(app: FastAPI, warden: Warden) -> None:
    @app.post("/v1/memories/search", tags=["memories"], **documented(R.SearchResults, 200, 409, 503))
    def search_memories(body: SearchBody, who: Caller) -> dict[str, Any]:
        """The memories closest in meaning (``hybrid``: and in words) to
        ``query`` or ``vector``, best first, usable now for this key: the
        index proposes, the gate decides, so a revoked, expired or erased
        memory is never answered whatever its score. ``include_hidden``
        (security and auditor keys) answers the refused ones too, with why.
        A failing embedder is 503; another tenant's memories are never found.
        ``truncated``: the answer stopped at ``limits.max_answer_bytes`` of content."""
        positions = warden.positions(who)
        args = body.search_args(positions.taken(body.min_seq))
        # the head before the search: every answer is at least this fresh
        seq = warden.head_seq()
        with positions.waiting():
            found = warden.search(**args, caller=who)  # type: ignore[arg-type]
        results = [positions.memory(f.as_dict()) for f in found]
        return {"results": results, "seq": positions.shown(seq), **found.told(paged=False)}
