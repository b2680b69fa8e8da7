"""Revocation: in force at commit, on every read path, with no way back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from memwarden.engine import OPERATOR, InvalidInput, RevokedScope, Warden
from memwarden.engine.faces.http import create_app
from memwarden.events import FrozenClock

from .conftest import Cli, save_memory


@pytest.fixture
def populated(warden: Warden) -> Warden:
    save_memory(
        warden, "a1", tenant="acme", project="p1", summary="서울 지사 예산", scope={"user": "kim", "agent": "bot"}
    )
    save_memory(warden, "a2", tenant="acme", project="p2", summary="부산 지사 예산", scope={"permission": "finance"})
    save_memory(warden, "a3", tenant="acme", project="p2", kind="project_rule", source_url="https://wiki.acme/rules/3")
    save_memory(
        warden, "g1", tenant="globex", project="p1", summary="서울 사무실", scope={"user": "kim", "tool": "search"}
    )
    return warden


@pytest.mark.parametrize(
    ("selector", "gone"),
    [
        ({"tenant": "acme"}, {"a1", "a2", "a3"}),
        ({"tenant": "acme", "project": "p2"}, {"a2", "a3"}),
        ({"permission": "finance"}, {"a2"}),
        ({"user": "kim"}, {"a1", "g1"}),
        ({"agent": "bot"}, {"a1"}),
        ({"tool": "search"}, {"g1"}),
        ({"kind": "project_rule"}, {"a3"}),
        ({"source_prefix": "https://wiki.acme/"}, {"a3"}),
        ({"ids": ["a1", "g1"]}, {"a1", "g1"}),
        ({"everything": True}, {"a1", "a2", "a3", "g1"}),
    ],
)
def test_every_selector_takes_its_scope_out_at_commit(populated: Warden, selector: dict, gone: set[str]) -> None:
    result = populated.revoke(selector, reason="incident 42", by="sec-lee", caller=OPERATOR)
    assert result.covered == len(gone)
    for tenant in ("acme", "globex"):
        visible = {v.memory_id for v in populated.query(tenant=tenant, caller=OPERATOR)}
        assert not visible & gone
        assert {v.memory_id for v in populated.query(tenant=tenant, text="예산", caller=OPERATOR)} & gone == set()
    for memory_id in gone:
        view = populated.get(memory_id, caller=OPERATOR)
        assert not view.usable and view.reason == "revoked" and result.revocation_id in (view.detail or "")


def test_empty_selector_is_refused(run_cli: Cli) -> None:
    result = run_cli("revoke", "--reason", "oops")
    assert result.exit_code == 2 and "selector" in result.stderr and "empty" in result.stderr


def test_cli_revoke_reports_id_seq_and_count(populated: Warden, run_cli: Cli) -> None:
    data = run_cli.json("revoke", "--tenant", "acme", "--project", "p2", "--reason", "leak", "--by", "sec")
    assert data["covered"] == 2 and data["revocation_id"].startswith("rev_") and data["seq"] == 5
    assert [v.memory_id for v in populated.query(tenant="acme", caller=OPERATOR)] == ["a1"]
    all_ = populated.query(tenant="acme", include_unusable=True, caller=OPERATOR)
    assert {v.memory_id: v.reason for v in all_} == {"a1": None, "a2": "revoked", "a3": "revoked"}
    # the CLI runs on the wall clock, long after these memories expired; --all still says why
    listed = run_cli.json("query", "--tenant", "acme", "--all")["memories"]
    assert {m["memory_id"]: m["reason"] for m in listed} == {"a1": "expired", "a2": "revoked", "a3": "revoked"}
    assert run_cli.json("revoke", "--id", "a1", "--id", "g1", "--reason", "x")["covered"] == 2


def test_no_resurrection(populated: Warden, clock: FrozenClock, tmp_path: Path) -> None:
    old_export = tmp_path / "before.jsonl"
    populated.export(old_export, caller=OPERATOR)
    rev = populated.revoke({"tenant": "acme", "project": "p2"}, reason="leak", caller=OPERATOR)
    # the same content again, with its old fetch time: refused, naming the revocation
    with pytest.raises(RevokedScope, match=rev.revocation_id):
        save_memory(
            populated,
            "a2",
            tenant="acme",
            project="p2",
            fetched_at="2026-01-05T09:00:00Z",
            scope={"permission": "finance"},
        )
    # a fetch made at the very moment of the revocation does not escape it
    with pytest.raises(RevokedScope):
        save_memory(populated, "a9", tenant="acme", project="p2", fetched_at=populated.now())
    # re-importing an old export is a no-op: it is a prefix of this log
    assert populated.import_log(old_export, caller=OPERATOR) == 0
    # importing an operator's records with old fetches: refused and reported
    records = tmp_path / "records.jsonl"
    records.write_text(
        json.dumps(
            {
                "memory_id": "a3",
                "kind": "project_rule",
                "summary": "rule",
                "source_url": "https://wiki.acme/rules/3",
                "fetched_at": "2026-01-05T08:00:00Z",
                "expires_at": "2026-02-05T08:00:00Z",
                "scope": {"tenant": "acme", "project": "p2"},
                "revocation_version": 1,
            }
        )
        + "\n",
        encoding="utf-8",
    )
    result = populated.import_records(records, caller=OPERATOR)
    assert result.imported == 0 and result.refused[0]["revocation_id"] == rev.revocation_id
    for memory_id in ("a2", "a3"):
        assert populated.get(memory_id, caller=OPERATOR).reason == "revoked"
    # only a fresh fetch after the revocation, under the current policy version, is usable again
    clock.advance("1s")
    fresh = save_memory(populated, "a2", tenant="acme", project="p2", scope={"permission": "finance"})
    assert fresh.version == 2 and populated.get("a2", caller=OPERATOR).usable
    assert populated.get("a3", caller=OPERATOR).reason == "revoked"
    assert populated.check_projections(caller=OPERATOR).ok


def test_policy_version_change(populated: Warden, clock: FrozenClock, tmp_path: Path, run_cli: Cli) -> None:
    source = tmp_path / "s.txt"
    source.write_text("content", encoding="utf-8")
    populated.save(
        memory_id="p",
        kind="external_fact",
        summary="s",
        content="content",
        source_url=source.as_uri(),
        scope={"tenant": "acme"},
        policy="finance",
        caller=OPERATOR,
    )
    changed = run_cli.json("policy", "set", "finance", "2")
    assert {k: changed[k] for k in ("policy", "version", "seq", "retired", "unchanged")} == {
        "policy": "finance",
        "version": 2,
        "seq": 6,
        "retired": 1,
        "unchanged": False,
    }
    view = populated.get("p", caller=OPERATOR)
    assert not view.usable and view.reason == "policy_changed" and view.action == "reverify"
    assert populated.get("a1", caller=OPERATOR).usable  # other policies untouched
    assert {d.memory_id: d.reason for d in populated.due(caller=OPERATOR)} == {"p": "policy_changed"}
    with pytest.raises(InvalidInput, match="revocation_version"):
        populated.save(
            memory_id="q",
            kind="external_fact",
            summary="s",
            content="c",
            source_url="https://finance.example/q",
            scope={"tenant": "acme"},
            policy="finance",
            revocation_version=1,
            caller=OPERATOR,
        )
    assert populated.verify("p", caller=OPERATOR).outcome == "verified"
    assert populated.get("p", caller=OPERATOR).usable and populated.get("p", caller=OPERATOR).revocation_version == 2
    # versions only go up: lowering one would bring back what the raise took out
    result = run_cli("policy", "set", "finance", "1")
    assert result.exit_code == 2 and "version" in result.stderr
    assert run_cli.json("policy", "show")["policies"] == {"finance": 2}


def test_revocations_are_counted_in_stats(populated: Warden, run_cli: Cli) -> None:
    populated.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
    week = run_cli.json("stats", "--weekly")["weeks"][0]
    assert week["revocations"] == 1 and week["blocked_by_revocation"] == 3 and week["saved"] == 4


def test_a_revocation_covers_what_existed_and_says_so_where_it_is_issued(
    populated: Warden, clock: FrozenClock, run_cli: Cli
) -> None:
    rev = populated.revoke({"tenant": "acme", "project": "p2"}, reason="leak", caller=OPERATOR)
    clock.advance("1s")
    # a later save of a fresh fetch in the same scope is not blocked: usable
    later = save_memory(populated, "a7", tenant="acme", project="p2")
    assert populated.get("a7", caller=OPERATOR).usable and later.version == 1
    # a save of content fetched before it is refused
    with pytest.raises(RevokedScope, match=rev.revocation_id):
        save_memory(populated, "a8", tenant="acme", project="p2", fetched_at="2026-01-05T09:00:00Z")
    # and both doors say it, in the same words
    said = (
        "It covers what was saved before it commits and does not block later saves: a memory fetched after it is "
        "usable; only a save of content fetched at or before it is refused."
    )
    assert said in " ".join(run_cli("revoke", "--help").stdout.split())
    with TestClient(create_app(populated, scheduler=False, mcp=False)) as client:
        described = client.get("/openapi.json").json()["paths"]["/v1/revocations"]["post"]["description"]
    assert said in " ".join(described.split())
