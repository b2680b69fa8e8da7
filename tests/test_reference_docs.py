"""The reference pages in ``docs/reference`` name everything a user can set
or send there, read from the code that parses it: every policy-file key
(with its default, where the code holds one), every field of the requests
the HTTP page covers, and every MCP tool and each of its arguments. A key,
field, tool or argument added without its row fails here."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from memwarden.engine import Fetchers, Limits, SinkSpec, Warden
from memwarden.engine._policy import DEFAULTS, FETCH_KEYS, JOBS, KIND_KEYS, TABLES
from memwarden.engine.faces.http import create_app
from memwarden.engine.faces.mcp import build_server
from memwarden.engine.recall._embedders import EMBEDDER_KEYS
from memwarden.engine.sinks._config import BY_KIND, COMMON

REFERENCE = Path(__file__).parent.parent / "docs" / "reference"


def sections(page: str) -> dict[str, str]:
    """A page's sections by heading (``##`` and ``###``), each its text up to the next heading."""
    text = (REFERENCE / page).read_text(encoding="utf-8")
    out: dict[str, str] = {}
    heading = ""
    for line in text.splitlines():
        if line.startswith(("## ", "### ")):
            heading = line.lstrip("#").strip()
            out[heading] = ""
        elif heading:
            out[heading] += line + "\n"
    return out


def section(page: str, named: str) -> str:
    found = [body for heading, body in sections(page).items() if named in heading]
    assert len(found) == 1, f"{page} has {len(found)} sections headed with {named!r}"
    return found[0]


def row(text: str, key: str) -> str | None:
    """The table row that documents ``key`` (its first cell is ``key``), or None."""
    found = re.search(rf"^\| `{re.escape(key)}` \|.*$", text, re.MULTILINE)
    return found.group() if found else None


def missing(text: str, keys: Any) -> list[str]:
    return sorted(k for k in keys if row(text, k) is None)


def number(value: float) -> str:
    """A default as the page writes it: ``10``, ``5242880``, ``0.5``."""
    return f"`{int(value)}`" if float(value).is_integer() else f"`{value}`"


# -- docs/reference/configuration.md: the policy file ------------------------------------------


def test_every_table_of_the_policy_file_has_its_section() -> None:
    headings = " ".join(sections("configuration.md"))
    assert all(f"`[{table}" in headings for table in TABLES), (TABLES, headings)


def test_every_kinds_key_and_shipped_rule() -> None:
    text = section("configuration.md", "`[kinds.KIND]`")
    assert not missing(text, KIND_KEYS)
    for kind, rule in DEFAULTS.items():
        line = row(text, kind)
        assert line is not None, f"the shipped rule of {kind} is not listed"
        ((key, value),) = rule.items()
        shown = "true" if value is True else f'"{value}"'
        assert f"`{key} = {shown}`" in line, (kind, line)


def test_every_fetch_key_with_its_default() -> None:
    text = section("configuration.md", "`[fetch]`")
    assert not missing(text, FETCH_KEYS)
    default = Fetchers.from_settings({})
    for key in ("timeout", "max_bytes", "max_redirects", "backoff"):
        assert number(getattr(default, key)) in (row(text, key) or ""), key


def test_every_limit_with_its_default() -> None:
    text = section("configuration.md", "`[limits]`")
    for limit in fields(Limits):
        line = row(text, limit.name)
        assert line is not None, f"limits.{limit.name} is not documented"
        assert f"`{limit.default}`" in line, (limit.name, limit.default, line)


def test_every_scheduler_job() -> None:
    assert not missing(section("configuration.md", "`[scheduler]`"), JOBS)


def test_every_embedder_key() -> None:
    assert not missing(section("configuration.md", "`[embedder]`"), EMBEDDER_KEYS)


def test_every_sink_key_with_its_numeric_defaults() -> None:
    text = section("configuration.md", "`[sinks.NAME]`")
    assert not missing(text, COMMON | set().union(*BY_KIND.values()))
    for spec in fields(SinkSpec):
        if isinstance(spec.default, int | float) and not isinstance(spec.default, bool):
            assert number(spec.default) in (row(text, spec.name) or ""), (spec.name, spec.default)


# -- docs/reference/http.md -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def openapi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    warden = Warden(tmp_path_factory.mktemp("docs") / "docs.db")
    yield create_app(warden, scheduler=False, mcp=False).openapi()
    warden.close()


def body_fields(spec: dict[str, Any], method: str, path: str) -> set[str]:
    ref = spec["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return set(spec["components"]["schemas"][ref.rsplit("/", 1)[-1]]["properties"])


@pytest.mark.parametrize(("method", "path"), [("post", "/v1/erasures"), ("post", "/v1/memories/search")])
def test_every_field_of_the_documented_bodies(openapi: dict[str, Any], method: str, path: str) -> None:
    text = section("http.md", f"`{method.upper()} {path}`")
    assert not missing(text, body_fields(openapi, method, path)), path


def test_every_parameter_of_the_word_search(openapi: dict[str, Any]) -> None:
    params = {p["name"] for p in openapi["paths"]["/v1/memories"]["get"]["parameters"] if p["in"] == "query"}
    assert "text" in params
    assert not missing(section("http.md", "`GET /v1/memories`"), params)


# -- docs/reference/mcp.md ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    warden = Warden(tmp_path_factory.mktemp("mcp-docs") / "mcp.db")

    async def listed() -> Any:
        async with Client(build_server(warden)) as client:
            return (await client.list_tools()).tools

    yield {t.name: t.input_schema for t in asyncio.run(listed())}
    warden.close()


def test_every_tool_has_its_section(tools: dict[str, dict[str, Any]]) -> None:
    documented = {m.group(1) for heading in sections("mcp.md") if (m := re.fullmatch(r"`(\w+)`", heading))}
    assert documented == set(tools)


def test_every_argument_of_every_tool(tools: dict[str, dict[str, Any]]) -> None:
    page = (REFERENCE / "mcp.md").read_text(encoding="utf-8")
    for name, schema in tools.items():
        assert not missing(section("mcp.md", f"`{name}`"), schema.get("properties", {})), name
        # the objects an argument holds (a save's scope and cache_key): each field somewhere on the page
        for defined, inner in schema.get("$defs", {}).items():
            assert not missing(page, inner.get("properties", {})), (name, defined)
