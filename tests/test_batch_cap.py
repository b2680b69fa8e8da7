"""A batch save's size is bounded (``MAX_BATCH``): one past it is refused
on every face naming the field and the limit, and nothing is written;
LangGraph's store, whose batch is not atomic, saves a larger one in
chunks of at most the limit."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from langgraph.store.base import PutOp
from mcp.client.client import Client
from memwarden.engine import MAX_BATCH, OPERATOR, BatchRefused, Warden
from memwarden.engine._keys import KeyStore
from memwarden.engine.faces.http import create_app
from memwarden.engine.faces.mcp import build_server
from memwarden.integrations.langgraph import MemwardenStore

from .conftest import Cli, agent_key

OVER = MAX_BATCH + 1


def memory(i: int) -> dict[str, Any]:
    return {
        "memory_id": f"m{i}",
        "kind": "external_fact",
        "summary": f"요약 {i}",
        "content": f"내용 {i}",
        "source_url": f"https://example.org/{i}",
        "scope": {"tenant": "acme"},
        "ttl": "6h",
    }


def test_python_refuses_a_batch_past_the_limit_naming_it(warden: Warden) -> None:
    with pytest.raises(BatchRefused) as refused:
        warden.save_many([memory(i) for i in range(OVER)], caller=OPERATOR)
    assert isinstance(refused.value, ValueError)
    [problem] = refused.value.problems
    assert problem["field"] == "memories" and problem["error"] == "TooLarge"
    assert f"holds {OVER}" in problem["problem"] and f"the limit is {MAX_BATCH}" in problem["problem"]
    assert warden.log.head().seq == 0
    assert len(warden.save_many([memory(i) for i in range(MAX_BATCH)], caller=OPERATOR)) == MAX_BATCH


@pytest.fixture
def http(tmp_path: Path) -> Iterator[tuple[Warden, TestClient, str]]:
    w = Warden(tmp_path / "m.db")
    key = KeyStore(w).create("agent", tenants=["acme"], caller=OPERATOR)[0]
    with TestClient(create_app(w, scheduler=False, mcp=False)) as client:
        yield w, client, key
    w.close()


def test_http_refuses_a_batch_past_the_limit_naming_the_field_and_limit(
    http: tuple[Warden, TestClient, str],
) -> None:
    warden, client, key = http
    answer = client.post(
        "/v1/memories/batch", json={"memories": [memory(i) for i in range(OVER)]}, headers={"x-api-key": key}
    )
    assert answer.status_code in (413, 422), answer.text
    text = answer.text
    assert "memories" in text and str(MAX_BATCH) in text
    assert warden.log.head().seq == 0


def test_cli_save_many_refuses_a_file_past_the_limit_with_exit_2(run_cli: Cli, tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    big.write_text("\n".join(json.dumps(memory(i), ensure_ascii=False) for i in range(OVER)) + "\n", encoding="utf-8")
    result = run_cli("save-many", str(big))
    assert result.exit_code == 2
    assert "memories" in result.stderr and f"the limit is {MAX_BATCH}" in result.stderr


def test_mcp_refuses_a_batch_past_the_limit_naming_it(warden: Warden) -> None:
    server = build_server(warden, allow_local_sources=False)

    async def main() -> Any:
        async with Client(server) as client:
            return await client.call_tool("memory_save_many", {"memories": [memory(i) for i in range(OVER)]})

    answer = asyncio.run(main())
    assert answer.is_error
    assert "memories" in answer.content[0].text and str(MAX_BATCH) in answer.content[0].text
    assert warden.log.head().seq == 0


def test_langgraph_batch_past_the_limit_is_saved_in_chunks(warden: Warden, monkeypatch: pytest.MonkeyPatch) -> None:
    """LangGraph's ``batch`` is not atomic: one past the limit is every put
    saved, in transactions of at most the limit each."""
    acting = warden.acting_as(agent_key("acme", key_id="lg-cap"))
    sizes: list[int] = []
    real = acting.save_many

    def save_many(memories: Any) -> Any:
        given = list(memories)
        sizes.append(len(given))
        return real(given)

    monkeypatch.setattr(acting, "save_many", save_many)
    store = MemwardenStore(acting, tenant="acme")
    store.batch([PutOp(("docs",), f"k{i}", {"text": f"값 {i}"}) for i in range(OVER)])
    assert sizes == [MAX_BATCH, 1]
    assert store.get(("docs",), "k0") is not None and store.get(("docs",), f"k{OVER - 1}") is not None


def record(i: int, memory_id: str | None = None, summary: str | None = None) -> str:
    return json.dumps(
        {
            "memory_id": memory_id or f"r{i}",
            "kind": "external_fact",
            "summary": summary or f"요약 {i}",
            "source_url": f"https://example.org/{i}",
            "fetched_at": "2026-01-05T09:00:00Z",
            "scope": {"tenant": "acme"},
        },
        ensure_ascii=False,
    )


def test_import_records_commits_a_batch_at_a_time(warden: Warden, tmp_path: Path) -> None:
    """No transaction of an import writes more than a batch holds; a
    record repeated in one batch is skipped, a memory named twice takes
    two versions, and running it again imports nothing."""
    lines = [record(i) for i in range(OVER)] + [record(0), record(9, "r1", "다른 요약")]
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    sizes: list[int] = []
    real = warden.transaction

    def transaction(size: int = 1) -> Any:
        sizes.append(size)
        return real(size)

    warden.transaction = transaction  # type: ignore[method-assign]
    result = warden.import_records(path, caller=OPERATOR)
    assert (result.imported, result.skipped, result.refused) == (OVER + 1, 1, [])
    assert max(sizes) <= MAX_BATCH and len(sizes) >= 2
    assert warden.get("r1", caller=OPERATOR).version == 2
    again = warden.import_records(path, caller=OPERATOR)
    assert (again.imported, again.skipped) == (0, OVER + 2)
