"""Shared pieces of the command line: the group, output, options, errors."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import click
from memwarden.engine import (
    FetchFailed,
    InvalidInput,
    Limits,
    PolicyFile,
    StaleView,
    TooLarge,
    Warden,
    configure_logging,
)
from memwarden.events import DATABASE_ERRORS, LogDamaged, LogDiverged, StorageError, canonical_json


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
        except DATABASE_ERRORS as exc:
            click.echo(f"Error: database: {exc} (is the file damaged? run 'memwarden audit verify')", err=True)
            ctx.exit(2)


def _message(exc: BaseException) -> str:
    return exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], str) else str(exc)


class VersionParam(click.ParamType):
    """A policy version: a number, or a key like ``policy-42-v7``."""

    name = "VERSION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | str:
        # the engine validates (and names the field); numbers print as numbers
        text = str(value)
        return int(text) if text.isascii() and text.isdigit() and len(text) <= 16 else text


VERSION = VersionParam()


class State:
    def __init__(self, db: str, policy_file: str | None, read_db: str | None = None) -> None:
        self.db = db
        self.read_db = read_db
        self.policy_file = policy_file
        self._warden: Warden | None = None

    @property
    def warden(self) -> Warden:
        if self._warden is None:
            settings = PolicyFile.read(self.policy_file) if self.policy_file else PolicyFile()
            self._warden = Warden(
                self.db,
                policy=settings.ttl,
                fetchers=settings.fetchers(),
                limits=settings.limits,
                read_url=self.read_db,
            )
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
    help="TOML file of TTLs per kind (env MEMWARDEN_POLICY).",
)
@click.version_option(package_name="memwarden")
@click.pass_context
def cli(ctx: click.Context, db: str, read_db: str | None, policy_file: str | None) -> None:
    """memwarden: may an agent use this remembered fact now?"""
    configure_logging(level=os.environ.get("MEMWARDEN_LOG_LEVEL", "WARNING"))
    state = State(db, policy_file, read_db)
    ctx.obj = state
    ctx.call_on_close(state.close)
