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


@pytest.mark.parametrize(("path", "command"), ALL, ids=[" ".join(p) for p, _ in ALL])
def test_every_command_is_documented(path: tuple[str, ...], command: click.Command) -> None:
    assert command.help, f"memwarden {' '.join(path)} has no help text"
    assert f"memwarden {' '.join(path)}" in README, f"README does not document memwarden {' '.join(path)}"
    for param in command.params:
        if isinstance(param, click.Option) and param.name not in ("as_json",):
            flag = max(param.opts, key=len)
            assert flag.startswith("-"), flag
