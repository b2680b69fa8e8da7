"""Commands for the sinks: the copies outside memwarden that revocations
reach (``[sinks.NAME]`` in the policy file)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click
from memwarden.engine import MAX_PAGE, OPERATOR

from ._common import Group, cli, emit, json_option, with_warden
from ._output import table
from ._security import sink_text

if TYPE_CHECKING:
    from memwarden.engine import Warden


@cli.group("sinks", cls=Group)
def sinks_group() -> None:
    """The sinks of the policy file: their lines of notices, tests, redelivery."""


@sinks_group.command("list")
@json_option
@with_warden
def sinks_list(warden: Warden, as_json: bool) -> None:
    """Every sink, what it receives, and how many notices are pending, delivered or dead."""
    sinks = warden.sinks_status(caller=OPERATOR)

    def show() -> None:
        if not sinks:
            click.echo("no sinks: add [sinks.NAME] tables to the policy file (--policy-file)")
            return
        table(
            ("sink", "kind", "url", "pending", "delivered", "dead", "last error"),
            [
                (s["name"], s["kind"], s["url"], s["pending"], s["delivered"], s["dead"], s["last_error"] or "")
                for s in sinks
            ],
        )

    emit({"sinks": sinks}, as_json, show)


@sinks_group.command("test")
@click.argument("name")
@json_option
@with_warden
def sinks_test(warden: Warden, name: str, as_json: bool) -> None:
    """Whether sink NAME answers now (nothing is delivered); exit 1 if it does not."""
    result = warden.test_sink(name, caller=OPERATOR)
    text = (
        f"sink {name} answers: {result['round_trip_ms']:.1f} ms round trip"
        if result["ok"]
        else f"sink {name} does not answer: {result['problem']}"
    )
    emit(result, as_json, text)
    if not result["ok"]:
        sys.exit(1)


@sinks_group.command("redeliver")
@click.argument("notice_id")
@click.option("--sink", default=None, help="Only to this sink (default: every sink the notice went to).")
@json_option
@with_warden
def sinks_redeliver(warden: Warden, notice_id: str, sink: str | None, as_json: bool) -> None:
    """Put notice NOTICE_ID (a dead letter, or one delivered) back in line, from its first attempt."""
    result = warden.redeliver(notice_id, sink=sink, caller=OPERATOR)
    emit(result, as_json, f"{notice_id} back in line ({result['requeued']} sink(s))")


@sinks_group.command("notices")
@click.option("--sink", default=None, help="Only this sink's notices.")
@click.option(
    "--state",
    "notice_state",
    type=click.Choice(["pending", "delivered", "dead"]),
    default=None,
    help="Only notices in this state.",
)
@click.option("--limit", type=click.IntRange(1, MAX_PAGE), default=100, show_default=True, help="At most this many.")
@json_option
@with_warden
def sinks_notices(warden: Warden, sink: str | None, notice_state: str | None, limit: int, as_json: bool) -> None:
    """Notices newest first: their sink, state, attempts and last error (dead letters: --state dead)."""
    notices = warden.sink_notices(sink=sink, state=notice_state, limit=limit, caller=OPERATOR)
    emit(
        {"notices": notices},
        as_json,
        lambda: table(
            ("notice", "sink", "type", "seq", "state", "attempts", "last error"),
            [
                (n["notice_id"], n["sink"], n["type"], n["seq"], n["state"], n["attempts"], n["last_error"] or "")
                for n in notices
            ],
        ),
    )


@sinks_group.command("fill")
@click.argument("name")
@click.option("--tenant", required=True, help="Put this tenant's usable memories in the cache.")
@click.option(
    "--limit", type=click.IntRange(1, 10_000_000), default=10_000, show_default=True, help="At most this many."
)
@json_option
@with_warden
def sinks_fill(warden: Warden, name: str, tenant: str, limit: int, as_json: bool) -> None:
    """Fill redis sink NAME with a tenant's usable memories, each under its full key, expiring by its expires_at."""
    result = warden.fill_cache(name, tenant=tenant, limit=limit, caller=OPERATOR)
    emit(result, as_json, f"{result['put']:,} memories of {tenant} in sink {name}")


@sinks_group.command("readback")
@click.argument("revocation_id")
@json_option
@with_warden
def sink_readback(warden: Warden, revocation_id: str, as_json: bool) -> None:
    """Each sink's read-back of a revocation as it stands; exit 1 unless every sink confirmed."""
    lines = warden.sink_readbacks(revocation_id, caller=OPERATOR)

    emit({"revocation_id": revocation_id, "sinks": lines}, as_json, "\n".join(sink_text(s) for s in lines) or None)
    if any(s["status"] != "confirmed" for s in lines):
        sys.exit(1)
