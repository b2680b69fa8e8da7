"""Commands for auditors: explain, replay, audit, export/import, rebuild, stats, cache, log."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click
from memwarden.engine import MAX_PAGE, OPERATOR

from ._common import Group, _content, _scope, cli, emit, json_option, scope_options, with_warden
from ._output import derivation_tree, plural, progress, status_line, table

if TYPE_CHECKING:
    from memwarden.engine import Warden

# the weekly table's columns: the week, then what the mission asks to see side
# by side (re-fetches after expiry against blocks by revocation), then the rest
FIRST = ("reverified_after_expiry", "blocked_by_revocation")


def stats_columns() -> tuple[str, ...]:
    from memwarden.projections import COUNTERS

    return ("week", *FIRST, *(c for c in COUNTERS if c not in FIRST))


# -- auditors -------------------------------------------------------------------------------


@cli.command()
@click.option("--to", "to", required=True, help="The empty store to copy into: a PostgreSQL URL or an SQLite file.")
@json_option
@with_warden
def migrate(warden: Warden, to: str, as_json: bool) -> None:
    """Copy the log, texts and keys to another store; check it there."""
    data = warden.migrate(to, caller=OPERATOR)
    emit(
        data,
        as_json,
        f"copied {data['events']} events and {data['texts']} texts to {data['to']}; "
        f"head {data['head']}; projections {'ok' if data['projections_ok'] else 'DIFFER'}",
    )
    if not (data["same_head"] and data["projections_ok"]):
        sys.exit(1)


@cli.command()
@click.argument("memory_id")
@click.option("--tenant", default=None, help="The memory's tenant (needed only where the id is in several).")
@click.option("--as-of", default=None, help="Explain as of this time.")
@json_option
@with_warden
def explain(warden: Warden, memory_id: str, tenant: str | None, as_of: str | None, as_json: bool) -> None:
    """The memory's history and why it is (not) usable."""
    data = warden.explain(memory_id, tenant=tenant, as_of=as_of, caller=OPERATOR)

    def show() -> None:
        table(
            ("seq", "recorded_at", "actor", "event", "status", "note"),
            [
                (h["seq"], h["recorded_at"], h["actor"], h["event"], h["status_after"], h["note"])
                for h in data["history"]
            ],
        )
        derivation_tree(f"{memory_id} v{data['version']} {data['status']}", data["derivation"], data["drawn_from_it"])
        verdict = "usable" if data["usable"] else f"NOT usable: {data['reason']} (action: {data['action']})"
        status_line(f"as of {data['as_of']} (seq {data['seq']}): {verdict}", "usable" if data["usable"] else "failed")

    emit(data, as_json, show)


@cli.command()
@click.option("--as-of", default=None, help="The moment to see the view at (ISO 8601 with a zone).")
@click.option("--seq", type=click.IntRange(0, 2**62), default=None, help="The seq to see the view at.")
@click.option("--tenant", default=None, help="Only this tenant's memories.")
@click.option("--all", "include_unusable", is_flag=True, help="Also the memories that were not usable then.")
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_PAGE),
    default=None,
    help="One page of this many memories, and its next cursor.",
)
@click.option("--after", default=None, help="The next cursor of the page before.")
@json_option
@with_warden
def replay(
    warden: Warden,
    as_of: str | None,
    seq: int | None,
    tenant: str | None,
    include_unusable: bool,
    limit: int | None,
    after: str | None,
    as_json: bool,
) -> None:
    """The usable view as it was then, from each memory's stream folded to that point."""
    if as_json and limit is None and after is None:
        # the whole view, written as it is read: flat memory however large
        for chunk in warden.replay_stream(
            as_of=as_of, seq=seq, tenant=tenant, include_unusable=include_unusable, caller=OPERATOR
        ):
            click.echo(chunk, nl=False)
        click.echo()
        return
    data = warden.replay(
        as_of=as_of,
        seq=seq,
        tenant=tenant,
        include_unusable=include_unusable,
        after=after,
        limit=limit or None,
        caller=OPERATOR,
    )

    def show() -> None:
        click.echo(f"as of {data['as_of']} (seq {data['seq']}): {plural(len(data['memories']), 'memory')}", err=True)
        table(
            ("memory_id", "status", "why", "summary"),
            [(m["memory_id"], m["status"], m["reason"] or "usable", m["summary"] or "") for m in data["memories"]],
        )
        if data.get("next"):
            click.echo(f"more: --after {data['next']}", err=True)

    emit(data, as_json, show)


@cli.group("audit", cls=Group)
def audit_group() -> None:
    """Prove the log was not altered."""


@audit_group.command("verify")
@click.option("--against", default=None, help="SEQ:HASH from an earlier 'audit head'.")
@json_option
@with_warden
def audit_verify(warden: Warden, against: str | None, as_json: bool) -> None:
    """Check the hash chain; exit 1 on damage."""
    with progress("audit verify", warden.head_seq()) as advance:
        data = warden.audit_verify(against, progress=advance, caller=OPERATOR)
    if data["ok"]:
        text = f"ok: {plural(data['checked'], 'event')}, head seq {data['head_seq']}"
        if against:
            text += f", extends {against.split(':')[0]}"
    else:
        text = f"DAMAGED at seq {data['first_bad_seq']}: {data['problem']}"
    if data.get("texts_damaged"):
        # the chain holds (each text's checksum is in its event), so not "DAMAGED"; but a text
        # was changed under it, and an auditor reading this line must see so
        text += (
            f"\ntexts damaged: {plural(data['texts_damaged'], 'memory')} no longer match the checksum"
            " their events recorded (each is quarantined when read: re-verify it, or restore a backup)"
        )
    emit(data, as_json, text)
    if not data["ok"]:
        sys.exit(1)


@audit_group.command("head")
@json_option
@with_warden
def audit_head(warden: Warden, as_json: bool) -> None:
    """The current head, to keep elsewhere."""
    data = warden.audit_head(caller=OPERATOR)
    emit(data, as_json, f"{data['seq']}:{data['hash']}")


@cli.command("export")
@click.argument("file", type=click.Path(dir_okay=False))
@json_option
@with_warden
def export_cmd(warden: Warden, file: str, as_json: bool) -> None:
    """Write the log as JSONL."""
    with progress("export", warden.head_seq()) as advance:
        count = warden.export(file, progress=advance, caller=OPERATOR)
    emit({"events": count}, as_json, f"exported {plural(count, 'event')} to {file}")


@cli.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--against",
    default=None,
    metavar="SEQ:HASH",
    help="A head kept elsewhere ('audit head'): refuse a file that does not extend it.",
)
@json_option
@with_warden
def import_cmd(warden: Warden, file: str, against: str | None, as_json: bool) -> None:
    """Import a JSONL log: the whole chain is checked first, and every event is judged as a live write."""
    with progress("import", None) as advance:
        count = warden.import_log(file, against=against, progress=advance, caller=OPERATOR)
    emit({"events": count}, as_json, f"imported {plural(count, 'event')}")


@cli.command()
@json_option
@with_warden
def rebuild(warden: Warden, as_json: bool) -> None:
    """Replay every projection from seq 1."""
    with progress("rebuild", warden.head_seq()) as advance:
        data = warden.rebuild(progress=advance, caller=OPERATOR)
    emit(data, as_json, f"rebuilt from {plural(data['events'], 'event')} in {data['seconds']}s")


@cli.group("projections", cls=Group)
def projections_group() -> None:
    """The read models."""


@projections_group.command("check")
@click.option(
    "--as-of",
    "as_of",
    default=None,
    help="A past SEQ (or ISO time): compare the view then, as the indexes answer it, with a replay to it.",
)
@json_option
@with_warden
def projections_check(warden: Warden, as_of: str | None, as_json: bool) -> None:
    """Compare the live view with a fresh rebuild; exit 1 naming the first difference."""
    if as_of is None:
        result = warden.check_projections(caller=OPERATOR).as_dict()
        same = "ok: live view equals a rebuild"
    else:
        point = {"seq": int(as_of)} if as_of.isascii() and as_of.isdigit() else {"as_of": as_of}
        result = warden.check_as_of(**point, caller=OPERATOR).as_dict()
        same = f"ok: the view as of seq {result['live_seq']} from the indexes equals a replay to it"
    text = (
        same
        if result["ok"]
        else (
            f"DIFFERENT: {result['first_difference']}"
            + (f", memory {result['memory_id']}" if result["memory_id"] else "")
        )
    )
    emit(result, as_json, text)
    if not result["ok"]:
        sys.exit(1)


@cli.command()
@click.option("--weekly", is_flag=True, help="Counters per ISO week (the default).")
@json_option
@with_warden
def stats(warden: Warden, weekly: bool, as_json: bool) -> None:
    """Counters per ISO week."""
    weeks = warden.stats(caller=OPERATOR)

    def show() -> None:
        columns = stats_columns()
        table(columns, [[w[c] for c in columns] for w in weeks])

    emit({"weeks": weeks}, as_json, show)


@cli.group("cache", cls=Group)
def cache_group() -> None:
    """Tool results under their full cache key."""


def _cache_key_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = scope_options(fn)
    fn = click.option("--tenant", required=True, help="Tenant the result belongs to.")(fn)
    fn = click.option("--input-hash", required=True, help="Hash of the tool's input (part of the cache key).")(fn)
    fn = click.option("--tool-version", required=True, help="Version of the tool (part of the cache key).")(fn)
    return click.option("--tool", required=True, help="Name of the tool (part of the cache key).")(fn)


@cache_group.command("put")
@_cache_key_options
@click.option("--content", default=None, help="The tool's result as text.")
@click.option(
    "--content-file", default=None, type=click.Path(dir_okay=False), help="Read the result from this UTF-8 file."
)
@click.option("--source-url", required=True, help="Where the result came from.")
@click.option("--ttl", default=None, help="How long the result may be used (default: the tool_result kind's).")
@json_option
@with_warden
def cache_put(
    warden: Warden,
    tool: str,
    tool_version: str,
    input_hash: str,
    tenant: str,
    project: str | None,
    permission: str | None,
    user: str | None,
    agent: str | None,
    content: str | None,
    content_file: str | None,
    source_url: str,
    ttl: str | None,
    as_json: bool,
) -> None:
    """Store a tool result."""
    result = warden.cache_put(
        tool=tool,
        tool_version=tool_version,
        input_hash=input_hash,
        scope=_scope(tenant, project, permission, user, agent, tool),
        content=_content(content, content_file, warden.limits),
        source_url=source_url,
        ttl=ttl,
        caller=OPERATOR,
    )
    emit(
        {
            "memory_id": result.memory_id,
            "checksum": result.checksum,
            "seq": result.seq,
            "expires_at": result.expires_at,
        },
        as_json,
        f"cached as {result.memory_id} (seq {result.seq})",
    )


@cache_group.command("get")
@_cache_key_options
@json_option
@with_warden
def cache_get(
    warden: Warden,
    tool: str,
    tool_version: str,
    input_hash: str,
    tenant: str,
    project: str | None,
    permission: str | None,
    user: str | None,
    agent: str | None,
    as_json: bool,
) -> None:
    """A hit only if every key part matches and the entry is usable; exit 1 on a miss."""
    hit, view, reason = warden.cache_get(
        tool=tool,
        tool_version=tool_version,
        input_hash=input_hash,
        scope=_scope(tenant, project, permission, user, agent, tool),
        caller=OPERATOR,
    )
    data = {
        "hit": hit,
        "memory_id": view.memory_id if view else None,
        "content": view.content if (hit and view) else None,
        "reason": reason,
    }
    # a plain miss says so once; any other reason names why the entry missed
    emit(data, as_json, (view.content if hit and view else ("miss" if reason == "miss" else f"miss: {reason}")))
    if not hit:
        sys.exit(1)


@cli.group("log", cls=Group)
def log_group() -> None:
    """The event log itself."""


@log_group.command("tail")
@click.option("-n", "count", type=click.IntRange(0, 100_000), default=20, show_default=True, help="How many events.")
@json_option
@with_warden
def log_tail(warden: Warden, count: int, as_json: bool) -> None:
    """The last events."""
    events = warden.tail(count, caller=OPERATOR)

    def show() -> None:
        table(
            ("seq", "recorded_at", "actor", "type", "stream"),
            [(e["seq"], e["recorded_at"], e["actor"], e["type"], e["stream"]) for e in events],
        )

    emit({"events": events}, as_json, show)
