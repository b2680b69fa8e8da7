"""The article's record format as users write it: a string
``revocation_version`` tied to its policy, the article's own scan, and
imports that report what they refuse."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from memwarden.engine import OPERATOR, InvalidInput, Warden

from ._http_server import Server, server  # noqa: F401  (the live server fixture)
from .backends import Backend
from .conftest import Cli

ARTICLE = (
    '{"memory_id": "mem_01J9R", "kind": "external_fact", "summary": "배포 API는 승인된 프로젝트에서만 실행한다", '
    '"source_url": "https://example.com/policy/42", "fetched_at": "2026-08-06T09:00:00Z", '
    '"expires_at": "2026-08-06T15:00:00Z", "scope": {"tenant": "team-a", "project": "website", '
    '"permission": "deploy:read"}, "revocation_version": "policy-42-v7", "invalidation_reason": null, '
    '"verified_at": "2026-08-06T09:00:00Z"}'
)


def article_scan(path: Path) -> str:
    """The article's own scan, as it is written there: a record with an
    invalidation_reason is revoked, else one past its expires_at expired."""
    now = datetime.now(UTC)
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        expires = r.get("expires_at")
        if r.get("invalidation_reason"):
            out.append(f"{r['memory_id']} {r['source_url']} revoked")
        elif expires and datetime.fromisoformat(expires.replace("Z", "+00:00")) <= now:
            out.append(f"{r['memory_id']} {r['source_url']} expired")
    return "".join(f"{line}\n" for line in out)


def article_record(memory_id: str, **changes: object) -> str:
    data = json.loads(ARTICLE)
    data["memory_id"] = memory_id
    data["source_url"] = f"https://example.com/policy/{memory_id}"
    data.update(changes)
    return json.dumps(data, ensure_ascii=False)


@pytest.fixture
def article(tmp_path: Path) -> Path:
    path = tmp_path / "records.jsonl"
    path.write_text(ARTICLE + "\n", encoding="utf-8")
    return path


@pytest.fixture
def several(tmp_path: Path) -> Path:
    """Records in memory-id order, Korean summaries, every case of the scan."""
    path = tmp_path / "several.jsonl"
    lines = [
        article_record("mem_01", invalidation_reason="permission_revoked"),
        article_record("mem_02"),  # expired in August
        article_record("mem_03", expires_at="2099-01-01T00:00:00Z"),  # not due
        article_record("mem_04", expires_at=None),  # never expires by time
        article_record("mem_05", expires_at="2099-01-01T00:00:00Z", invalidation_reason="source_deleted"),
        article_record("mem_06", summary="서울 지사 규칙 🚫"),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_the_article_record_imports_unchanged(run_cli: Cli, article: Path, warden: Warden) -> None:
    data = run_cli.json("import-records", str(article))
    assert data == {"imported": 1, "refused": [], "skipped": 0}
    got = run_cli.json("get", "mem_01J9R", code=1)  # fetched in August, expired since
    assert got["revocation_version"] == "policy-42-v7" and got["policy"] == "default"
    assert got["reason"] == "expired" and got["summary"] == "배포 API는 승인된 프로젝트에서만 실행한다"
    assert run_cli.json("policy", "show")["policies"] == {"default": "policy-42-v7"}
    # the article's own scan and memwarden's due print the same line
    result = run_cli("due")
    assert result.exit_code == 0 and result.stdout == article_scan(article)
    assert result.stdout == "mem_01J9R https://example.com/policy/42 expired\n"


def test_due_over_a_file_prints_exactly_the_article_scan(run_cli: Cli, several: Path) -> None:
    expected = article_scan(several)
    assert expected.count("\n") == 4  # two revoked, two expired
    scanned = run_cli("due", "--records", str(several))
    assert scanned.exit_code == 0 and scanned.stdout == expected
    piped = run_cli("due", "--records", "-", input=several.read_text(encoding="utf-8"))
    assert piped.exit_code == 0 and piped.stdout == expected
    assert run_cli.json("audit", "head")["seq"] == 0  # a scan writes nothing
    assert run_cli.json("import-records", str(several))["imported"] == 6
    assert run_cli("due").stdout == expected
    listed = run_cli.json("due", "--records", str(several))["due"]
    assert [(d["memory_id"], d["reason"]) for d in listed] == [
        ("mem_01", "revoked"),
        ("mem_02", "expired"),
        ("mem_05", "revoked"),
        ("mem_06", "expired"),
    ]


def test_due_records_refuses_a_bad_line_naming_it(run_cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(ARTICLE + "\n" + article_record("x", revocation_version="no spaces allowed") + "\n")
    result = run_cli("due", "--records", str(path))
    assert result.exit_code == 2 and "line 2.revocation_version" in result.stderr


def test_save_under_a_named_version_adopts_it_and_policy_set_retires_it(run_cli: Cli, warden: Warden) -> None:
    base = ["save", "--kind", "external_fact", "--summary", "s", "--content", "c", "--source-url", "https://e"]
    saved = run_cli.json(*base, "--id", "a", "--tenant", "t", "--revocation-version", "policy-42-v7")
    assert saved["version"] == 1
    assert warden.policies(caller=OPERATOR) == {"default": "policy-42-v7"}
    assert (
        warden.get("a", caller=OPERATOR).usable
        and warden.get("a", caller=OPERATOR).revocation_version == "policy-42-v7"
    )
    moved = run_cli.json("policy", "set", "default", "policy-42-v8")
    assert moved["version"] == "policy-42-v8"
    view = warden.get("a", caller=OPERATOR)
    assert not view.usable and view.reason == "policy_changed"
    assert [(d.memory_id, d.reason) for d in warden.due(caller=OPERATOR)] == [("a", "policy_changed")]
    # no way back: neither a save nor a policy change revives v7
    again = run_cli(*base, "--id", "b", "--tenant", "t", "--revocation-version", "policy-42-v7")
    assert again.exit_code == 2 and "revocation_version" in again.stderr and "retired" in again.stderr
    back = run_cli("policy", "set", "default", "policy-42-v7")
    assert back.exit_code == 2 and "retired" in back.stderr
    ahead = run_cli(*base, "--id", "b", "--tenant", "t", "--revocation-version", "policy-42-v9")
    assert ahead.exit_code == 2 and "policy set default policy-42-v9" in ahead.stderr
    assert warden.policies(caller=OPERATOR) == {"default": "policy-42-v8"}
    # re-verifying brings the memory under the current version
    warden.fetchers.register("same", lambda row: "c")
    assert not warden.get("a", caller=OPERATOR).usable


def test_numbered_versions_still_work_and_only_go_up(run_cli: Cli, warden: Warden) -> None:
    assert run_cli.json("policy", "set", "pz", "3")["version"] == 3
    assert warden.policies(caller=OPERATOR) == {"pz": 3}
    assert run_cli("policy", "set", "pz", "3").exit_code == 0  # the version already current: a no-op
    for bad, problem in (("2", "only goes up"), ("1", "retired")):
        result = run_cli("policy", "set", "pz", bad)
        assert result.exit_code == 2 and result.stderr.startswith("Error: version") and problem in result.stderr
    huge = run_cli("policy", "set", "pz", "99999999999999999999999")
    assert huge.exit_code == 2 and "version" in huge.stderr and "Traceback" not in huge.stderr
    # 7 and "7" are one version
    run_cli.json("policy", "set", "pz", "7")
    with pytest.raises(InvalidInput, match="already at"):
        warden.set_policy("pz", 7, caller=OPERATOR)
    assert run_cli.json("audit", "verify")["ok"]


def test_import_reports_refusals_and_exits_1(run_cli: Cli, tmp_path: Path, warden: Warden) -> None:
    warden.set_policy("default", "policy-42-v7", caller=OPERATOR)
    warden.revoke(selector={"tenant": "team-a", "project": "website"}, reason="leak", caller=OPERATOR)
    path = tmp_path / "mixed.jsonl"
    lines = [
        article_record("ok-1", expires_at=None),  # fetched in August, after the revocation (January)
        article_record("revoked-1", fetched_at="2025-12-01T00:00:00Z", expires_at=None),  # before it: refused
        article_record("ahead-1", revocation_version="policy-42-v9"),
        article_record("other-policy", expires_at=None, policy="pz", revocation_version="pz-1"),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run_cli("import-records", str(path), "--json")
    assert result.exit_code == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["imported"] == 2
    assert [(r["line"], r["memory_id"], r["reason"]) for r in data["refused"]] == [
        (2, "revoked-1", "revoked"),
        (3, "ahead-1", "policy_version"),
    ]
    assert "policy set default policy-42-v9" in data["refused"][1]["detail"]
    assert "refused line 2 (revoked-1): revoked" in result.stderr
    # the record naming its own policy adopted that policy's version
    assert warden.policies(caller=OPERATOR) == {"default": "policy-42-v7", "pz": "pz-1"}
    assert warden.get("other-policy", caller=OPERATOR).usable
    # importing again changes nothing and still reports the refusals
    again = run_cli("import-records", str(path), "--json")
    assert again.exit_code == 1 and json.loads(again.stdout)["skipped"] == 2


def test_records_under_a_retired_version_are_history(run_cli: Cli, tmp_path: Path, warden: Warden) -> None:
    warden.set_policy("default", "policy-42-v7", caller=OPERATOR)
    warden.set_policy("default", "policy-42-v8", caller=OPERATOR)
    path = tmp_path / "old.jsonl"
    path.write_text(article_record("old", expires_at=None) + "\n", encoding="utf-8")
    assert run_cli.json("import-records", str(path))["imported"] == 1
    assert warden.get("old", caller=OPERATOR).reason == "policy_changed"


def test_a_file_naming_two_keys_for_an_unset_policy_is_refused_whole(run_cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl"
    path.write_text(
        article_record("a") + "\n" + article_record("b", revocation_version="policy-42-v8") + "\n", encoding="utf-8"
    )
    result = run_cli("import-records", str(path))
    assert result.exit_code == 2 and "line 2.revocation_version" in result.stderr
    assert "policy set default" in result.stderr
    assert run_cli.json("audit", "head")["seq"] == 0


def test_the_policy_and_its_retired_versions_survive_a_rebuild_and_an_export(
    run_cli: Cli, article: Path, warden: Warden, tmp_path: Path, backend: Backend
) -> None:
    run_cli.json("import-records", str(article))
    run_cli.json("policy", "set", "default", "policy-42-v8")
    assert run_cli.json("projections", "check")["ok"]
    run_cli.json("rebuild")
    assert run_cli("policy", "set", "default", "policy-42-v7").exit_code == 2
    exported = tmp_path / "log.jsonl"
    run_cli.json("export", str(exported))
    other = Cli(backend.db(tmp_path, "other.db"))
    other.json("import", str(exported))
    assert other.json("policy", "show")["policies"] == {"default": "policy-42-v8"}
    assert other.json("get", "mem_01J9R", code=1)["reason"] == "policy_changed"
    assert other("policy", "set", "default", "policy-42-v7").exit_code == 2
    assert other.json("audit", "verify")["ok"]


def test_http_policy_versions(server: Server) -> None:  # noqa: F811
    with server.client("security") as c:
        ok = c.post("/v1/policies/web", json={"version": "web-v2"})
        assert ok.status_code == 200 and ok.json()["version"] == "web-v2"
        bad = c.post("/v1/policies/web", json={"version": "has space"})
        assert bad.status_code == 422 and bad.json()["field"].endswith("version")
        back = c.post("/v1/policies/web", json={"version": "1"})
        assert back.status_code == 422 and "retired" in back.json()["problem"]
    with server.client("agent") as c:
        body = {
            "memory_id": "rv",
            "kind": "external_fact",
            "summary": "s",
            "content": "c",
            "source_url": "https://e.example",
            "scope": {"tenant": "acme"},
            "policy": "web",
            "revocation_version": "web-v2",
        }
        assert c.post("/v1/memories", json=body).status_code == 201
        assert c.get("/v1/memories/rv").json()["revocation_version"] == "web-v2"
    assert httpx.get(f"{server.url}/healthz").status_code == 200


def test_records_piped_in_are_imported_or_refused_as_from_a_file(run_cli: Cli, warden: Warden) -> None:
    # a pipe is read once: the progress bar's count of lines once read it all first, and the
    # import then found nothing, answering "imported 0" with exit 0
    exe = str(Path(sys.executable).with_name("memwarden"))
    good = article_record("piped", expires_at=None) + "\n"
    for args in (["import-records", "/dev/stdin", "--json"], ["import-records", "-", "--json"]):
        done = subprocess.run(
            [exe, "--db", str(run_cli.db), *args], input=good, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["imported" if args[1] != "-" else "skipped"] == 1
    assert warden.get("piped", caller=OPERATOR).usable
    head = warden.head_seq()
    bad = article_record("ahead", fetched_at="2999-01-01T00:00:00Z") + "\n"
    refused = run_cli("import-records", "-", "--json", input=bad)
    assert refused.exit_code == 2 and json.loads(refused.stdout)["field"] == "line 1.fetched_at"
    assert warden.head_seq() == head


def test_a_save_never_retires_the_memories_of_a_policys_first_version(run_cli: Cli, warden: Warden) -> None:
    # naming a new version in a save adopts it only while no memory is under the implicit
    # version 1: past that it would retire every tenant's, unseen, inside a save's answer
    base = ["save", "--kind", "external_fact", "--summary", "s", "--content", "c", "--source-url", "https://e"]
    run_cli.json(*base, "--id", "first", "--tenant", "other")
    head = warden.head_seq()
    typo = run_cli(*base, "--id", "typo", "--tenant", "t", "--revocation-version", "2x", "--json")
    assert typo.exit_code == 2, typo.stdout
    refusal = json.loads(typo.stdout)
    assert refusal["field"] == "revocation_version" and "policy set default 2x" in refusal["problem"]
    assert warden.head_seq() == head and warden.policies(caller=OPERATOR) == {}
    assert warden.get("first", caller=OPERATOR).usable
    # policy set is where the change is made, saying what it retires
    assert run_cli.json("policy", "set", "default", "2x")["retired"] == 1
    assert run_cli.json(*base, "--id", "typo", "--tenant", "t", "--revocation-version", "2x")["version"] == 1


def test_a_batch_or_file_never_retires_its_own_first_version_memories(
    run_cli: Cli, warden: Warden, tmp_path: Path
) -> None:
    # the earlier lines were not yet in the view when a later one adopted a version
    line = {"kind": "external_fact", "summary": "s", "content": "c", "source_url": "https://e", "policy": "p3"}
    batch = tmp_path / "batch.jsonl"
    batch.write_text(
        json.dumps({**line, "memory_id": "a", "scope": {"tenant": "t9"}})
        + "\n"
        + json.dumps({**line, "memory_id": "b", "scope": {"tenant": "t8"}, "revocation_version": "v5"})
        + "\n",
        encoding="utf-8",
    )
    head = warden.head_seq()
    refused = run_cli("save-many", str(batch), "--json")
    assert refused.exit_code == 2, refused.stdout
    [problem] = json.loads(refused.stdout)["errors"]
    assert problem["index"] == 1 and problem["field"].endswith("revocation_version"), problem
    assert warden.head_seq() == head and warden.policies(caller=OPERATOR) == {}
    # a record file naming version 1 (a record naming none is under it) and a key, for a
    # policy never set, is refused whole: adopting the key would retire its own version-1 records
    records = tmp_path / "records.jsonl"
    records.write_text(
        article_record("r1", revocation_version=1) + "\n" + article_record("r2", revocation_version="k7") + "\n",
        encoding="utf-8",
    )
    mixed = run_cli("import-records", str(records), "--json")
    assert mixed.exit_code == 2 and json.loads(mixed.stdout)["field"] == "line 2.revocation_version", mixed.stdout
    assert warden.head_seq() == head and warden.policies(caller=OPERATOR) == {}


def test_a_record_naming_no_expiry_lives_as_its_kind_says(run_cli: Cli, warden: Warden, tmp_path: Path) -> None:
    # as a save: the kind's rule from the policy file (external_fact: 6 h), an unknown kind
    # refused; only an explicit null is the article's "never by time"
    record = json.loads(article_record("old", fetched_at="2026-01-01T00:00:00Z"))
    del record["expires_at"]
    path = tmp_path / "no-expiry.jsonl"
    path.write_text(json.dumps(record) + "\n" + article_record("kept", expires_at=None) + "\n", encoding="utf-8")
    assert run_cli.json("import-records", str(path))["imported"] == 2
    old = warden.get("old", caller=OPERATOR)
    assert not old.usable and old.reason == "expired" and old.expires_at == "2026-01-01T06:00:00.000000Z"
    assert warden.get("kept", caller=OPERATOR).expires_at is None
    head = warden.head_seq()
    path.write_text(json.dumps({**record, "memory_id": "odd", "kind": "bogus_kind"}) + "\n", encoding="utf-8")
    refused = run_cli("import-records", str(path), "--json")
    assert refused.exit_code == 2 and json.loads(refused.stdout)["field"] == "line 1.kind", refused.stdout
    assert warden.head_seq() == head
