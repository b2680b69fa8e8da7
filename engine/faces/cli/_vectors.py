"""Commands for the vectors of semantic recall: reembed."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click
from memwarden.engine import OPERATOR

from ._common import cli, emit, json_option, with_warden
from ._output import table

if TYPE_CHECKING:
    from memwarden.engine import Warden


@cli.command()
@click.option("--tenant", default=None, help="Only this tenant's memories (default: every tenant).")
@click.option("--batch", type=click.IntRange(1, 5000), default=500, show_default=True, help="Versions per batch.")
@click.option("--max-batches", type=click.IntRange(1, 2**31), default=None, help="Stop after this many batches.")
@click.option("--check", is_flag=True, help="Only report the stale vectors (nothing written); exit 1 if any.")
@json_option
@with_warden
def reembed(
    warden: Warden, tenant: str | None, batch: int, max_batches: int | None, check: bool, as_json: bool
) -> None:
    """Make again, with the policy file's embedder, the vectors another embedder (or none) made."""
    if check:
        status = warden.embedding_status(tenant=tenant, caller=OPERATOR)

        def show() -> None:
            table(
                ("embedder", "dims", "versions"),
                [(e["embedder"] or "(none)", e["dims"] or "", e["versions"]) for e in status["by_embedder"]],
            )
            click.echo(f"configured: {status['embedder'] or '(none)'}; stale: {status['stale']}")

        emit(status, as_json, show)
        if status["stale"]:
            sys.exit(1)
        return
    result = warden.reembed(tenant=tenant, batch=batch, max_batches=max_batches, caller=OPERATOR)
    emit(
        result.as_dict(),
        as_json,
        f"re-embedded {result.reembedded} versions with {result.embedder} in {result.batches} batches; "
        f"skipped {result.skipped}; {result.remaining} stale left",
    )
