"""MCP clients (the official SDK) listing and calling every tool, on stdio
and over streamable HTTP with the same keys as the HTTP API."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from memwarden.engine import OPERATOR, Warden

from ._http_server import Server, server  # noqa: F401  (the live server fixture)
from .backends import Backend

TOOLS = {
    "memory_save",
    "memory_save_many",
    "memory_query",
    "memory_get",
    "memory_verify",
    "memory_explain",
    "memory_replay",
    "memory_search",
}


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


async def exercise(client: Client, tenant: str, source: str) -> None:
    listed = await client.list_tools()
    assert {t.name for t in listed.tools} == TOOLS
    saved = structured(
        await client.call_tool(
            "memory_save",
            {
                "memory_id": f"mcp-{tenant}",
                "kind": "external_fact",
                "summary": "서울 날씨 요약",
                "content": "서울은 맑음",
                "source_url": source,
                "scope": {"tenant": tenant},
                "ttl": "6h",
            },
        )
    )
    assert saved["version"] >= 1 and saved["checksum"].startswith("sha256:")
    got = structured(await client.call_tool("memory_get", {"memory_id": f"mcp-{tenant}"}))
    assert got["usable"] is True and got["content"] == "서울은 맑음"
    found = structured(await client.call_tool("memory_query", {"tenant": tenant, "text": "서울"}))
    assert [m["memory_id"] for m in found["memories"]] == [f"mcp-{tenant}"] and found["hidden"] == []
    verified = structured(await client.call_tool("memory_verify", {"memory_id": f"mcp-{tenant}"}))
    assert verified["outcome"] in ("verified", "failed")
    explained = structured(await client.call_tool("memory_explain", {"memory_id": f"mcp-{tenant}"}))
    assert explained["history"][0]["event"] == "memory.saved"
    then = await client.call_tool(
        "memory_replay", {"seq": explained["history"][0]["seq"], "tenant": tenant, "limit": 1}
    )
    if then.is_error:  # an agent key: the past of every tenant is for auditors
        assert '"error":"forbidden"' in then.content[0].text
    else:
        assert [m["memory_id"] for m in structured(then)["memories"]] == [f"mcp-{tenant}"]
    refused = await client.call_tool("memory_get", {"memory_id": "does-not-exist"})
    assert refused.is_error and "not found" in refused.content[0].text


def test_stdio_server_lists_and_calls_every_tool(tmp_path: Path, backend: Backend) -> None:
    db = backend.db(tmp_path, "mcp.db")
    source = tmp_path / "weather.txt"
    source.write_text("서울은 맑음", encoding="utf-8")
    params = StdioServerParameters(
        command=str(Path(sys.executable).with_name("memwarden")), args=["--db", str(db), "mcp"]
    )

    async def main() -> None:
        async with Client(params) as client:
            await exercise(client, "acme", source.as_uri())
            hidden = structured(await client.call_tool("memory_query", {"tenant": "acme", "include_hidden": True}))
            assert hidden["memories"][0]["usable"]

    asyncio.run(main())
    w = Warden(db)
    assert w.get("mcp-acme", caller=OPERATOR).verified_at is not None  # verified against the file
    w.close()


def test_http_mcp_applies_the_same_keys(server: Server) -> None:  # noqa: F811
    async def main() -> None:
        async with (
            httpx2.AsyncClient(headers={"x-api-key": server.keys["agent2"]}, timeout=30) as http,
            Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client,
        ):
            await exercise(client, "globex", "https://src.example/weather")
            other = await client.call_tool("memory_query", {"tenant": "acme"})
            assert other.is_error and "not bound to tenant" in other.content[0].text
        async with (
            httpx2.AsyncClient(headers={"x-api-key": server.keys["auditor"]}, timeout=30) as http,
            Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client,
        ):
            denied = await client.call_tool(
                "memory_save",
                {
                    "memory_id": "x",
                    "kind": "external_fact",
                    "summary": "s",
                    "content": "c",
                    "source_url": "https://e",
                    "scope": {"tenant": "acme"},
                },
            )
            assert denied.is_error and '"error":"forbidden"' in denied.content[0].text
            seen = structured(await client.call_tool("memory_get", {"memory_id": "mcp-globex"}))
            assert seen["memory_id"] == "mcp-globex"

    asyncio.run(main())
    no_key = httpx2.post(
        f"{server.url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"accept": "application/json, text/event-stream"},
    )
    assert no_key.status_code == 401


def test_an_empty_key_is_no_key_for_the_stdio_server(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from memwarden.engine import KeyStore
    from memwarden.engine.faces.cli import cli
    from memwarden.engine.faces.mcp import build_server

    db = tmp_path / "m.db"
    for empty in ("", "  "):
        # "MEMWARDEN_API_KEY": "$KEY" with KEY unset: refused at start, not run with every right
        ran = CliRunner().invoke(cli, ["--db", str(db), "mcp"], env={"MEMWARDEN_API_KEY": empty})
        assert ran.exit_code == 2 and "MEMWARDEN_API_KEY" in ran.output and "empty" in ran.output, ran.output
    warden = Warden(db)
    try:
        server = build_server(warden, authenticate=KeyStore(warden).authenticate, stdio_key="")

        async def call() -> None:
            async with Client(server) as client:
                result = await client.call_tool("memory_query", {"tenant": "tb"})
                assert result.is_error and "not a valid key" in result.content[0].text

        asyncio.run(call())
    finally:
        warden.close()
