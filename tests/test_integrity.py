"""A stored text that no longer matches its checksum is never served."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from memwarden.engine import OPERATOR, SaveResult, Warden
from memwarden.events import FrozenClock

from .backends import Backend
from .conftest import Cli, save_memory


def test_bit_flip_is_quarantined_and_resynced_from_a_file(
    warden: Warden, tmp_path: Path, run_cli: Cli, backend: Backend
) -> None:
    source = tmp_path / "rule.md"
    source.write_text("배포는 금요일에 하지 않는다", encoding="utf-8")
    saved = warden.save(
        memory_id="rule",
        kind="project_rule",
        summary="배포 규칙",
        content=source.read_text("utf-8"),
        source_url=source.as_uri(),
        scope={"tenant": "acme"},
        caller=OPERATOR,
    )
    backend.flip_text(warden.path, saved.checksum)
    view = warden.get("rule", caller=OPERATOR)
    # detected, recorded, restored from the source: usable with the right text
    assert view.usable and view.content == "배포는 금요일에 하지 않는다"
    types = [e.type for e in warden.log.read()]
    assert types == ["memory.saved", "memory.integrity_failed", "memory.resynced"]
    assert warden.get("rule", caller=OPERATOR).usable
    assert run_cli.json("stats")["weeks"][0]["integrity_failures"] == 1


def test_without_a_good_source_it_stays_quarantined_and_is_never_served(
    warden: Warden, tmp_path: Path, run_cli: Cli, backend: Backend
) -> None:
    source = tmp_path / "rule.md"
    source.write_text("original", encoding="utf-8")
    saved = warden.save(
        memory_id="rule",
        kind="project_rule",
        summary="s",
        content="original",
        source_url=source.as_uri(),
        scope={"tenant": "acme"},
        caller=OPERATOR,
    )
    source.write_text("changed meanwhile", encoding="utf-8")
    backend.flip_text(warden.path, saved.checksum)
    for _ in range(2):
        view = warden.get("rule", caller=OPERATOR)
        assert not view.usable and view.reason == "integrity_failed" and view.content is None
        assert view.status == "quarantined" and view.action == "treat_as_unknown"
    assert [v.memory_id for v in warden.query(tenant="acme", caller=OPERATOR)] == []
    listed = warden.query(tenant="acme", include_unusable=True, caller=OPERATOR)
    assert [(v.memory_id, v.reason) for v in listed] == [("rule", "integrity_failed")]
    assert [e.type for e in warden.log.read()].count("memory.integrity_failed") == 1
    result = run_cli("get", "rule", "--json")
    assert result.exit_code == 1 and '"content":null' in result.stdout
    # once the source holds the recorded text again, the next read restores it
    source.write_text("original", encoding="utf-8")
    assert warden.get("rule", caller=OPERATOR).usable


def test_resync_from_git_show_branch_path(warden: Warden, tmp_path: Path, backend: Backend) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
        "PATH": "/usr/bin:/bin:/usr/local/bin",
    }
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=env)
    (repo / "docs").mkdir()
    (repo / "docs" / "MEMORY.md").write_text("규칙: 테스트 먼저", encoding="utf-8")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "m"], check=True, env=env)
    (repo / "docs" / "MEMORY.md").write_text("working tree differs", encoding="utf-8")  # git show reads the branch
    saved = warden.save(
        memory_id="git-rule",
        kind="project_rule",
        summary="s",
        content="규칙: 테스트 먼저",
        source_url="https://git.example/repo",
        source="docs/MEMORY.md",
        repo=str(repo),
        branch="main",
        scope={"tenant": "acme"},
        caller=OPERATOR,
    )
    backend.flip_text(warden.path, saved.checksum)
    view = warden.get("git-rule", caller=OPERATOR)
    assert view.usable and view.content == "규칙: 테스트 먼저"


def save_text(warden: Warden) -> SaveResult:
    """Memory "m" holding "text", with no source to resync from."""
    return warden.save(
        memory_id="m",
        kind="external_fact",
        summary="s",
        content="text",
        source_url="https://nowhere",
        scope={"tenant": "acme"},
        caller=OPERATOR,
    )


def test_a_missing_blob_counts_as_corruption(warden: Warden, backend: Backend) -> None:
    saved = save_text(warden)
    backend.replace_text(warden.path, saved.checksum, None)
    view = warden.get("m", caller=OPERATOR)
    assert not view.usable and view.reason == "integrity_failed"


@pytest.mark.parametrize("flips", [1, 7])
def test_query_path_detects_flips_too(warden: Warden, clock: FrozenClock, flips: int, backend: Backend) -> None:
    checksums = []
    for i in range(10):
        checksums.append(
            warden.save(
                memory_id=f"m{i}",
                kind="external_fact",
                summary=f"s{i}",
                content=f"text {i}",
                source_url="https://nowhere",
                scope={"tenant": "acme"},
                caller=OPERATOR,
            ).checksum
        )
    for checksum in checksums[:flips]:
        backend.flip_text(warden.path, checksum)
    served = warden.query(tenant="acme", caller=OPERATOR)
    assert len(served) == 10 - flips
    assert all(v.content == f"text {v.memory_id[1:]}" for v in served)


@pytest.mark.parametrize("stored", ["tampered text", "text", 42, b"\xff\xfe not utf-8"])
def test_a_blob_rewritten_with_another_type_or_bad_bytes_is_judged_not_crashed(
    warden: Warden, stored: object, run_cli: Cli, backend: Backend
) -> None:
    """Raw SQL can put any type in the content column (SQLite does not
    enforce BLOB): the read paths and the audit hash whatever bytes are there."""
    saved = save_text(warden)
    backend.replace_text(warden.path, saved.checksum, stored)
    same = stored == "text"  # the same text stored as TEXT: the same bytes
    assert run_cli.json("audit", "verify")["texts_damaged"] == (0 if same else 1)
    # the chain holds (exit 0), and the line an auditor reads says a text was changed under it
    said = run_cli("audit", "verify")
    assert said.exit_code == 0 and ("texts damaged: 1 memory" in said.stdout) is not same, said.stdout
    for view in (
        warden.get("m", caller=OPERATOR),
        *warden.query(tenant="acme", include_unusable=True, caller=OPERATOR),
    ):
        assert view.usable is same
        assert view.content == ("text" if same else None)
        if not same:
            assert view.reason == "integrity_failed"


def test_audit_counts_a_summary_edited_or_a_text_gone(warden: Warden, run_cli: Cli, backend: Backend) -> None:
    # each event keeps its summary's checksum as well as its content's; a text gone (not
    # erased) matches neither
    saved = save_text(warden)
    save_memory(warden, "n", content="other")
    assert run_cli.json("audit", "verify")["texts_damaged"] == 0
    backend.replace_summary(warden.path, "n", "zz")
    assert run_cli.json("audit", "verify")["texts_damaged"] == 1
    backend.replace_text(warden.path, saved.checksum, None)
    said = run_cli("audit", "verify")
    assert said.exit_code == 0 and "texts damaged: 2 memories" in said.stdout, said.stdout
