"""Every command is documented (its help, the guide's command table, the
generated CLI reference), and the documentation site builds strictly."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from memwarden.engine.faces.cli import cli

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
GUIDE = (ROOT / "docs" / "guide" / "cli.md").read_text(encoding="utf-8")


def commands(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name, command in sorted(group.commands.items()):
        path = (*prefix, name)
        if isinstance(command, click.Group):
            yield from commands(command, path)
        else:
            yield path, command


ALL = list(commands(cli))
IDS = [" ".join(p) for p, _ in ALL]

# the flags the guide names once, as "[scope flags]"
SCOPE_FLAGS = ("--project", "--permission", "--user", "--agent")


def documented_options(command: click.Command) -> Iterator[tuple[click.Option, str]]:
    for param in command.params:
        if isinstance(param, click.Option) and param.name != "as_json":
            yield param, max(param.opts, key=len)


# the first test to ask for the site builds it (mkdocs, up to 300 s on a loaded machine): past the
# suite's 120 s a test
BUILDS = pytest.mark.timeout(420)


def test_there_are_commands() -> None:
    assert len(ALL) >= 28


@pytest.mark.parametrize(("path", "command"), ALL, ids=IDS)
def test_every_command_is_documented(path: tuple[str, ...], command: click.Command) -> None:
    name = f"memwarden {' '.join(path)}"
    assert command.help, f"{name} has no help text"
    rows = [line for line in GUIDE.splitlines() if line.startswith(f"| `{name}")]
    assert rows, f"the command table of docs/guide/cli.md has no row for {name}"
    for param, flag in documented_options(command):
        assert param.help, f"{name} {flag} has no help text"
        documented = any(flag in row for row in rows) or (flag in SCOPE_FLAGS and "[scope flags]" in rows[0])
        assert documented, f"docs/guide/cli.md's row for {name} does not name {flag}"


def test_scope_flags_are_spelled_out() -> None:
    line = next(line for line in GUIDE.splitlines() if line.startswith("`[scope flags]`"))
    assert all(flag in line for flag in SCOPE_FLAGS)


def test_readme_is_short_and_names_the_test_command() -> None:
    lines = README.splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: the rest belongs in docs/"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    first = next(line for line in lines if "scripts/test" in line or "pytest" in line)
    assert "scripts/test" in first and "scripts/test" in ci


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The documentation site, built with ``mkdocs build --strict``: a broken
    link, a missing page or an object the API reference cannot find fails it."""
    if importlib.util.find_spec("mkdocs") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("mkdocs is not installed: scripts/test installs the docs extra")
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    return out


def page_text(site: Path, page: str) -> str:
    raw = (site / page / "index.html").read_text(encoding="utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", " ", raw))
    return re.sub(r"\s+\(", "(", re.sub(r"\s+", " ", text))


@BUILDS
def test_the_site_builds_strictly(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert "Five tasks" not in page_text(site, "guide/concepts")  # the guide is its own, not README's


@BUILDS
def test_the_cli_reference_holds_every_command_and_option(site: Path) -> None:
    text = page_text(site, "reference/cli")
    for path, command in ALL:
        name = f"memwarden {' '.join(path)}"
        assert name in text, f"the generated CLI reference has no {name}"
        for _, flag in documented_options(command):
            assert flag in text, f"the generated CLI reference does not name {name} {flag}"


@BUILDS
def test_the_http_reference_holds_every_route(site: Path) -> None:
    from memwarden.engine.faces.http import create_app
    from memwarden.engine.testing import in_memory_warden

    with in_memory_warden() as warden:
        document = create_app(warden, scheduler=False, mcp=False).openapi()
    text = page_text(site, "reference/http-api")
    routes = [(method.upper(), path) for path, item in document["paths"].items() for method in item]
    assert len(routes) >= 20
    for method, path in routes:
        assert f"{method} {path}" in text, f"the generated HTTP reference has no {method} {path}"


@BUILDS
def test_the_mcp_reference_holds_every_tool_and_argument(site: Path) -> None:
    import asyncio

    from memwarden.engine.faces.mcp import build_server
    from memwarden.engine.testing import in_memory_warden

    with in_memory_warden() as warden:
        tools = asyncio.run(build_server(warden).list_tools())
    text = page_text(site, "reference/mcp-tools")
    assert len(tools) >= 8
    for tool in tools:
        assert tool.name in text
        for argument in tool.input_schema.get("properties", {}):
            assert argument in text, f"the generated MCP reference does not name {tool.name}'s {argument}"


@BUILDS
def test_the_python_reference_holds_the_warden_operations(site: Path) -> None:
    text = page_text(site, "reference/python")
    for operation in ("save", "save_many", "get", "query", "search", "revoke", "erase", "explain", "replay"):
        assert f"{operation}(" in text, f"the Python API reference has no Warden.{operation}"


def test_no_library_comment_tells_a_benchmark_story() -> None:
    """The figures live in BENCHMARKS.md and CHANGELOG.md; a comment says why the code is so."""
    told = [
        f"{path.relative_to(ROOT)}:{number}"
        for package in ("events", "projections", "engine", "client", "integrations")
        for path in sorted((ROOT / package).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "BENCHMARKS.md" in line or "scripts/bench" in line
    ]
    assert not told, f"benchmark stories in comments: {told}"
