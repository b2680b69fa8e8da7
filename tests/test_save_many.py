"""The batch save: many memories in one transaction, all or none, each
checked as a single save is; in the Memory API, the CLI and MCP."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client
from memwarden.engine import OPERATOR, BatchRefused, Warden
from memwarden.engine.faces.mcp import build_server
from memwarden.events import FrozenClock, content_checksum

from .backends import Backend
from .conftest import Cli, agent_key, save_memory


def memory(i: int | str, **extra: Any) -> dict[str, Any]:
    return {
        "memory_id": f"m{i}",
        "kind": "external_fact",
        "summary": f"서울 지사 요약 {i}",
        "content": f"내용 {i}: 목요일 회의 🙂",
        "source_url": f"https://example.org/{i}",
        "scope": {"tenant": "acme", "project": "p1"},
        "ttl": "6h",
        **extra,
    }


def test_a_batch_is_one_memory_saved_event_each_in_one_commit(warden: Warden, backend: Backend) -> None:
    results = warden.save_many([memory(i) for i in range(50)], caller=OPERATOR)
    assert [r.seq for r in results] == list(range(1, 51))
    assert [e.type for e in warden.log.read()] == ["memory.saved"] * 50
    assert warden.get("m7", caller=OPERATOR).content == "내용 7: 목요일 회의 🙂"
    assert backend.stored_text(warden.path, content_checksum("내용 7: 목요일 회의 🙂")) is not None
    assert warden.check_projections(caller=OPERATOR).ok and warden.audit_verify(caller=OPERATOR)["ok"]


def test_a_batch_sees_itself_a_new_version_and_evidence_saved_just_before(warden: Warden) -> None:
    results = warden.save_many(
        [memory(1), memory(2, derived_from=["m1"]), memory(1, content="다시 쓴 내용"), memory(3, derived_from=["m1"])],
        caller=OPERATOR,
    )
    assert [(r.memory_id, r.version) for r in results] == [("m1", 1), ("m2", 1), ("m1", 2), ("m3", 1)]
    assert warden.get("m1", caller=OPERATOR).content == "다시 쓴 내용"
    assert warden.get("m3", caller=OPERATOR).derived_from == [{"memory_id": "m1", "version": 2}]
    # m2 rests on the version the batch replaced, exactly as after two single saves
    assert warden.get("m2", caller=OPERATOR).reason == "derived_from_unusable"


def test_a_refused_batch_names_each_bad_item_and_writes_nothing(warden: Warden) -> None:
    save_memory(warden, "kept")
    head = warden.log.head().seq
    bad = [
        memory(1),
        memory(2, scope={"tenant": ""}),
        {k: v for k, v in memory(3).items() if k != "summary"},
        memory(4, derived_from=["nowhere"]),
        memory(5, checksum="sha256:" + "0" * 64),
        memory(6, bogus=1),
        memory(7),
    ]
    with pytest.raises(BatchRefused) as refused:
        warden.save_many(bad, caller=OPERATOR)
    problems = refused.value.problems
    assert [(p["index"], p["field"]) for p in problems] == [
        (1, "scope.tenant"),
        (2, "summary"),
        (3, "derived_from"),
        (4, "checksum"),
        (5, "bogus"),
    ]
    assert warden.log.head().seq == head, "nothing of the batch was written"
    with pytest.raises(LookupError):
        warden.get("m1", caller=OPERATOR)
    assert "memories[1].scope.tenant" in str(refused.value) and "5 refused" in str(refused.value)


def test_no_resurrection_and_the_callers_wall_hold_per_item(warden: Warden, clock: FrozenClock) -> None:
    save_memory(warden, "old", tenant="acme")
    fetched = warden.now()
    clock.advance("1m")
    warden.revoke({"tenant": "acme", "project": "p1"}, reason="leak", caller=OPERATOR)
    head = warden.log.head().seq
    agent = agent_key("acme", agent="bot")
    with pytest.raises(BatchRefused) as refused:
        warden.save_many(
            [
                # fetched before the revocation that covers it
                memory(1, fetched_at=fetched, scope={"tenant": "acme", "project": "p1", "agent": "bot"}),
                memory(2, scope={"tenant": "globex", "agent": "bot"}),  # not this key's tenant
                memory(3, scope={"tenant": "acme", "agent": "other"}),  # not this key's agent
                memory(4, scope={"tenant": "acme", "project": "p2", "agent": "bot"}),
            ],
            caller=agent,
        )
    assert [(p["index"], p["field"], p["error"]) for p in refused.value.problems] == [
        (0, "fetched_at", "RevokedScope"),
        (1, "scope.tenant", "ScopeNotAllowed"),
        (2, "scope.agent", "ScopeNotAllowed"),
    ]
    assert warden.log.head().seq == head
    clock.advance("1m")  # a fetch after the revocation escapes it
    fresh = warden.save_many([memory(5, scope={"tenant": "acme", "project": "p1", "agent": "bot"})], caller=agent)
    assert warden.get("m5", caller=OPERATOR).usable and fresh[0].tenant == "acme"


def test_an_empty_or_oversized_batch_is_refused(warden: Warden) -> None:
    with pytest.raises(BatchRefused, match="memories: is empty"):
        warden.save_many([], caller=OPERATOR)
    with pytest.raises(BatchRefused, match="the limit is 1000"):
        warden.save_many([memory(i) for i in range(1_001)], caller=OPERATOR)
    assert warden.log.head().seq == 0


def test_save_many_cli_takes_a_file_or_stdin_and_names_refused_lines(run_cli: Cli, tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(json.dumps(memory(i), ensure_ascii=False) for i in range(3)) + "\n", encoding="utf-8")
    saved = run_cli.json("save-many", str(good))
    assert [s["memory_id"] for s in saved["saved"]] == ["m0", "m1", "m2"]
    piped = run_cli("save-many", "-", input=json.dumps(memory(9)) + "\n")
    assert piped.exit_code == 0 and "saved 1 memory" in piped.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps(memory(10)) + "\n\n" + json.dumps(memory(11, derived_from=["nowhere"])) + "\n", encoding="utf-8"
    )
    refused = run_cli("save-many", str(bad), "--json")
    assert refused.exit_code == 2
    body = json.loads(refused.stdout)
    assert body["error"] == "batch_refused" and body["field"] == "memories"
    assert [(e["field"], e["problem"]) for e in body["errors"]] == [
        ("derived_from", "line 3: parent 'nowhere' does not exist")
    ]
    garbled = tmp_path / "garbled.jsonl"
    garbled.write_text("[1]\nnot json\n", encoding="utf-8")
    result = run_cli("save-many", str(garbled))
    assert result.exit_code == 2 and "line 1:" in result.stderr and "line 2:" in result.stderr
    missing = run_cli("save-many", str(tmp_path / "nope.jsonl"))
    assert missing.exit_code == 2
    # a field missing or unknown is named in a user's words, not a Python signature's
    without = {k: v for k, v in memory(12).items() if k != "content"}
    lines = f"{json.dumps(without)}\n{json.dumps({**memory(13), 'colour': 1})}\n"
    odd = run_cli("save-many", "-", "--json", input=lines)
    assert [(e["field"], e["problem"]) for e in json.loads(odd.stdout)["errors"]] == [
        ("content", "line 1: is required"),
        ("colour", "line 2: is not a field of a save"),
    ]


def test_memory_save_many_over_mcp(warden: Warden) -> None:
    server = build_server(warden, allow_local_sources=False)
    items = [memory(i, ttl="1h") for i in range(3)]  # the shape of POST /v1/memories/batch

    async def main() -> tuple[Any, Any]:
        async with Client(server) as client:
            ok = await client.call_tool("memory_save_many", {"memories": items})
            bad = await client.call_tool(
                "memory_save_many", {"memories": [items[0] | {"memory_id": "x1"}, items[1] | {"source_url": "nope"}]}
            )
            return ok, bad

    ok, bad = asyncio.run(main())
    assert not ok.is_error
    saved = ok.structured_content or json.loads(ok.content[0].text)
    assert [s["memory_id"] for s in saved["saved"]] == ["m0", "m1", "m2"]
    assert bad.is_error and '"index":1' in bad.content[0].text and "source_url" in bad.content[0].text
    with pytest.raises(LookupError):
        warden.get("x1", caller=OPERATOR)


def test_a_batch_reads_the_view_a_fixed_number_of_times_not_once_per_item(warden: Warden, backend: Backend) -> None:
    """Each memory's row, its policy's version, its tenant's revocations and
    its indexed texts are read for the whole batch at once: on PostgreSQL a
    read per item was a round trip per item (BENCHMARKS.md, "save")."""

    def reads(count: int, batch: int) -> int:
        items = [memory(f"{batch}-{i}", scope={"tenant": f"t{i % 3}", "project": "p1"}) for i in range(count)]
        items += [memory(f"0-{i}", scope={"tenant": f"t{i % 3}", "project": "p1"}) for i in range(batch)]
        with backend.statements(warden) as seen:
            warden.save_many(items, caller=OPERATOR)
        return sum(1 for sql in seen if sql.lstrip().upper().startswith(("SELECT", "WITH")))

    reads(10, 0)  # the store's first batch, and its new versions of 0-*, set up what every later one finds
    few, many = reads(10, 1), reads(300, 2)
    # a large batch reads its rows and its tenants' revocations once more,
    # before the lock (``_batch._prepared``): a fixed few, whatever its size
    assert many <= few + 3, f"a batch of 300 read the view {many} times, one of 10 {few}"
    assert (
        warden.get("m2-299", tenant="t2", caller=OPERATOR).version == 1
        and warden.get("m0-0", tenant="t0", caller=OPERATOR).version == 3
    )
    assert warden.check_projections(caller=OPERATOR).ok


def test_each_tenants_revocations_and_those_naming_none_hold_in_a_batch_of_many_tenants(
    warden: Warden, clock: FrozenClock
) -> None:
    fetched = warden.now()
    clock.advance("1m")
    warden.revoke({"tenant": "t1"}, reason="leak", caller=OPERATOR)
    warden.revoke(
        {"source_prefix": "https://bad.example/"}, reason="a poisoned source, every tenant's", caller=OPERATOR
    )
    head = warden.log.head().seq
    items = [memory(i, scope={"tenant": f"t{i % 3}", "project": "p1"}, fetched_at=fetched) for i in range(9)]
    items[3] = memory(3, scope={"tenant": "t0"}, fetched_at=fetched, source_url="https://bad.example/x")
    with pytest.raises(BatchRefused) as refused:
        warden.save_many(items, caller=OPERATOR)
    assert [(p["index"], p["error"]) for p in refused.value.problems] == [
        (1, "RevokedScope"),
        (3, "RevokedScope"),
        (4, "RevokedScope"),
        (7, "RevokedScope"),
    ]
    assert warden.log.head().seq == head
    kept = [m for i, m in enumerate(items) if i not in (1, 3, 4, 7)]
    assert [r.tenant for r in warden.save_many(kept, caller=OPERATOR)] == ["t0", "t2", "t2", "t0", "t2"]
