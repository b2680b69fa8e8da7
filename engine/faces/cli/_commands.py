"""The ``memwarden`` command line (the contract is ../shared/CLI.md).

Exit codes: 0 success; 1 the answer is "no" (not usable, check failed,
cache miss, not found); 2 bad input or usage, with a message on stderr that
names the field and the problem.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from memwarden.engine import MAX_PAGE, OPERATOR, BatchRefused, InvalidInput

from ._common import (
    VERSION,
    State,
    _content,
    _scope,
    cli,
    emit,
    json_option,
    scope_options,
    with_warden,
)
from ._output import on_terminal, plural, progress, status_line, table
from ._search import run_search, similar_options

if TYPE_CHECKING:
    from memwarden.engine import Warden

# -- memories -------------------------------------------------------------------------


@cli.command()
@click.option("--id", "memory_id", required=True, help="Memory id; saving an existing id makes a new version.")
@click.option("--kind", required=True, help="Kind of memory (sets the TTL from the policy file).")
@click.option("--summary", required=True, help="What the memory says, in short.")
@click.option("--content", default=None, help="The remembered text.")
@click.option("--content-file", default=None, type=click.Path(dir_okay=False), help="Read the text from a file.")
@click.option("--source-url", required=True, help="Where the content came from.")
@click.option("--tenant", required=True, help="Tenant the memory belongs to.")
@scope_options
@click.option("--tool", default=None, help="Tool that produced it (a tool result).")
@click.option("--tool-version", default=None, help="Version of the tool (a tool result).")
@click.option("--input-hash", default=None, help="Hash of the tool's input (a tool result).")
@click.option("--source", default=None, help="Path of the source (in --repo when given).")
@click.option("--repo", default=None, type=click.Path(file_okay=False), help="Git repository holding --source.")
@click.option("--branch", default=None, help="Git branch of --source in --repo (default HEAD).")
@click.option("--fetched-at", default=None, help="When the content was fetched (default: now).")
@click.option("--expires-at", default=None, help="When it stops being usable (default: from the TTL).")
@click.option("--ttl", default=None, help="Lifetime from fetched_at: 90s, 15m, 6h, 30d.")
@click.option("--policy", "policy_key", default="default", show_default=True, help="The policy it was checked under.")
@click.option("--revocation-version", type=VERSION, default=None, help="Policy version (default: the current one).")
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
    revocation_version: int | str | None,
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
        content=_content(content, content_file, warden.limits),
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
        caller=OPERATOR,
    )
    emit(
        result.as_dict(),
        as_json,
        f"saved {result.memory_id} v{result.version} at seq {result.seq} "
        f"({result.checksum}, expires {result.expires_at or 'never'})",
    )


def _print_view(view: dict[str, Any]) -> None:
    state = "usable" if view["usable"] else f"NOT usable: {view['reason']} (action: {view['action']})"
    status_line(f"{view['memory_id']} v{view['version']} [{view['status']}] {state}", view["status"])
    if view.get("detail"):
        click.echo(f"  {view['detail']}")
    click.echo(f"  {view['summary'] or '(erased)'}")
    click.echo(f"  source {view['source_url']}  fetched {view['fetched_at']}  expires {view['expires_at'] or 'never'}")
    if view.get("content") is not None:
        click.echo(view["content"])


TENANT_HELP = "The memory's tenant (needed only where the id is in more than one tenant)."


@cli.command()
@click.argument("memory_id")
@click.option("--tenant", default=None, help=TENANT_HELP)
@click.option(
    "--min-seq", type=click.IntRange(0, 2**62), default=None, help="Serve only a view that has applied this seq."
)
@json_option
@with_warden
def get(warden: Warden, memory_id: str, tenant: str | None, min_seq: int | None, as_json: bool) -> None:
    """One memory, its text checked against its checksum; exit 1 if not usable."""
    view = warden.get(memory_id, tenant=tenant, min_seq=min_seq, caller=OPERATOR).as_dict()
    emit(view, as_json, lambda: _print_view(view))
    if not view["usable"]:
        sys.exit(1)


@cli.command()
@click.option("--tenant", required=True, help="Only this tenant's memories.")
@scope_options
@click.option("--tool", default=None, help="Only results of this tool.")
@click.option("--kind", default=None, help="Only memories of this kind.")
@click.option("--text", default=None, help="Full-text search over summary and content.")
@click.option("--all", "include_unusable", is_flag=True, help="Every memory, with why it is not usable.")
@click.option(
    "--limit", type=click.IntRange(1, MAX_PAGE), default=100, show_default=True, help="At most this many memories."
)
@click.option(
    "--min-seq", type=click.IntRange(0, 2**62), default=None, help="Serve only a view that has applied this seq."
)
@click.option("--no-content", is_flag=True, help="Leave the texts out of the answer.")
@click.option(
    "--offset",
    type=click.IntRange(0, 100_000),
    default=0,
    help="Skip this many answers: the next page of a truncated answer starts at its next_offset.",
)
@similar_options
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
    offset: int,
    similar: str | None,
    mode: str,
    min_similarity: float | None,
    as_json: bool,
) -> None:
    """Usable memories in a scope (with --all: every memory and why not;
    with --similar: the closest in meaning, each with its score)."""
    if similar is not None:
        if text is not None:  # one search at a time: --similar's hybrid mode already matches words
            raise InvalidInput("text", "give --text or --similar, not both (--similar --mode text searches words)")
        if offset:  # a search has no pages: its order is its scores'
            raise InvalidInput("offset", "is for listings; a --similar search answers its best first, without pages")
        scope = dict(project=project, permission=permission, user=user, agent=agent, tool=tool, kind=kind)
        search = dict(
            include_hidden=include_unusable,
            limit=limit,
            min_seq=min_seq,
            with_content=not no_content,
            min_similarity=min_similarity,
        )
        return run_search(warden, tenant=tenant, similar=similar, mode=mode, as_json=as_json, **scope, **search)
    if min_similarity is not None:
        raise InvalidInput("min_similarity", "is for a --similar search")
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
        offset=offset,
        caller=OPERATOR,
    )
    data = {"memories": [v.as_dict() for v in views], **views.told()}

    def show() -> None:
        table(
            ("memory_id", "status", "why", "expires_at", "summary"),
            [
                (
                    v["memory_id"],
                    v["status"],
                    "usable" if v["usable"] else f"{v['reason']} -> {v['action']}",
                    v["expires_at"] or "never",
                    v["summary"] or "(erased)",
                )
                for v in data["memories"]
            ],
        )
        if views.truncated:  # the table says it too: a page cut short is not the whole scope
            click.echo(f"(truncated at limits.max_answer_bytes: --offset {views.next_offset} for the rest)", err=True)

    emit(data, as_json, show)


@cli.command()
@click.argument("memory_id", required=False)
@click.option("--tenant", default=None, help=TENANT_HELP)
@click.option("--due", "all_due", is_flag=True, help="Re-verify everything that is due.")
@click.option("--accept", is_flag=True, help="Save changed content as a new version.")
@click.option("--limit", type=click.IntRange(1, 2**31), default=None, help="At most this many.")
@json_option
@with_warden
def verify(
    warden: Warden,
    memory_id: str | None,
    tenant: str | None,
    all_due: bool,
    accept: bool,
    limit: int | None,
    as_json: bool,
) -> None:
    """Re-check memories against their source; exit 1 if any check failed or changed."""
    if (memory_id is None) == (not all_due):
        raise InvalidInput("memory_id", "give a memory id or --due, not both")
    if all_due:
        results = warden.verify_due(accept=accept, limit=limit, caller=OPERATOR)
    else:
        results = [warden.verify(memory_id, tenant=tenant, accept=accept, caller=OPERATOR)]  # type: ignore[arg-type]
    data = {"results": [r.as_dict() for r in results]}

    def show() -> None:
        for r in results:
            click.echo(f"{r.memory_id}\t{r.outcome}" + (f"\t{r.detail}" if r.detail else ""))

    emit(data, as_json, show)
    if any(r.outcome not in ("verified", "updated") for r in results):
        sys.exit(1)


@cli.command()
@click.option("--limit", type=click.IntRange(1, 2**31), default=None, help="At most this many.")
@click.option(
    "--records",
    "records",
    type=click.Path(dir_okay=False, allow_dash=True),
    default=None,
    help="Scan a file of memory records (-: stdin) instead of the log (revoked, then expired; nothing is written).",
)
@json_option
@click.pass_obj
def due(state: State, limit: int | None, records: str | None, as_json: bool) -> None:
    """What must be re-verified now: memory_id source_url reason, a line."""
    if records is not None:  # a scan of a file needs no database
        from memwarden.engine import _records
        from memwarden.events import SystemClock

        source = sys.stdin.buffer if records == "-" else records
        items = _records.scan_records(source, SystemClock().now())[:limit]
    else:
        items = state.warden.due(limit=limit, caller=OPERATOR)
    emit(
        {"due": [i.as_dict() for i in items]},
        as_json,
        lambda: show_due(items),
    )


def show_due(items: list[Any]) -> None:
    # piped, the lines stay exactly the article's scan (`memory_id source_url
    # reason`, no header): scripts written against that scan keep working
    if on_terminal():
        table(("memory_id", "source_url", "reason"), [(i.memory_id, i.source_url, i.reason) for i in items])
    else:
        for i in items:
            click.echo(f"{i.memory_id} {i.source_url} {i.reason}")


@cli.command("import-records")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@json_option
@with_warden
def import_records(warden: Warden, file: str, as_json: bool) -> None:
    """Import a JSONL file of memory records (``-``: stdin); exit 1 if any was refused.

    An invalid line refuses the whole file (exit 2, nothing written). Each
    valid record is imported, or refused and reported: fetched before a
    revocation that covers it, erased, or under a policy version that is
    not current.
    """
    source = sys.stdin.buffer if file == "-" else file
    with progress("import-records", None if file == "-" else _lines(file), unit="records") as advance:
        result = warden.import_records(source, progress=advance, caller=OPERATOR)
    for refusal in result.refused:
        why = refusal.get("revocation_id") or refusal.get("detail") or refusal.get("reason")
        click.echo(f"refused line {refusal['line']} ({refusal['memory_id']}): {refusal['reason']}: {why}", err=True)
    emit(
        result.as_dict(),
        as_json,
        f"imported {plural(result.imported, 'record')}"
        + (f", {result.skipped:,} already present" if result.skipped else "")
        + (f", {len(result.refused)} refused" if result.refused else ""),
    )
    if result.refused:
        sys.exit(1)


@cli.command("save-many")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@json_option
@with_warden
def save_many(warden: Warden, file: str, as_json: bool) -> None:
    """Save a JSONL file of memories (``-``: stdin) in one transaction, all or none.

    Each line is one JSON object of ``save``'s fields (memory_id, kind,
    summary, content, source_url, scope, ttl or expires_at, derived_from,
    ...). A refusal names every refused line and its field (exit 2) and
    saves nothing.
    """
    memories, problems = [], []
    try:
        stream = sys.stdin.buffer if file == "-" else open(file, "rb")
    except OSError as exc:
        raise InvalidInput("file", f"{file}: {exc.strerror}") from None
    with stream:
        for number, raw in enumerate(stream, start=1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw.decode("utf-8"))
                if not isinstance(line, dict):
                    raise ValueError("a line must be a JSON object of a save's fields")
                memories.append((number, line))
            except (UnicodeDecodeError, ValueError) as exc:
                problems.append({"index": number - 1, "field": None, "problem": f"line {number}: {exc}"})
    if problems:
        raise BatchRefused(problems)
    lines = [number for number, _ in memories]
    try:
        results = warden.save_many([line for _, line in memories], caller=OPERATOR)
    except BatchRefused as exc:  # the batch's indexes, told as the file's line numbers
        raise BatchRefused(
            [
                {**p, "index": lines[p["index"]] - 1, "problem": f"line {lines[p['index']]}: {p['problem']}"}
                if p["index"] is not None
                else p
                for p in exc.problems
            ]
        ) from None
    saved = [r.as_dict() for r in results]
    emit({"saved": saved}, as_json, f"saved {plural(len(saved), 'memory')} (seq {saved[0]['seq']}..{saved[-1]['seq']})")


def _lines(path: str) -> int | None:
    """Lines in a file, for a progress bar's total (None if it cannot be read:
    the command itself then names the problem). A pipe is not counted: what
    this read took from it, the command would not find."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as fh:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    except OSError:
        return None


# the auditors', security staff's and operators' commands live in their own modules
from . import _audit, _security, _serve, _sinks, _vectors  # noqa: E402,F401  (they register on import)


def main() -> None:
    cli(prog_name="memwarden")
