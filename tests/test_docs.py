"""Every command is documented: in --help, and in the README."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from memwarden.engine.faces.cli import cli

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")


def commands(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name, command in sorted(group.commands.items()):
        path = (*prefix, name)
        if isinstance(command, click.Group):
            yield from commands(command, path)
        else:
            yield path, command


ALL = list(commands(cli))


def test_there_are_commands() -> None:
    assert len(ALL) >= 28


# the flags the README names once, as "[scope flags]"
SCOPE_FLAGS = ("--project", "--permission", "--user", "--agent")


@pytest.mark.parametrize(("path", "command"), ALL, ids=[" ".join(p) for p, _ in ALL])
def test_every_command_is_documented(path: tuple[str, ...], command: click.Command) -> None:
    name = f"memwarden {' '.join(path)}"
    assert command.help, f"{name} has no help text"
    rows = [line for line in README.splitlines() if line.startswith(f"| `{name}")]
    assert rows, f"the README's command table has no row for {name}"
    for param in command.params:
        if not isinstance(param, click.Option) or param.name == "as_json":
            continue
        flag = max(param.opts, key=len)
        assert param.help, f"{name} {flag} has no help text"
        documented = any(flag in row for row in rows) or (flag in SCOPE_FLAGS and "[scope flags]" in rows[0])
        assert documented, f"the README's row for {name} does not name {flag}"


def test_scope_flags_are_spelled_out() -> None:
    line = next(line for line in README.splitlines() if line.startswith("`[scope flags]`"))
    assert all(flag in line for flag in SCOPE_FLAGS)
