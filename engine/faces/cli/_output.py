"""How the command line shows data to a person: tables, trees, colours,
progress bars and words.

On a terminal, tables are rich tables (they measure Korean and other wide
characters by their cells, so columns line up) with coloured statuses;
piped or redirected, the same rows are tab-separated under one header
line, for ``cut`` and ``awk``. ``--json`` bypasses all of this.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any

import click

from .._visible import raw_stream, visible

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text
    from rich.tree import Tree

# a status (of a memory, or of a read-back) -> its colour on a terminal
STATUS_STYLES = {
    "usable": "green",
    "confirmed": "green",
    "active": "green",
    "expired": "yellow",
    "unknown": "yellow",
    "pending": "yellow",
    "quarantined": "red",
    "invalidated": "red",
    "revoked": "red",
    "failed": "red",
    "missing": "red",
    "erased": "magenta",
}

_IRREGULAR = {"memory": "memories", "key": "keys", "event": "events", "policy": "policies"}


def plural(count: int, word: str) -> str:
    """``1 memory``, ``2 memories``, ``0 memories``."""
    return f"{count:,} {word if count == 1 else _IRREGULAR.get(word, word + 's')}"


def stdout_console() -> Console:
    """A console on stdout as it is now (CliRunner swaps it); rich decides
    whether it is a terminal (FORCE_COLOR and TTY_COMPATIBLE say so too)."""
    from rich.console import Console

    return Console(file=raw_stream(sys.stdout), highlight=False, soft_wrap=False)


def on_terminal() -> bool:
    """Whether stdout is a terminal, as rich sees it; asked of rich only when
    it might be: output to a pipe or a file never loads rich (a command
    starts in a fraction of the time)."""
    return _may_be_terminal(sys.stdout) and stdout_console().is_terminal


def _may_be_terminal(stream: IO[str]) -> bool:
    # rich says no terminal for a stream that is not a tty unless one of
    # these says otherwise (its Console.is_terminal); with them, rich decides
    if "FORCE_COLOR" in os.environ or "TTY_COMPATIBLE" in os.environ:
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream: as rich answers
        return False


def styled(value: Any) -> Text:
    from rich.text import Text

    text = "" if value is None else visible(str(value))
    return Text(text, style=STATUS_STYLES.get(text, ""))


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, status: Sequence[str] = ("status",)) -> None:
    """``rows`` under ``columns``: a rich table on a terminal, else a header
    line and one tab-separated line a row. Columns named in ``status`` are
    coloured by their value."""
    if not on_terminal():
        out = sys.stdout
        for line in (columns, *rows):
            out.write("\t".join(_cell(v) for v in line) + "\n")
        return
    from rich.table import Table
    from rich.text import Text

    grid = Table(*columns, header_style="bold", show_edge=False, pad_edge=False)
    for row in rows:
        grid.add_row(*(styled(v) if c in status else Text(_cell(v)) for c, v in zip(columns, row, strict=True)))
    stdout_console().print(grid)


def _cell(value: Any) -> str:
    """One value as a field of a line: never a tab or a line break inside it."""
    if value is None:
        return ""
    return visible(" ".join(str(value).split()) if isinstance(value, str) else str(value))


def status_line(text: str, status: str) -> None:
    """A line of text in ``status``'s colour on a terminal."""
    if on_terminal():
        from rich.text import Text

        stdout_console().print(Text(visible(text), style=STATUS_STYLES.get(status, "")))
    else:
        click.echo(text)


def derivation_tree(title: str, up: dict[str, Any] | None, down: Sequence[dict[str, Any]]) -> None:
    """The evidence a memory rests on (``up``, from explain's ``derivation``)
    and what was drawn from it (``down``), each node with its status."""
    if up is None and not down:
        return
    from rich.console import Console
    from rich.text import Text
    from rich.tree import Tree

    root = Tree(Text(visible(title), style="bold"))
    if up is not None and up["parents"]:
        evidence = root.add("drawn from")
        _add_nodes(evidence, up["parents"], "parents")
    if down:
        _add_nodes(root.add("what was drawn from it"), down, "children")
    console = stdout_console()
    if console.is_terminal:
        console.print(root)
    else:
        Console(file=sys.stdout, no_color=True, highlight=False, width=200).print(root)


def _add_nodes(branch: Tree, nodes: Sequence[dict[str, Any]], below: str) -> None:
    from rich.text import Text

    for node in nodes:
        label = Text(visible(f"{node['memory_id']} v{node['version']} "))
        label.append(node["status"], style=STATUS_STYLES.get(node["status"], ""))
        if not node["usable"]:
            label.append(visible(f" ({node['reason']})"))
        if node.get("ref"):  # a memory met again in a DAG: its evidence is shown where it first appears
            label.append(" (shown above)", style="dim")
        if node.get("truncated"):
            label.append(" (more evidence left out: the tree's node cap)", style="dim")
        _add_nodes(branch.add(label), node.get(below) or [], below)


@contextlib.contextmanager
def progress(label: str, total: int | None, *, unit: str = "events") -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr while the block runs, when stderr is a
    terminal; the block gets a function to advance it by n."""
    if not _may_be_terminal(sys.stderr):  # no bar to draw: rich stays unloaded
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(file=raw_stream(sys.stderr))
    with Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("[progress.data.speed]{task.fields[rate]}"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task(label, total=total, rate="")

        def advance(n: int) -> None:
            bar.advance(task, n)
            speed = bar.tasks[0].speed
            bar.update(task, rate=f"{speed:,.0f} {unit}/s" if speed else "")

        yield advance
