"""Commands for operators: the HTTP and MCP servers, the scheduler and API keys."""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

import click
from memwarden.engine import OPERATOR

from ..http._fair import PER_LANE
from ..http._server import HEAD_TIMEOUT_S, MAX_CONNECTIONS
from ._common import Group, State, _refuse_damaged, cli, emit, json_option, with_warden
from ._output import table

if TYPE_CHECKING:
    from memwarden.engine import Warden

# -- serving ------------------------------------------------------------------------------------


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8077, show_default=True, help="Port to listen on.")
@click.option(
    "--scheduler-interval",
    type=click.FloatRange(0.1, 86400),
    default=30.0,
    show_default=True,
    help="Seconds between runs of the embedded scheduler's jobs.",
)
@click.option("--no-scheduler", is_flag=True, help="Do not embed the scheduler.")
@click.option(
    "--max-content",
    type=click.IntRange(1, 2**31),
    default=1024 * 1024,
    show_default=True,
    help="Largest accepted content, in bytes.",
)
@click.option(
    "--allow-local-sources",
    is_flag=True,
    help="Development: accept file:// and git sources from HTTP clients, and fetch from local and private addresses.",
)
@click.option(
    "--demo-key",
    "demo_key",
    type=click.Path(dir_okay=False),
    default=None,
    help="Keep a demo agent key (tenant demo, agent demo-agent) in this file, made anew when missing or revoked, "
    "and print it with examples.",
)
@click.option(
    "--head-timeout",
    type=click.FloatRange(0.5, 3600),
    default=HEAD_TIMEOUT_S,
    show_default=True,
    help="Seconds a client has to send a request's head (line and headers) before its connection is closed.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(1, 1_000_000),
    default=MAX_CONNECTIONS,
    show_default=True,
    help="Connections and requests served at once; past it a request is answered 503 at once.",
)
@click.option(
    "--per-key",
    type=click.IntRange(1, 10_000),
    default=PER_LANE,
    show_default=True,
    help="Requests one key (or one address without a valid key) has running at once; the rest wait their turn, "
    "and past 1000 waiting are answered 429.",
)
@with_warden
def serve(
    warden: Warden,
    host: str,
    port: int,
    scheduler_interval: float,
    no_scheduler: bool,
    max_content: int,
    allow_local_sources: bool,
    demo_key: str | None,
    head_timeout: float,
    max_connections: int,
    per_key: int,
) -> None:
    """HTTP server (OpenAPI at /docs, MCP at /mcp) with the scheduler embedded."""
    from memwarden.events import SQLiteEventLog

    from .._own_process import collector_paused, trim_heap
    from ..http import create_app
    from ..http._server import serve as run_server

    _refuse_damaged(warden)
    # this process is the server's own: what it does to it, each for a target (``_own_process``)
    warden.holding_store = collector_paused
    log = getattr(warden.store, "log", None)
    if isinstance(log, SQLiteEventLog):
        log.after_release.append(trim_heap)
    if demo_key is not None:
        # in this process rather than a `keys` command before it: one Python start, not two
        click.echo(demo_banner(_kept_demo_key(warden, demo_key), host, port, warden.path))
    else:
        click.echo(
            f"memwarden on http://{host}:{port}  ({store_line(warden.path)}; OpenAPI at /docs; MCP at /mcp;"
            " console at /console)\nevery request needs a key: memwarden keys create --role agent --tenant T"
            " (or serve --demo-key FILE for a demo agent key)"
        )
    app = create_app(
        warden,
        max_content=max_content,
        scheduler=not no_scheduler,
        scheduler_interval=scheduler_interval,
        self_url=f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}",
        allow_local_sources=allow_local_sources,
        per_key=per_key,
    )
    run_server(app, host=host, port=port, head_timeout=head_timeout, max_connections=max_connections)


def _kept_demo_key(warden: Warden, path: str) -> str:
    from memwarden.engine import KeyStore

    keys = KeyStore(warden)
    try:
        kept = open(path, encoding="utf-8").read().strip()
    except FileNotFoundError:
        kept = ""
    except OSError as exc:
        raise click.BadParameter(f"{path}: {exc.strerror}", param_hint="'--demo-key'") from None
    if kept and keys.authenticate(kept) is not None:
        return kept
    key, _ = keys.create("agent", tenants=("demo",), agent="demo-agent", caller=OPERATOR)
    # written whole or not at all, readable by its owner only: it is a credential
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(key + "\n")
    os.replace(tmp, path)
    return key


def store_line(database: str) -> str:
    """Which store a server uses, its password left out (``warden.path`` is already redacted)."""
    kind = "PostgreSQL" if database.startswith(("postgres://", "postgresql://")) else "SQLite"
    return f"store {kind} {database}"


def demo_banner(key: str, host: str, port: int, database: str) -> str:
    url = f"http://{host}:{port}"
    return f"""memwarden on {url}  ({store_line(database)}; OpenAPI at /docs; MCP at /mcp; console at /console)
demo agent key (tenant "demo", agent "demo-agent"):

    {key}

try:
    curl -s -X POST {url}/memory/save -H "x-api-key: {key}" \\
         -H 'content-type: application/json' -d '{{"agent":"demo-agent","key":"MEMORY.md","content":"# rules"}}'
    curl -s "{url}/memory/load?agent=demo-agent" -H "x-api-key: {key}"
    open {url}/console and sign in with the key (a security or auditor key sees more:
    .venv/bin/memwarden keys create --role auditor)"""


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@json_option
@with_warden
def backup(warden: Warden, file: str, as_json: bool) -> None:
    """Copy the SQLite store to FILE while the server writes (PostgreSQL: use pg_dump)."""
    data = warden.backup(file, caller=OPERATOR)
    emit(data, as_json, f"backup of seq {data['head_seq']} in {data['file']} ({data['bytes']:,} bytes)")


@cli.command()
@click.argument("backup_file", metavar="BACKUP", type=click.Path(dir_okay=False))
@json_option
@click.pass_obj
def restore(state: State, backup_file: str, as_json: bool) -> None:
    """Put BACKUP (made by `memwarden backup`) in place of the --db store,
    re-applying everything the store it replaces took out since: erasures,
    revocations, invalidations, key revocations, policy changes (stop the server first;
    PostgreSQL: pg_restore, then reapply)."""
    state.close()  # this process's own connection to the store is not one that holds it
    from memwarden.engine import restore as restore_store

    data = restore_store(state.db, backup_file)
    text = f"restored {data['backup']} (head seq {data['head_seq']}) in place of {data['file']}"
    if not data["replaced"]:
        text += "; there was no store to replace, so nothing taken out since the backup could be re-applied"
    elif again := _reapplied(data):
        text += f"; re-applied what was taken out since the backup: {again}"
    emit(data, as_json, text)


def _reapplied(data: dict[str, Any]) -> str:
    """The counts of a restore's re-applications, in words; empty when none."""
    names = (
        ("erasures_reapplied", "erasures"),
        ("erasure_marks_carried", "erasures of versions not held here"),
        ("revocations_reapplied", "revocations"),
        ("invalidations_reapplied", "invalidations"),
        ("key_revocations_reapplied", "key revocations"),
        ("policy_changes_reapplied", "policy changes"),
    )
    return ", ".join(f"{data[field]} {name}" for field, name in names if data[field])


def _reapply(warden: Warden, replaced: str, as_json: bool) -> None:
    data = warden.reapply(replaced, caller=OPERATOR)
    emit(data, as_json, f"re-applied from {data['replaced']}: {_reapplied(data) or 'nothing left to carry'}")


@cli.command("reapply")
@click.argument("replaced", metavar="STORE")
@json_option
@with_warden
def reapply(warden: Warden, replaced: str, as_json: bool) -> None:
    """Take out again in the --db store everything STORE (the store it
    replaces: a URL or file) took out: erasures, revocations,
    invalidations, key revocations, policy changes; after a pg_restore of a dump."""
    _reapply(warden, replaced, as_json)


@cli.command("reapply-erasures")
@click.argument("replaced", metavar="STORE")
@json_option
@with_warden
def reapply_erasures(warden: Warden, replaced: str, as_json: bool) -> None:
    """The former name of `reapply`, kept: take out again in the --db store
    everything STORE (the store it replaces) took out, erasures and all."""
    _reapply(warden, replaced, as_json)


@cli.command("mcp")
@with_warden
def mcp_cmd(warden: Warden) -> None:
    """MCP server on stdio (MEMWARDEN_API_KEY binds it to a key's rights)."""
    from ..mcp import run_stdio

    run_stdio(warden)


@cli.group("keys", cls=Group)
def keys_group() -> None:
    """API keys for the HTTP and MCP servers."""


@keys_group.command("create")
@click.option(
    "--role",
    type=click.Choice(["agent", "security", "auditor"]),
    required=True,
    help="agent: its tenants' memories; security: revoke, erase, policies; auditor: read only.",
)
@click.option("--tenant", "tenants", multiple=True, help="A tenant an agent key may use (repeatable).")
@click.option("--agent", default=None, help="Bind an agent key to this agent name.")
@json_option
@with_warden
def keys_create(warden: Warden, role: str, tenants: tuple[str, ...], agent: str | None, as_json: bool) -> None:
    """Create a key; it is printed once and only its hash is kept."""
    from memwarden.engine import KeyStore

    key, principal = KeyStore(warden).create(role, tenants=tenants, agent=agent, caller=OPERATOR)
    emit({"key": key, **principal.as_dict()}, as_json, key)


@keys_group.command("list")
@json_option
@with_warden
def keys_list(warden: Warden, as_json: bool) -> None:
    """Every key (never the secret)."""
    from memwarden.engine import KeyStore

    keys = KeyStore(warden).list(caller=OPERATOR)

    def show() -> None:
        table(
            ("key_id", "role", "tenants", "agent", "created_at", "status"),
            [
                (
                    k["key_id"],
                    k["role"],
                    ",".join(k["tenants"]) or "*",
                    k["agent"] or "",
                    k.get("created_at") or "",
                    f"revoked {k['revoked_at']}" if k["revoked_at"] else "active",
                )
                for k in keys
            ],
        )

    emit({"keys": keys}, as_json, show)


@keys_group.command("revoke")
@click.argument("key_id")
@json_option
@with_warden
def keys_revoke(warden: Warden, key_id: str, as_json: bool) -> None:
    """Disable a key at once; exit 1 if no active key has that id."""
    from memwarden.engine import KeyStore

    done = KeyStore(warden).revoke(key_id, caller=OPERATOR)
    emit({"key_id": key_id, "revoked": done}, as_json, f"{key_id} revoked" if done else f"{key_id}: no active key")
    if not done:
        sys.exit(1)


@cli.command()
@click.option(
    "--interval",
    type=click.FloatRange(0.1, 86400),
    default=30.0,
    show_default=True,
    help="Seconds between runs of the jobs.",
)
@click.option("--once", is_flag=True, help="Run every job once and exit (for tests and cron).")
@json_option
@with_warden
def scheduler(warden: Warden, interval: float, once: bool, as_json: bool) -> None:
    """Expiry events, re-verification and read-back confirmation."""
    from memwarden.engine import Scheduler

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
