"""A refusal names the field as its writer spelled it, on every face:
``version``, never pydantic's union branch (``version.int``); a TTL too long
is refused in words about the TTL and its limit, however it was given."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp import Client
from memwarden.engine import OPERATOR, InvalidInput, KeyStore, PolicyFile, Warden, field_problems
from memwarden.engine.faces.http import create_app
from memwarden.engine.faces.mcp import build_server
from memwarden.integrations.langgraph import MemwardenStore
from pydantic import BaseModel, ValidationError

from ._http_server import save_body
from .conftest import Cli, agent_key


@pytest.fixture
def app(warden: Warden) -> Iterator[tuple[TestClient, dict[str, str]]]:
    made = {
        "agent": KeyStore(warden).create("agent", tenants=["acme"], caller=OPERATOR)[0],
        "security": KeyStore(warden).create("security", caller=OPERATOR)[0],
    }
    with TestClient(create_app(warden, scheduler=False, mcp=False)) as client:
        yield client, made


def refusal(response: Any, field: str) -> dict[str, Any]:
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["field"] == field, body
    assert all(e["field"] == field for e in body.get("errors", [])), body
    return body


@pytest.mark.parametrize("version", [[1], None, 1.5, True, {"v": 1}])
def test_http_names_a_policy_version_version(app: Any, warden: Warden, version: object) -> None:
    client, keys = app
    head = warden.log.head().seq
    body = refusal(
        client.post("/v1/policies/deploy", json={"version": version}, headers={"x-api-key": keys["security"]}),
        "version",
    )
    assert body["problem"] == "Input should be a valid integer or a valid string"
    assert len(body["errors"]) == 1  # one field, one problem: not one per branch of int | str
    assert warden.log.head().seq == head


def test_http_names_a_saves_revocation_version_alone_and_in_a_batch(app: Any, warden: Warden) -> None:
    client, keys = app
    agent = {"x-api-key": keys["agent"]}
    one = save_body("v1", policy="deploy", revocation_version=[7])
    refusal(client.post("/v1/memories", json=one, headers=agent), "revocation_version")
    refusal(client.post("/v1/memories/batch", json={"memories": [one]}, headers=agent), "memories.0.revocation_version")
    assert warden.log.head().seq == 0


def test_mcp_names_the_argument_as_the_tool_lists_it(warden: Warden) -> None:
    server = build_server(warden, allow_local_sources=False)

    async def call() -> Any:
        async with Client(server) as client:
            return await client.call_tool("memory_save", save_body("v2", revocation_version={"v": 7}))

    result = asyncio.run(call())
    assert result.is_error
    text = result.content[0].text
    answer = json.loads(text[text.index("{") :])
    assert answer["field"] == "revocation_version", answer
    assert warden.log.head().seq == 0


def test_the_command_line_names_a_records_field(run_cli: Cli, tmp_path: Path) -> None:
    record = {
        "memory_id": "r1",
        "kind": "external_fact",
        "summary": "s",
        "source_url": "https://e.example/r1",
        "fetched_at": "2026-01-01T00:00:00Z",
        "expires_at": "2027-01-01T00:00:00Z",
        "scope": {"tenant": "acme"},
        "revocation_version": [1],
    }
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    result = run_cli("import-records", str(path), "--json")
    assert result.exit_code == 2, result.output
    assert json.loads(result.stdout)["field"] == "line 1.revocation_version"
    assert "revocation_version.int" not in result.stderr and "line 1.revocation_version:" in result.stderr


def test_branch_names_go_and_fields_stay() -> None:
    class Inner(BaseModel):
        tenant: str

    class Model(BaseModel):
        version: int | str
        tags: list[str] | str
        scope: Inner
        int_like: int  # a field that only sounds like a branch's name

    with pytest.raises(ValidationError) as caught:
        Model(version=[1], tags=5, scope={"tenant": 5}, int_like="x")
    found = dict(field_problems(caught.value.errors()))
    assert set(found) == {"version", "tags", "scope.tenant", "int_like"}
    assert found["tags"] == "Input should be a valid list or a valid string"


# -- a TTL too long -------------------------------------------------------------------------------


LIMIT = "36500d"


@pytest.mark.parametrize(
    "ttl", ["99999999d", "9" * 22 + "d", "36501d", timedelta(days=36501), timedelta(days=99_999_999)]
)
def test_a_ttl_too_long_is_named_with_its_limit(warden: Warden, ttl: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        warden.save(
            memory_id="long",
            kind="external_fact",
            summary="s",
            content="c",
            source_url="https://e.example/long",
            scope={"tenant": "acme"},
            ttl=ttl,  # type: ignore[arg-type]
            caller=OPERATOR,
        )
    assert caught.value.field == "ttl" and LIMIT in caught.value.problem, caught.value
    assert warden.log.head().seq == 0


@pytest.mark.parametrize("ttl", [timedelta(0), timedelta(minutes=-5)])
def test_a_ttl_not_positive_is_the_ttls_problem(warden: Warden, ttl: timedelta) -> None:
    with pytest.raises(InvalidInput) as caught:
        warden.save(
            memory_id="short",
            kind="external_fact",
            summary="s",
            content="c",
            source_url="https://e.example/short",
            scope={"tenant": "acme"},
            ttl=ttl,
            caller=OPERATOR,
        )
    assert caught.value.field == "ttl" and "positive" in caught.value.problem, caught.value


def test_the_command_line_and_http_name_ttl_and_its_limit(run_cli: Cli, app: Any) -> None:
    huge = "9" * 22 + "d"
    result = run_cli(
        "save", "--id", "m", "--kind", "external_fact", "--summary", "s", "--content", "c",
        "--source-url", "https://e.example/m", "--tenant", "acme", "--ttl", huge,
    )  # fmt: skip
    assert result.exit_code == 2 and result.stderr.startswith("Error: ttl:") and LIMIT in result.stderr
    client, keys = app
    body = refusal(
        client.post("/v1/memories", json=save_body("m", ttl=huge), headers={"x-api-key": keys["agent"]}), "ttl"
    )
    assert LIMIT in body["problem"]


@pytest.mark.parametrize(("key", "value"), [("ttl", "99999999d"), ("review", "36501d")])
def test_the_policy_file_names_the_kinds_key(tmp_path: Path, key: str, value: str) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(f'[kinds.weather]\n{key} = "{value}"\n', encoding="utf-8")
    with pytest.raises(InvalidInput) as caught:
        PolicyFile.read(path)
    assert caught.value.field == f"kinds.weather.{key}" and LIMIT in caught.value.problem


@pytest.mark.parametrize("minutes", [60 * 24 * 36501, 10**12, float("inf")])
def test_a_langgraph_puts_ttl_too_long_is_named(warden: Warden, minutes: float) -> None:
    store = MemwardenStore(warden.acting_as(agent_key("acme")), tenant="acme")
    with pytest.raises(InvalidInput) as caught:
        store.put(("notes",), "k", {"content": "c"}, ttl=minutes)
    assert caught.value.field == "ttl" and LIMIT in caught.value.problem, caught.value
    assert warden.log.head().seq == 0


def test_a_memory_api_key_too_long_is_named_key(app: Any, warden: Warden) -> None:
    """The key becomes the memory's summary: a key too long is the key's problem."""
    client, keys = app
    body = {"agent": "bot", "key": "k" * 5000, "content": "x"}
    refused = refusal(client.post("/memory/save", json=body, headers={"x-api-key": keys["agent"]}), "key")
    assert "512" in refused["problem"]
    assert warden.log.head().seq == 0
