"""Commands for security staff: revocations and their read-back, policy
versions, erasure."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click
from memwarden.engine import OPERATOR

from ._common import VERSION, Group, cli, emit, json_option, scope_options, with_warden
from ._output import plural, table

if TYPE_CHECKING:
    from memwarden.engine import Warden


@cli.command()
@click.option("--tenant", default=None, help="Cover this tenant's memories.")
@scope_options
@click.option("--tool", default=None, help="Cover the results of this tool.")
@click.option("--kind", default=None, help="Cover memories of this kind.")
@click.option("--source-prefix", default=None, help="Every memory whose source_url starts with this.")
@click.option("--id", "ids", multiple=True, help="A memory id (repeatable).")
@click.option("--everything", is_flag=True, help="The real emergency: every memory.")
@click.option("--reason", required=True, help="Why: kept in the log.")
@click.option("--by", default="security", show_default=True, help="Who issues the revocation.")
@click.option("--wait", is_flag=True, help="Block until the read-back is recorded; print its latency.")
@click.option(
    "--dry-run", is_flag=True, help="Only say how many memories, in which tenants, it would cover; write nothing."
)
@json_option
@with_warden
def revoke(
    warden: Warden,
    tenant: str | None,
    project: str | None,
    permission: str | None,
    user: str | None,
    agent: str | None,
    tool: str | None,
    kind: str | None,
    source_prefix: str | None,
    ids: tuple[str, ...],
    everything: bool,
    reason: str,
    by: str,
    wait: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Take a scope out of every read path, at commit (--dry-run: count first).

    It covers what was saved before it commits and does not block later saves: a memory fetched after it is
    usable; only a save of content fetched at or before it is refused."""
    selector: dict[str, Any] = {
        k: v
        for k, v in dict(
            tenant=tenant,
            project=project,
            permission=permission,
            user=user,
            agent=agent,
            tool=tool,
            kind=kind,
            source_prefix=source_prefix,
        ).items()
        if v is not None
    }
    if ids:
        selector["ids"] = tuple(ids)
    if everything:
        selector["everything"] = True
    if dry_run:
        preview = warden.preview_revocation(selector, caller=OPERATOR)
        emit(preview, as_json, lambda: print_preview(preview))
        return
    result = warden.revoke(selector, reason=reason, by=by, caller=OPERATOR)
    data = result.as_dict()
    text = (
        f"{result.revocation_id} in force at seq {result.seq}: {plural(result.covered, 'memory')} taken out"
        f" directly, {result.cascaded:,} drawn from them invalidated"
    )
    if wait:
        from memwarden.engine import read_back_committed, settle_committed

        readback = read_back_committed(warden, result.revocation_id, caller=OPERATOR)
        data["readback"] = {
            k: readback.get(k)
            for k in ("readback_status", "readback_latency_ms", "still_visible", "leaked_ids", "readback_error")
            if k != "readback_error" or k in readback
        }
        if "readback_error" in readback:  # committed all the same: said, and exit 1 below, never 2
            text += f"\nread-back could not run now: {readback['readback_error'].get('problem')}"
        else:
            text += f"\nread-back {readback['readback_status']} after {readback['readback_latency_ms']:.1f} ms"
        if readback.get("leaked_ids"):
            text += f"; still visible: {', '.join(readback['leaked_ids'])}"
        if warden.sinks:  # the copies outside memwarden, as they stand after one try
            data["sinks"], problem = settle_committed(warden, result.revocation_id, caller=OPERATOR)
            text += "".join(f"\n{sink_text(s)}" for s in data["sinks"])
            if problem is not None:  # committed all the same: said, never a refusal
                data["sinks_error"] = problem
                text += f"\nsinks could not be tried now: {problem.get('problem')}"
    emit(data, as_json, text)
    if wait and data["readback"]["readback_status"] != "confirmed":
        sys.exit(1)


def sink_text(line: dict[str, Any]) -> str:
    """A sink's read-back of a revocation, in one line."""
    text = f"sink {line['sink']}: {line['status']}"
    if line["status"] == "confirmed":
        text += f" after {line['latency_ms']:.1f} ms"
    elif line["status"] == "leaked":
        text += f", still holds {', '.join(line['leaked_ids'])}"
    elif line.get("detail"):
        text += f" ({line['detail']})"
    return text


def print_preview(preview: dict[str, Any]) -> None:
    tenants = preview["tenants"]
    covered = plural(preview["covered"], "memory")
    if preview["everything"]:
        click.echo(f"dry run: --everything covers EVERY memory of every tenant, {covered} now; nothing was written")
    else:
        click.echo(f"dry run: it would take out {covered} now; nothing was written")
    if preview.get("cascaded"):
        click.echo(f"and invalidate {plural(preview['cascaded'], 'memory')} drawn from them (the cascade)")
    if not preview["covered"]:
        click.echo("it covers nothing today (it still blocks older fetches saved again later)")
    for t in tenants:
        click.echo(f"  {t['tenant']}\t{plural(t['covered'], 'memory')}")


@cli.command()
@click.argument("revocation_id")
@json_option
@with_warden
def readback(warden: Warden, revocation_id: str, as_json: bool) -> None:
    """The read-back confirmation records of a revocation; exit 1 if none confirms it."""
    from memwarden.engine import readback_records

    data = readback_records(warden, revocation_id, caller=OPERATOR)

    def show() -> None:
        if not data["records"]:
            click.echo(f"{revocation_id}: no read-back recorded yet")
        for r in data["records"]:
            click.echo(
                f"{r['seq']:>8}  {r['recorded_at']}  {r['type']}  "
                f"checked {r['covered']} (covered and drawn from them)  "
                f"still visible {r['still_visible']}  latency {r['latency_ms']:.1f} ms  "
                f"paths {','.join(r['paths_checked'])}"
            )
        for r in data["sink_records"]:
            found = f"leaked {','.join(r['leaked_ids'])}" if r["leaked_ids"] else r.get("detail") or ""
            latency = f"latency {r['latency_ms']:.1f} ms" if r.get("latency_ms") is not None else ""
            click.echo(
                f"{r['seq']:>8}  {r['recorded_at']}  sink {r['sink']}: {r['outcome']}"
                f"{' (final)' if r['final'] else ''}  {latency or found}".rstrip()
            )

    emit(data, as_json, show)
    if not data["confirmed"]:
        sys.exit(1)


@cli.group("policy", cls=Group)
def policy_group() -> None:
    """Policy versions."""


@policy_group.command("set")
@click.argument("key")
@click.argument("version", type=VERSION)
@click.option("--dry-run", is_flag=True, help="Only say how many memories, in which tenants, it would retire.")
@click.option("--yes", is_flag=True, help="Do not ask before retiring memories (asked only on a terminal).")
@json_option
@with_warden
def policy_set(warden: Warden, key: str, version: int | str, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Make VERSION current for policy KEY and retire the one before, for good.

    The version already current is a no-op (exit 0). On a terminal it asks
    first when memories would be retired; --yes does not ask."""
    preview = warden.preview_policy(key, version, caller=OPERATOR)
    if dry_run:
        emit(preview, as_json, lambda: print_policy_preview(preview))
        return
    if not preview["unchanged"] and preview["retired"] and not yes and sys.stdin.isatty() and not as_json:
        print_policy_preview(preview)
        click.confirm(f"retire {plural(preview['retired'], 'memory')}?", abort=True, err=True)
    data = warden.change_policy(key, version, caller=OPERATOR)
    if data["unchanged"]:
        text = f"policy {key} is already at version {version}: nothing changed (seq {data['seq']})"
    else:
        text = (
            f"policy {key} at version {version} (seq {data['seq']}): {plural(data['retired'], 'memory')} retired"
            f" ({data['memory_api']:,} Memory API entries), usable again once re-verified"
        )
    emit(data, as_json, text)


def print_policy_preview(preview: dict[str, Any]) -> None:
    if preview["unchanged"]:
        click.echo(f"dry run: policy {preview['policy']} is already at version {preview['version']}: a no-op")
        return
    click.echo(
        f"dry run: version {preview['version']} of {preview['policy']} (now {preview['current']}) would retire "
        f"{plural(preview['retired'], 'memory')}, {preview['memory_api']:,} of them Memory API entries; "
        "nothing was written"
    )
    for t in preview["tenants"]:
        click.echo(f"  {t['tenant']}\t{plural(t['retired'], 'memory')}\t{t['memory_api']:,} Memory API")


@policy_group.command("show")
@json_option
@with_warden
def policy_show(warden: Warden, as_json: bool) -> None:
    """Current version of every policy that has one."""
    policies = warden.policies(caller=OPERATOR)

    def show() -> None:
        if not policies:  # a header over nothing would say nothing
            click.echo("no policy version has been set: every policy is at version 1 until `memwarden policy set`")
            return
        table(("policy", "version"), sorted(policies.items()))

    emit({"policies": policies}, as_json, show)


@cli.command()
@click.option("--id", "memory_id", default=None, help="Erase this memory (every version).")
@click.option("--user", default=None, help="Erase every memory about or for this user.")
@click.option("--tenant", default=None, help="Only in this tenant (needed for an id held in several).")
@click.option("--reason", required=True, help="Why: kept in the log.")
@json_option
@with_warden
def erase(
    warden: Warden, memory_id: str | None, user: str | None, tenant: str | None, reason: str, as_json: bool
) -> None:
    """A deletion request: the texts (summary and content, every version) are destroyed, the history stays."""
    result = warden.erase(memory_id=memory_id, user=user, tenant=tenant, reason=reason, caller=OPERATOR)
    note = (
        "" if result.cleared else " (its bytes leave the files once older transactions end: the scheduler finishes it)"
    )
    emit(result.as_dict(), as_json, f"erased {plural(result.erased, 'memory')}{note}")


# the auditors' and the operators' commands live in their own modules
