"""The generated references: the HTTP API from the app's OpenAPI document,
the MCP tools from the MCP server's tool list, both read from the code at
build time (an in-memory store, no server started), so a page cannot drift
from what the server answers.

A page asks for one with a marker on a line of its own:
``<!-- memwarden:openapi -->`` or ``<!-- memwarden:mcp-tools -->``.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import json
import shutil
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[2]

MARKERS = {
    "<!-- memwarden:openapi -->": lambda: render_openapi(openapi_document()),
    "<!-- memwarden:mcp-tools -->": lambda: render_tools(mcp_tools()),
}


@event_priority(100)  # before mkdocstrings reads its handler's paths
def on_config(config: Any) -> Any:
    """The packages as ``memwarden.*`` for mkdocstrings to read as source:
    pyproject's package-dir lays them out under other names (``engine/`` is
    ``memwarden.engine``), which neither griffe's finder nor its import of
    an editable install resolves, so a temporary ``memwarden/`` links each."""
    farm = Path(tempfile.mkdtemp(prefix="memwarden-api-"))
    atexit.register(shutil.rmtree, farm, ignore_errors=True)
    layout = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for package, folder in layout["tool"]["setuptools"]["package-dir"].items():
        if package.count(".") == 1:
            link = farm.joinpath(*package.split("."))
            link.parent.mkdir(exist_ok=True)
            link.symlink_to(ROOT / folder, target_is_directory=True)
    import memwarden.engine  # noqa: F401  (a package that does not import fails the build here, before any page)

    python = config["plugins"]["mkdocstrings"].config["handlers"].setdefault("python", {})
    python["paths"] = [str(farm)]
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    for marker, render in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    return markdown


@functools.cache
def openapi_document() -> dict[str, Any]:
    from memwarden.engine.faces.http import create_app
    from memwarden.engine.testing import in_memory_warden

    with in_memory_warden() as warden:
        return create_app(warden, scheduler=False, mcp=False).openapi()


@functools.cache
def mcp_tools() -> tuple[dict[str, Any], ...]:
    from memwarden.engine.faces.mcp import build_server
    from memwarden.engine.testing import in_memory_warden

    with in_memory_warden() as warden:
        tools = asyncio.run(build_server(warden).list_tools())
    return tuple({"name": t.name, "description": t.description or "", "schema": t.input_schema} for t in tools)


# --- JSON Schema, as a table a person reads -------------------------------------------------


def anchor(name: str) -> str:
    return name.lower().replace("_", "-")


def type_of(schema: dict[str, Any]) -> str:
    """A schema's type in a few words; a named schema links to its section."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{anchor(name)})"
    if "const" in schema:
        return f"`{json.dumps(schema['const'], ensure_ascii=False)}`"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v, ensure_ascii=False)}`" for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            kinds = [type_of(s) for s in schema[key] if s.get("type") != "null"]
            nullable = any(s.get("type") == "null" for s in schema[key])
            return " or ".join(kinds) + (" or null" if nullable else "")
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return type_of(schema["allOf"][0])
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items")
        return f"list of {type_of(items)}" if items else "list"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {type_of(schema['additionalProperties'])}"
    if isinstance(kind, list):
        return " or ".join(kind)
    return kind or "any"


LIMITS = (
    ("minLength", "at least {} characters"),
    ("maxLength", "at most {} characters"),
    ("minItems", "at least {} items"),
    ("maxItems", "at most {} items"),
    ("minimum", ">= {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "<= {}"),
    ("exclusiveMaximum", "< {}"),
    ("pattern", "matches `{}`"),
)


def limits_of(schema: dict[str, Any]) -> list[str]:
    found = [text.format(schema[key]) for key, text in LIMITS if key in schema]
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key, ()):
            found += limits_of(option)
    return found


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def fields_table(schema: dict[str, Any]) -> str:
    properties = schema.get("properties") or {}
    if not properties:
        return "No fields.\n"
    required = set(schema.get("required", ()))
    rows = ["| field | type | required | default | description |", "|---|---|---|---|---|"]
    for name, prop in properties.items():
        default = f"`{json.dumps(prop['default'], ensure_ascii=False)}`" if "default" in prop else ""
        described = "; ".join([prop.get("description", ""), *limits_of(prop)]).strip("; ")
        need = "yes" if name in required else ""
        rows.append(f"| `{name}` | {type_of(prop)} | {need} | {cell(default)} | {cell(described)} |")
    closed = schema.get("additionalProperties") is False
    return "\n".join(rows) + ("\n\nAny other field is refused.\n" if closed else "\n")


def named_schemas(schemas: dict[str, Any], level: str) -> str:
    parts = []
    for name in sorted(schemas):
        schema = schemas[name]
        parts.append(f"{level} {name} {{#{anchor(name)}}}\n")
        if schema.get("description"):
            parts.append(schema["description"].strip() + "\n")
        if schema.get("type") == "object" or "properties" in schema:
            parts.append(fields_table(schema))
        else:
            parts.append(f"A {type_of(schema)}.\n")
    return "\n".join(parts)


# --- the HTTP API ---------------------------------------------------------------------------


def render_openapi(doc: dict[str, Any]) -> str:
    out = []
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, item in doc.get("paths", {}).items():
        for method, op in item.items():
            if method in {"get", "post", "put", "patch", "delete"}:
                by_tag.setdefault((op.get("tags") or ["other"])[0], []).append((method, path, op))
    for tag, operations in by_tag.items():
        out.append(f"## {tag}\n")
        for method, path, op in operations:
            out.append(operation(method, path, op))
    out.append("## Schemas\n")
    out.append(named_schemas(doc.get("components", {}).get("schemas", {}), "###"))
    return "\n".join(out)


def operation(method: str, path: str, op: dict[str, Any]) -> str:
    lines = [f"### `{method.upper()} {path}`\n"]
    if op.get("summary"):
        lines.append(f"**{op['summary']}.** " + (op.get("description") or "").strip() + "\n")
    elif op.get("description"):
        lines.append(op["description"].strip() + "\n")
    parameters = [p for p in op.get("parameters", ()) if p.get("in") != "header"]
    if parameters:
        lines.append("| parameter | in | type | required | description |\n|---|---|---|---|---|")
        for p in parameters:
            schema = p.get("schema", {})
            described = "; ".join([p.get("description", ""), *limits_of(schema)]).strip("; ")
            if "default" in schema:
                described = (described + "; " if described else "") + f"default `{json.dumps(schema['default'])}`"
            lines.append(
                f"| `{p['name']}` | {p['in']} | {type_of(schema)} | {'yes' if p.get('required') else ''} "
                f"| {cell(described)} |"
            )
        lines.append("")
    body = op.get("requestBody", {}).get("content", {})
    for media, content in body.items():
        lines.append(f"Body (`{media}`): {type_of(content.get('schema', {}))}\n")
    responses = op.get("responses", {})
    if responses:
        lines.append("| status | answer |\n|---|---|")
        for status, answer in responses.items():
            schemas = [c.get("schema", {}) for c in answer.get("content", {}).values()]
            shape = type_of(schemas[0]) if schemas and schemas[0] else ""
            lines.append(f"| {status} | {cell(' '.join(x for x in (answer.get('description', ''), shape) if x))} |")
        lines.append("")
    return "\n".join(lines)


# --- the MCP tools --------------------------------------------------------------------------


def render_tools(tools: tuple[dict[str, Any], ...]) -> str:
    out, types = [], {}
    for tool in tools:
        schema = dict(tool["schema"])
        types.update(schema.pop("$defs", {}))
        out.append(f"## `{tool['name']}`\n")
        out.append(" ".join(tool["description"].split()) + "\n")
        out.append(fields_table(schema))
    if types:
        out.append("## Types\n")
        out.append(named_schemas(types, "###"))
    return "\n".join(out)
