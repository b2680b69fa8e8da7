"""``memwarden query --similar TEXT``: semantic recall on the command line,
a thin caller of ``Warden.search`` (the engine checks every field and names
it; a refusal exits 2 through the group's one error path)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click
from memwarden.engine import OPERATOR

from ._common import emit
from ._output import table

if TYPE_CHECKING:
    from memwarden.engine import Warden


def similar_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option(
        "--min-similarity",
        type=click.FloatRange(-1.0, 1.0),
        default=None,
        help="With --similar: a vector matches only above this similarity (default: the embedder's, else 0).",
    )(fn)
    fn = click.option(
        "--mode",
        type=click.Choice(["hybrid", "vector", "text"]),
        default="hybrid",
        show_default=True,
        help="With --similar: which halves of recall to use.",
    )(fn)
    return click.option("--similar", default=None, help="Semantic recall: memories closest in meaning to this text.")(
        fn
    )


def run_search(warden: Warden, *, similar: str, mode: str, as_json: bool, **options: Any) -> None:
    """The search's answer as ``{"results": [...], "seq"}``, or a table with each score."""
    seq = warden.head_seq()  # the head before the search: the answer is at least this fresh
    found = warden.search(query_text=similar, mode=mode, **options, caller=OPERATOR)
    data = {"results": [f.as_dict() for f in found], "seq": seq, **found.told(paged=False)}

    def show() -> None:
        table(
            ("memory_id", "score", "found_by", "status", "summary"),
            [
                (r["memory_id"], f"{r['score']:.4f}", "+".join(r["found_by"]), r["status"], r["summary"] or "(erased)")
                for r in data["results"]
            ],
        )
        if found.hidden:  # the gate withheld matches: said, as query --all would list them
            why = ", ".join(f"{n} {reason}" for reason, n in found.hidden.items())
            click.echo(f"(hidden: {why}; --all shows them)", err=True)

    emit(data, as_json, show)
