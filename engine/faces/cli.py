"""The ``memwarden`` command line (the contract is ../shared/CLI.md).

Exit codes: 0 success; 1 the answer is "no" (not usable, check failed,
cache miss, not found); 2 bad input or usage, with a message on stderr that
names the field and the problem.
"""

from __future__ import annotations

import functools
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from memwarden.engine import (
    FetchFailed,
    InvalidInput,
    Scheduler,
    StaleView,
    TtlPolicy,
    Warden,
    configure_logging,
    readback_records,
)
from memwarden.events import LogDamaged, LogDiverged, StorageError, canonical_json


class Answer(Exception):
    """A command's answer was "no": print it, exit 1."""


class Group(click.Group):
    """Maps memwarden's errors to the contract's exit codes."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except LookupError as exc:
            click.echo(f"Error: {_message(exc)}", err=True)
            ctx.exit(1)
        except (StaleView, FetchFailed) as exc:
            click.echo(f"Error: {exc}", err=True)
            ctx.exit(1)
        except (InvalidInput, LogDamaged, LogDiverged, ValueError, PermissionError) as exc:
            click.echo(f"Error: {_message(exc)}", err=True)
            ctx.exit(2)
        except StorageError as exc:
            click.echo(f"Error: storage: {exc}", err=True)
            ctx.exit(2)
        except sqlite3.DatabaseError as exc:
            click.echo(f"Error: database: {exc} (is the file damaged? run 'memwarden audit verify')", err=True)
            ctx.exit(2)


def _message(exc: BaseException) -> str:
    return exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], str) else str(exc)


class State:
    def __init__(self, db: str, policy_file: str | None) -> None:
        self.db = db
        self.policy_file = policy_file
        self._warden: Warden | None = None

    @property
    def warden(self) -> Warden:
        if self._warden is None:
            policy = TtlPolicy.from_file(self.policy_file) if self.policy_file else None
            self._warden = Warden(self.db, policy=policy)
        return self._warden

    def close(self) -> None:
        if self._warden is not None:
            self._warden.close()


def emit(data: Any, as_json: bool, text: Callable[[], None] | str | None = None) -> None:
    if as_json:
        click.echo(canonical_json(data))
    elif callable(text):
        text()
    elif text is not None:
        click.echo(text)


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")(fn)


def with_warden(fn: Callable[..., Any]) -> Callable[..., Any]:
    @click.pass_obj
    @functools.wraps(fn)
    def wrapper(state: State, *args: Any, **kwargs: Any) -> Any:
        return fn(state.warden, *args, **kwargs)

    return wrapper


def scope_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for name, help_ in reversed(
        [
            ("--project", "Project within the tenant."),
            ("--permission", "The permission the memory was obtained under."),
            ("--user", "The user the memory is about or for."),
            ("--agent", "The agent that holds the memory."),
        ]
    ):
        fn = click.option(name, default=None, help=help_)(fn)
    return fn


def _scope(
    tenant: str,
    project: str | None,
    permission: str | None,
    user: str | None,
    agent: str | None,
    tool: str | None = None,
) -> dict[str, Any]:
    return {
        k: v
        for k, v in dict(
            tenant=tenant, project=project, permission=permission, user=user, agent=agent, tool=tool
        ).items()
        if v is not None
    }


def _refuse_damaged(warden: Warden) -> None:
    """Long-running faces check the file and the chain before they serve."""
    report = warden.audit_verify()
    if not report["ok"]:
        where = f" at seq {report['first_bad_seq']}" if report.get("first_bad_seq") else ""
        click.echo(
            f"Error: database: {warden.path} is damaged{where}: {report['problem']} (see 'memwarden audit verify')",
            err=True,
        )
        sys.exit(2)


def _content(content: str | None, content_file: str | None) -> str:
    if (content is None) == (content_file is None):
        raise InvalidInput("content", "give exactly one of --content or --content-file")
    if content_file is not None:
        try:
            return Path(content_file).read_bytes().decode("utf-8")
        except OSError as exc:
            raise InvalidInput("content-file", f"{content_file}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise InvalidInput("content-file", f"{content_file} is not UTF-8 (byte {exc.start})") from None
    return content  # type: ignore[return-value]


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    envvar="MEMWARDEN_DB",
    default="memwarden.db",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="Database file (env MEMWARDEN_DB); created on first use.",
)
@click.option(
    "--policy-file",
    envvar="MEMWARDEN_POLICY",
    default=None,
    type=click.Path(dir_okay=False),
    help="TOML file of TTLs per kind (env MEMWARDEN_POLICY).",
)
@click.version_option(package_name="memwarden")
@click.pass_context
def cli(ctx: click.Context, db: str, policy_file: str | None) -> None:
    """memwarden: may an agent use this remembered fact now?"""
    configure_logging(level=os.environ.get("MEMWARDEN_LOG_LEVEL", "WARNING"))
    state = State(db, policy_file)
    ctx.obj = state
    ctx.call_on_close(state.close)


# -- memories -------------------------------------------------------------------------


@cli.command()
@click.option("--id", "memory_id", required=True, help="Memory id; saving an existing id makes a new version.")
@click.option("--kind", required=True, help="Kind of memory (sets the TTL from the policy file).")
@click.option("--summary", required=True, help="What the memory says, in short.")
@click.option("--content", default=None, help="The remembered text.")
@click.option("--content-file", default=None, type=click.Path(dir_okay=False), help="Read the text from a file.")
@click.option("--source-url", required=True, help="Where the content came from.")
@click.option("--tenant", required=True)
@scope_options
@click.option("--tool", default=None, help="Tool that produced it (a tool result).")
@click.option("--tool-version", default=None)
@click.option("--input-hash", default=None)
@click.option("--source", default=None, help="Path of the source (in --repo when given).")
@click.option("--repo", default=None, type=click.Path(file_okay=False), help="Git repository holding --source.")
@click.option("--branch", default=None)
@click.option("--fetched-at", default=None, help="When the content was fetched (default: now).")
@click.option("--expires-at", default=None)
@click.option("--ttl", default=None, help="Lifetime from fetched_at: 90s, 15m, 6h, 30d.")
@click.option("--policy", "policy_key", default="default", show_default=True)
@click.option("--revocation-version", type=int, default=None, help="Policy version (default: the current one).")
@click.option("--checksum", default=None, help="sha256:<hex> the content must match.")
@click.option(
    "--derived-from",
    "derived_from",
    multiple=True,
    help="A memory this one was drawn from (repeatable); each must be usable now.",
)
@json_option
@with_warden
def save(
    warden: Warden,
    memory_id: str,
    kind: str,
    summary: str,
    content: str | None,
    content_file: str | None,
    source_url: str,
    tenant: str,
    project: str | None,
    permission: str | None,
    user: str | None,
    agent: str | None,
    tool: str | None,
    tool_version: str | None,
    input_hash: str | None,
    source: str | None,
    repo: str | None,
    branch: str | None,
    fetched_at: str | None,
    expires_at: str | None,
    ttl: str | None,
    policy_key: str,
    revocation_version: int | None,
    checksum: str | None,
    derived_from: tuple[str, ...],
    as_json: bool,
) -> None:
    """Record a memory with its provenance."""
    parts = (tool_version, input_hash)
    if any(parts) and not all((tool, *parts)):
        raise InvalidInput("tool", "--tool, --tool-version and --input-hash go together")
    result = warden.save(
        memory_id=memory_id,
        kind=kind,
        summary=summary,
        content=_content(content, content_file),
        source_url=source_url,
        scope=_scope(tenant, project, permission, user, agent, tool),
        fetched_at=fetched_at,
        expires_at=expires_at,
        ttl=ttl,
        source=source,
        repo=str(Path(repo).resolve()) if repo else None,
        branch=branch,
        policy=policy_key,
        revocation_version=revocation_version,
        checksum=checksum,
        derived_from=derived_from,
        cache_key={"tool": tool, "tool_version": tool_version, "input_hash": input_hash}
        if all((tool, *parts))
        else None,
    )
    emit(
        result.as_dict(),
        as_json,
        f"saved {result.memory_id} v{result.version} at seq {result.seq} "
        f"({result.checksum}, expires {result.expires_at or 'never'})",
    )


def _print_view(view: dict[str, Any]) -> None:
    state = "usable" if view["usable"] else f"NOT usable: {view['reason']} (action: {view['action']})"
    click.echo(f"{view['memory_id']} v{view['version']} [{view['status']}] {state}")
    if view.get("detail"):
        click.echo(f"  {view['detail']}")
    click.echo(f"  {view['summary'] or '(erased)'}")
    click.echo(f"  source {view['source_url']}  fetched {view['fetched_at']}  expires {view['expires_at'] or 'never'}")
    if view.get("content") is not None:
        click.echo(view["content"])


@cli.command()
@click.argument("memory_id")
@click.option("--min-seq", type=int, default=None, help="Serve only a view that has applied this seq.")
@json_option
@with_warden
def get(warden: Warden, memory_id: str, min_seq: int | None, as_json: bool) -> None:
    """One memory, its text checked against its checksum; exit 1 if not usable."""
    view = warden.get(memory_id, min_seq=min_seq).as_dict()
    emit(view, as_json, lambda: _print_view(view))
    if not view["usable"]:
        sys.exit(1)


@cli.command()
@click.option("--tenant", required=True)
@scope_options
@click.option("--tool", default=None)
@click.option("--kind", default=None)
@click.option("--text", default=None, help="Full-text search over summary and content.")
@click.option("--all", "include_unusable", is_flag=True, help="Every memory, with why it is not usable.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True)
@click.option("--min-seq", type=int, default=None)
@click.option("--no-content", is_flag=True, help="Leave the texts out of the answer.")
@json_option
@with_warden
def query(
    warden: Warden,
    tenant: str,
    project: str | None,
    permission: str | None,
    user: str | None,
    agent: str | None,
    tool: str | None,
    kind: str | None,
    text: str | None,
    include_unusable: bool,
    limit: int,
    min_seq: int | None,
    no_content: bool,
    as_json: bool,
) -> None:
    """Usable memories in a scope (with --all: every memory and why not)."""
    views = warden.query(
        tenant=tenant,
        project=project,
        permission=permission,
        user=user,
        agent=agent,
        tool=tool,
        kind=kind,
        text=text,
        include_unusable=include_unusable,
        limit=limit,
        min_seq=min_seq,
        with_content=not no_content,
    )
    data = {"memories": [v.as_dict() for v in views]}

    def show() -> None:
        for v in data["memories"]:
            why = "usable" if v["usable"] else f"{v['reason']} -> {v['action']}"
            click.echo(f"{v['memory_id']}\t{v['status']}\t{why}\t{v['summary'] or ''}")

    emit(data, as_json, show)


@cli.command()
@click.argument("memory_id", required=False)
@click.option("--due", "all_due", is_flag=True, help="Re-verify everything that is due.")
@click.option("--accept", is_flag=True, help="Save changed content as a new version.")
@click.option("--limit", type=click.IntRange(1), default=None)
@json_option
@with_warden
def verify(
    warden: Warden, memory_id: str | None, all_due: bool, accept: bool, limit: int | None, as_json: bool
) -> None:
    """Re-check memories against their source; exit 1 if any check failed or changed."""
    if (memory_id is None) == (not all_due):
        raise InvalidInput("memory_id", "give a memory id or --due, not both")
    results = warden.verify_due(accept=accept, limit=limit) if all_due else [warden.verify(memory_id, accept=accept)]  # type: ignore[arg-type]
    data = {"results": [r.as_dict() for r in results]}

    def show() -> None:
        for r in results:
            click.echo(f"{r.memory_id}\t{r.outcome}" + (f"\t{r.detail}" if r.detail else ""))

    emit(data, as_json, show)
    if any(r.outcome not in ("verified", "updated") for r in results):
        sys.exit(1)


@cli.command()
@click.option("--limit", type=click.IntRange(1), default=None)
@json_option
@with_warden
def due(warden: Warden, limit: int | None, as_json: bool) -> None:
    """What must be re-verified now: memory_id source_url reason, a line."""
    items = warden.due(limit=limit)
    emit(
        {"due": [i.as_dict() for i in items]},
        as_json,
        lambda: [click.echo(f"{i.memory_id} {i.source_url} {i.reason}") for i in items],
    )


@cli.command("import-records")
@click.argument("file", type=click.Path(dir_okay=False))
@json_option
@with_warden
def import_records(warden: Warden, file: str, as_json: bool) -> None:
    """Import a JSONL file of memory records (all or nothing)."""
    result = warden.import_records(file)
    for refusal in result.refused:
        click.echo(
            f"refused line {refusal['line']} ({refusal['memory_id']}): "
            f"{refusal.get('revocation_id') or refusal.get('reason')}",
            err=True,
        )
    emit(
        result.as_dict(),
        as_json,
        f"imported {result.imported} records"
        + (f", {result.skipped} already present" if result.skipped else "")
        + (f", {len(result.refused)} refused" if result.refused else ""),
    )


# -- security -----------------------------------------------------------------------------


@cli.command()
@click.option("--tenant", default=None)
@scope_options
@click.option("--tool", default=None)
@click.option("--kind", default=None)
@click.option("--source-prefix", default=None, help="Every memory whose source_url starts with this.")
@click.option("--id", "ids", multiple=True, help="A memory id (repeatable).")
@click.option("--everything", is_flag=True, help="The real emergency: every memory.")
@click.option("--reason", required=True)
@click.option("--by", default="security", show_default=True, help="Who issues the revocation.")
@click.option("--wait", is_flag=True, help="Block until the read-back is recorded; print its latency.")
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
    as_json: bool,
) -> None:
    """Take a scope out of every read path, at commit."""
    selector = {
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
    result = warden.revoke(selector, reason=reason, by=by)
    data = result.as_dict()
    text = (
        f"{result.revocation_id} in force at seq {result.seq}: {result.covered} memories taken out"
        f" directly, {result.cascaded} drawn from them invalidated"
    )
    if wait:
        readback = Scheduler(warden).read_back(result.revocation_id)
        data["readback"] = {
            k: readback[k] for k in ("readback_status", "readback_latency_ms", "still_visible", "leaked_ids")
        }
        text += f"\nread-back {readback['readback_status']} after {readback['readback_latency_ms']:.1f} ms"
        if readback["leaked_ids"]:
            text += f"; still visible: {', '.join(readback['leaked_ids'])}"
    emit(data, as_json, text)
    if wait and data["readback"]["readback_status"] != "confirmed":
        sys.exit(1)


@cli.command()
@click.argument("revocation_id")
@json_option
@with_warden
def readback(warden: Warden, revocation_id: str, as_json: bool) -> None:
    """The read-back confirmation records of a revocation; exit 1 if none confirms it."""
    data = readback_records(warden, revocation_id)

    def show() -> None:
        if not data["records"]:
            click.echo(f"{revocation_id}: no read-back recorded yet")
        for r in data["records"]:
            click.echo(
                f"{r['seq']:>8}  {r['recorded_at']}  {r['type']}  covered {r['covered']}  "
                f"still visible {r['still_visible']}  latency {r['latency_ms']:.1f} ms  "
                f"paths {','.join(r['paths_checked'])}"
            )

    emit(data, as_json, show)
    if not data["confirmed"]:
        sys.exit(1)


@cli.command()
@click.option(
    "--interval", type=click.FloatRange(0.1), default=30.0, show_default=True, help="Seconds between runs of the jobs."
)
@click.option("--once", is_flag=True, help="Run every job once and exit (for tests and cron).")
@json_option
@with_warden
def scheduler(warden: Warden, interval: float, once: bool, as_json: bool) -> None:
    """Expiry events, re-verification and read-back confirmation."""
    _refuse_damaged(warden)
    jobs = Scheduler(warden, interval=interval)
    if once:
        summary = jobs.run_once()
        emit(
            summary,
            as_json,
            f"expired {summary['expired']}, read-backs {len(summary['readbacks'])}, "
            f"re-verified {len(summary['reverified'])}",
        )
        return
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    click.echo(f"scheduler running every {interval}s on {warden.path}; SIGTERM stops it", err=True)
    jobs.run_forever(stop)


@cli.group("policy", cls=Group)
def policy_group() -> None:
    """Policy versions."""


@policy_group.command("set")
@click.argument("key")
@click.argument("version", type=int)
@json_option
@with_warden
def policy_set(warden: Warden, key: str, version: int, as_json: bool) -> None:
    """Make VERSION the current version of policy KEY (versions only go up)."""
    seq = warden.set_policy(key, version)
    emit({"policy": key, "version": version, "seq": seq}, as_json, f"policy {key} at version {version} (seq {seq})")


@policy_group.command("show")
@json_option
@with_warden
def policy_show(warden: Warden, as_json: bool) -> None:
    """Current version of every policy that has one."""
    policies = warden.policies()
    emit({"policies": policies}, as_json, lambda: [click.echo(f"{k}\t{v}") for k, v in sorted(policies.items())])


@cli.command()
@click.option("--id", "memory_id", default=None)
@click.option("--user", default=None)
@click.option("--reason", required=True)
@json_option
@with_warden
def erase(warden: Warden, memory_id: str | None, user: str | None, reason: str, as_json: bool) -> None:
    """A deletion request: the text is destroyed, the history stays."""
    count = warden.erase(memory_id=memory_id, user=user, reason=reason)
    emit({"erased": count}, as_json, f"erased {count} memories")


# -- auditors -------------------------------------------------------------------------------


@cli.command()
@click.argument("memory_id")
@click.option("--as-of", default=None, help="Explain as of this time.")
@json_option
@with_warden
def explain(warden: Warden, memory_id: str, as_of: str | None, as_json: bool) -> None:
    """The memory's history and why it is (not) usable."""
    data = warden.explain(memory_id, as_of=as_of)

    def show() -> None:
        for h in data["history"]:
            click.echo(
                f"{h['seq']:>8}  {h['recorded_at']}  {h['actor']:<12} {h['event']:<28} -> {h['status_after']}"
                + (f"  ({h['note']})" if h["note"] else "")
            )
        verdict = "usable" if data["usable"] else f"NOT usable: {data['reason']} (action: {data['action']})"
        click.echo(f"as of {data['as_of']} (seq {data['seq']}): {verdict}")

    emit(data, as_json, show)


@cli.command()
@click.option("--as-of", default=None)
@click.option("--seq", type=int, default=None)
@click.option("--tenant", default=None)
@click.option("--all", "include_unusable", is_flag=True, help="Also the memories that were not usable then.")
@json_option
@with_warden
def replay(
    warden: Warden, as_of: str | None, seq: int | None, tenant: str | None, include_unusable: bool, as_json: bool
) -> None:
    """The usable view as it was then, rebuilt from the log."""
    data = warden.replay(as_of=as_of, seq=seq, tenant=tenant, include_unusable=include_unusable)

    def show() -> None:
        click.echo(f"as of {data['as_of']} (seq {data['seq']}): {len(data['memories'])} memories")
        for m in data["memories"]:
            click.echo(f"{m['memory_id']}\t{m['status']}\t{m['reason'] or 'usable'}\t{m['summary'] or ''}")

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
    data = warden.audit_verify(against)
    if data["ok"]:
        text = f"ok: {data['checked']} events, head seq {data['head_seq']}"
        if against:
            text += f", extends {against.split(':')[0]}"
    else:
        text = f"DAMAGED at seq {data['first_bad_seq']}: {data['problem']}"
    emit(data, as_json, text)
    if not data["ok"]:
        sys.exit(1)


@audit_group.command("head")
@json_option
@with_warden
def audit_head(warden: Warden, as_json: bool) -> None:
    """The current head, to keep elsewhere."""
    data = warden.audit_head()
    emit(data, as_json, f"{data['seq']}:{data['hash']}")


@cli.command("export")
@click.argument("file", type=click.Path(dir_okay=False))
@json_option
@with_warden
def export_cmd(warden: Warden, file: str, as_json: bool) -> None:
    """Write the log as JSONL."""
    count = warden.export(file)
    emit({"events": count}, as_json, f"exported {count} events to {file}")


@cli.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@json_option
@with_warden
def import_cmd(warden: Warden, file: str, as_json: bool) -> None:
    """Import a JSONL log; the whole chain is checked first."""
    count = warden.import_log(file)
    emit({"events": count}, as_json, f"imported {count} events")


@cli.command()
@json_option
@with_warden
def rebuild(warden: Warden, as_json: bool) -> None:
    """Replay every projection from seq 1."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    total = warden.log.head().seq
    with Progress(
        TextColumn("rebuild"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("[progress.data.speed]{task.fields[rate]}"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=as_json,
    ) as progress:
        task = progress.add_task("rebuild", total=total, rate="")

        def advance(n: int) -> None:
            progress.advance(task, n)
            speed = progress.tasks[0].speed
            progress.update(task, rate=f"{speed:,.0f} events/s" if speed else "")

        data = warden.rebuild(progress=advance)
    emit(data, as_json, f"rebuilt from {data['events']} events in {data['seconds']}s")


@cli.group("projections", cls=Group)
def projections_group() -> None:
    """The read models."""


@projections_group.command("check")
@json_option
@with_warden
def projections_check(warden: Warden, as_json: bool) -> None:
    """Compare the live view with a fresh rebuild; exit 1 naming the first difference."""
    result = warden.check_projections().as_dict()
    text = (
        "ok: live view equals a rebuild"
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
    weeks = warden.stats()

    def show() -> None:
        for w in weeks:
            counts = ", ".join(f"{k} {v}" for k, v in w.items() if k != "week" and v)
            click.echo(f"{w['week']}: {counts or 'nothing'}")

    emit({"weeks": weeks}, as_json, show)


@cli.group("cache", cls=Group)
def cache_group() -> None:
    """Tool results under their full cache key."""


def _cache_key_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = scope_options(fn)
    fn = click.option("--tenant", required=True)(fn)
    fn = click.option("--input-hash", required=True)(fn)
    fn = click.option("--tool-version", required=True)(fn)
    return click.option("--tool", required=True)(fn)


@cache_group.command("put")
@_cache_key_options
@click.option("--content", default=None)
@click.option("--content-file", default=None, type=click.Path(dir_okay=False))
@click.option("--source-url", required=True)
@click.option("--ttl", default=None)
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
        content=_content(content, content_file),
        source_url=source_url,
        ttl=ttl,
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
    )
    data = {
        "hit": hit,
        "memory_id": view.memory_id if view else None,
        "content": view.content if (hit and view) else None,
        "reason": reason,
    }
    emit(data, as_json, (view.content if hit and view else f"miss: {reason}"))
    if not hit:
        sys.exit(1)


@cli.group("log", cls=Group)
def log_group() -> None:
    """The event log itself."""


@log_group.command("tail")
@click.option("-n", "count", type=click.IntRange(0, 100_000), default=20, show_default=True)
@json_option
@with_warden
def log_tail(warden: Warden, count: int, as_json: bool) -> None:
    """The last events."""
    events = warden.tail(count)

    def show() -> None:
        for e in events:
            click.echo(f"{e['seq']:>8}  {e['recorded_at']}  {e['actor']:<12} {e['type']:<28} {e['stream']}")

    emit({"events": events}, as_json, show)


# -- serving ------------------------------------------------------------------------------------


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8077, show_default=True)
@click.option("--scheduler-interval", type=click.FloatRange(0.1), default=30.0, show_default=True)
@click.option("--no-scheduler", is_flag=True, help="Do not embed the scheduler.")
@click.option(
    "--max-content",
    type=click.IntRange(1),
    default=1024 * 1024,
    show_default=True,
    help="Largest accepted content, in bytes.",
)
@click.option("--allow-local-sources", is_flag=True, help="Accept file:// and git sources from HTTP clients.")
@with_warden
def serve(
    warden: Warden,
    host: str,
    port: int,
    scheduler_interval: float,
    no_scheduler: bool,
    max_content: int,
    allow_local_sources: bool,
) -> None:
    """HTTP server (OpenAPI at /docs, MCP at /mcp) with the scheduler embedded."""
    import uvicorn

    from .http import create_app

    _refuse_damaged(warden)
    app = create_app(
        warden,
        max_content=max_content,
        scheduler=not no_scheduler,
        scheduler_interval=scheduler_interval,
        self_url=f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}",
        allow_local_sources=allow_local_sources,
    )
    uvicorn.run(app, host=host, port=port, log_level="warning")


@cli.command("mcp")
@with_warden
def mcp_cmd(warden: Warden) -> None:
    """MCP server on stdio (MEMWARDEN_API_KEY binds it to a key's rights)."""
    from .mcp import run_stdio

    run_stdio(warden)


@cli.group("keys", cls=Group)
def keys_group() -> None:
    """API keys for the HTTP and MCP servers."""


@keys_group.command("create")
@click.option("--role", type=click.Choice(["agent", "security", "auditor"]), required=True)
@click.option("--tenant", "tenants", multiple=True, help="A tenant an agent key may use (repeatable).")
@click.option("--agent", default=None, help="Bind an agent key to this agent name.")
@json_option
@with_warden
def keys_create(warden: Warden, role: str, tenants: tuple[str, ...], agent: str | None, as_json: bool) -> None:
    """Create a key; it is printed once and only its hash is kept."""
    from memwarden.engine._keys import KeyStore

    key, principal = KeyStore(warden).create(role, tenants=tenants, agent=agent)
    emit({"key": key, **principal.as_dict()}, as_json, key)


@keys_group.command("list")
@json_option
@with_warden
def keys_list(warden: Warden, as_json: bool) -> None:
    """Every key (never the secret)."""
    from memwarden.engine._keys import KeyStore

    keys = KeyStore(warden).list()

    def show() -> None:
        for k in keys:
            state = f"revoked {k['revoked_at']}" if k["revoked_at"] else "active"
            click.echo(f"{k['key_id']}\t{k['role']}\t{','.join(k['tenants']) or '*'}\t{k['agent'] or ''}\t{state}")

    emit({"keys": keys}, as_json, show)


@keys_group.command("revoke")
@click.argument("key_id")
@json_option
@with_warden
def keys_revoke(warden: Warden, key_id: str, as_json: bool) -> None:
    """Disable a key at once; exit 1 if no active key has that id."""
    from memwarden.engine._keys import KeyStore

    done = KeyStore(warden).revoke(key_id)
    emit({"key_id": key_id, "revoked": done}, as_json, f"{key_id} revoked" if done else f"{key_id}: no active key")
    if not done:
        sys.exit(1)


def main() -> None:
    cli(prog_name="memwarden")


if __name__ == "__main__":
    main()
