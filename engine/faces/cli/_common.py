"""Shared pieces of the command line: the group, output, options, errors."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

# what every command's module names at import is light: the store, its
# driver, pydantic and the log are imported by the commands that use them,
# so ``memwarden --version`` or ``--help`` answers at once
from memwarden.engine import OPERATOR, BatchRefused, InvalidInput, TooLarge

from .._visible import raw_output, visible_output

if TYPE_CHECKING:
    from memwarden.engine import Limits, Warden


class Answer(Exception):
    """A command's answer was "no": print it, exit 1."""


class Group(click.Group):
    """Every memwarden error as the contract's answer (``memwarden.engine.answer``):
    exit 1 when the answer is "no", 2 for bad input or a refusal."""

    def invoke(self, ctx: click.Context) -> Any:
        # click.echo strips what looks like a colour code from output that is
        # not a terminal: an agent's ESC [2J would vanish unseen. memwarden
        # never colours through click (rich does, on a terminal), so nothing
        # is stripped, and every control character is shown as its escape.
        ctx.color = True
        with visible_output():  # no agent's text reaches a terminal raw (``_visible``)
            return self._answered(ctx)

    def _answered(self, ctx: click.Context) -> Any:
        given = [*getattr(ctx, "_protected_args", ()), *ctx.args]  # the command's words, before they are parsed
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            asked_json = "--json" in given[: given.index("--")] if "--" in given else "--json" in given
            if not asked_json:
                raise
            # a script reading stdout learns of a usage error as of any refusal
            exc.show()
            click.echo(json_text({"error": "usage", "field": _usage_field(exc), "problem": exc.format_message()}))
            ctx.exit(exc.exit_code)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:
            from memwarden.engine import answer

            found = answer(exc)
            if found is None:
                raise
            if isinstance(exc, BatchRefused):
                for problem in exc.problems[1:]:  # the first is the refusal's own line
                    click.echo(f"Error: {_batch_line(problem)}", err=True)
                message = _batch_line(exc.problems[0])
            else:
                message = found.message
            _refuse(ctx, found.exit_code, found.code, message, found.field, found.problem, **found.details)


def _usage_field(exc: click.UsageError) -> str | None:
    """The option or argument a usage error is about, as the engine names fields."""
    option = getattr(exc, "option_name", None)  # an unknown option, or one given without its value
    if isinstance(option, str):
        return option.lstrip("-").replace("-", "_")
    param = getattr(exc, "param", None)
    return param.name if param is not None else None


def _refuse(
    ctx: click.Context,
    code: int,
    error: str,
    message: str,
    field: str | None,
    problem: str | None = None,
    **extra: Any,
) -> None:
    """A refusal: one line on stderr, and with --json its object on stdout
    too, so a script reading stdout learns why without parsing stderr."""
    click.echo(f"Error: {message}", err=True)
    state = ctx.find_object(State)
    if state is not None and state.as_json:
        click.echo(json_text({"error": error, "field": field, "problem": problem or message, **extra}))
    ctx.exit(code)


def _batch_line(problem: dict[str, Any]) -> str:
    if problem["problem"].startswith("line "):  # a file's line, as save-many names it
        return problem["problem"] + (f" ({problem['field']})" if problem.get("field") else "")
    if problem.get("index") is None:  # the batch as a whole (its size): its field is the batch itself
        return f"memories: {problem['problem']}"
    field = f".{problem['field']}" if problem.get("field") else ""
    return f"memories[{problem['index']}]{field}: {problem['problem']}"


class VersionParam(click.ParamType):
    """A policy version: a number, or a key like ``policy-42-v7``."""

    name = "VERSION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | str:
        # the engine validates (and names the field); numbers print as numbers
        from memwarden.events import version_number

        number = version_number(str(value))
        return str(value) if number is None else number


VERSION = VersionParam()


class State:
    def __init__(self, db: str, policy_file: str | None, read_db: str | None = None) -> None:
        self.as_json = False  # set by --json as the command's options are parsed
        self.db = db
        self.read_db = read_db
        self.policy_file = policy_file
        self._warden: Warden | None = None

    @property
    def warden(self) -> Warden:
        if self._warden is None:
            from memwarden.engine import PolicyFile, Warden

            settings = PolicyFile.read(self.policy_file) if self.policy_file else PolicyFile()
            fetchers = settings.fetchers()
            self._warden = Warden(
                self.db,
                policy=settings.ttl,
                fetchers=fetchers,
                embedder=settings.embedder(fetchers),
                limits=settings.limits,
                read_url=self.read_db,
                sinks=settings.sinks,
                schedule=settings.schedule,
            )
        return self._warden

    def close(self) -> None:
        if self._warden is not None:
            self._warden.close()


# long-running services keep their warnings on stderr by default: an
# operator reads them there; a one-shot command says what it has to say once
SERVICES = frozenset({"serve", "scheduler", "mcp"})
LEVELS = ("debug", "info", "warning", "error", "critical")


def log_level(verbose: int, setting: str | None, command: str | None) -> str | None:
    """The structured log's level, or None for no log at all."""
    if verbose:
        return "DEBUG" if verbose > 1 else "INFO"
    if setting:
        value = setting.strip().lower()
        if value in ("off", "none", "0", "false"):
            return None
        if value not in LEVELS:
            raise click.BadParameter(f"must be one of {', '.join(LEVELS)} or off", param_hint="MEMWARDEN_LOG")
        return value.upper()
    return "WARNING" if command in SERVICES else None


def json_text(data: Any) -> str:
    """``data`` as the one JSON document a command prints (canonical: sorted keys, no spaces)."""
    from memwarden.events import canonical_json

    return canonical_json(data)


def emit(data: Any, as_json: bool, text: Callable[[], None] | str | None = None) -> None:
    if as_json:
        click.echo(json_text(data))
    elif callable(text):
        text()
    elif text is not None:
        click.echo(text)


def _remember_json(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    state = ctx.find_object(State)
    if state is not None and value:
        state.as_json = True
    return value


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--json", "as_json", is_flag=True, callback=_remember_json, help="Print one JSON document on stdout."
    )(fn)


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
    report = warden.audit_verify(caller=OPERATOR)
    if not report["ok"]:
        where = f" at seq {report['first_bad_seq']}" if report.get("first_bad_seq") else ""
        click.echo(
            f"Error: database: {warden.path} is damaged{where}: {report['problem']} (see 'memwarden audit verify')",
            err=True,
        )
        sys.exit(2)


def _content(content: str | None, content_file: str | None, limits: Limits) -> str:
    if (content is None) == (content_file is None):
        raise InvalidInput("content", "give exactly one of --content or --content-file")
    if content_file is not None:
        try:
            with open(content_file, "rb") as fh:
                data = fh.read(limits.max_content_bytes + 1)  # never read more than may be kept
            if len(data) > limits.max_content_bytes:
                raise TooLarge(
                    "content-file",
                    f"{content_file} is larger than {limits.max_content_bytes} bytes (limits.max_content_bytes)",
                )
            return data.decode("utf-8")
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
    help=(
        "The store: an SQLite file path, or a URL (sqlite:///relative.db, sqlite:////absolute.db); "
        "env MEMWARDEN_DB. Created on first use."
    ),
)
@click.option(
    "--read-db",
    envvar="MEMWARDEN_READ_DB",
    default=None,
    help=(
        "A streaming replica of a PostgreSQL --db to read from (env MEMWARDEN_READ_DB); a read the replica "
        "has not caught up with, or one after a revocation it has not replayed, goes to the primary."
    ),
)
@click.option(
    "--policy-file",
    envvar="MEMWARDEN_POLICY",
    default=None,
    type=click.Path(dir_okay=False),
    help=(
        "The policy file (TOML): TTLs per kind, fetch rules, limits, scheduler intervals, embedder, sinks; "
        "every key in docs/reference/configuration.md (env MEMWARDEN_POLICY)."
    ),
)
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="Write the structured log to stderr (-v info, -vv debug); or set MEMWARDEN_LOG to a level.",
)
@click.version_option(package_name="memwarden")
@click.pass_context
def cli(ctx: click.Context, db: str, read_db: str | None, policy_file: str | None, verbose: int) -> None:
    """memwarden: may an agent use this remembered fact now?"""
    if ctx.invoked_subcommand in SERVICES:
        raw_output()
    level = log_level(verbose, os.environ.get("MEMWARDEN_LOG"), ctx.invoked_subcommand)
    # the command line is the application: its entry point, and nothing it
    # imports, configures the log (``--version`` and ``--help`` return before)
    from memwarden.engine import configure_logging

    if level is None:
        configure_logging(level="CRITICAL", quiet=True)
    else:
        configure_logging(level=level)
    if db in (":memory:", "sqlite:///:memory:") and ctx.invoked_subcommand not in SERVICES:
        # a store that ends with this command: what it saves would be gone
        # when it says "saved" (a service keeps one for its life, for a demo)
        raise click.BadParameter(
            "an in-memory store lasts only as long as one process: name a file (or use serve, scheduler or mcp)",
            param_hint="'--db'",
        )
    state = State(db, policy_file, read_db)
    ctx.obj = state
    ctx.call_on_close(state.close)
