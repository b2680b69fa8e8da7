"""The command line as a person sees it: tables with headers (rich tables
on a terminal, tab-separated lines when piped), coloured statuses, the
derivation tree, progress bars, a refusal said once, and the words."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from memwarden.engine import OPERATOR, Warden
from memwarden.events import FrozenClock
from rich.cells import cell_len

from .conftest import Cli, memwarden_subprocess, save_memory

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def korean(warden: Warden, clock: FrozenClock) -> Warden:
    save_memory(warden, "서울-1", summary="서울 사무실 이전", content="본사는 2027년에 이전한다")
    save_memory(warden, "en-1", summary="the budget", content="plain English")
    clock.advance("1s")
    save_memory(warden, "요약", summary="요약: 이전과 예산", kind="external_fact", derived_from=["서울-1", "en-1"])
    warden.set_policy("deploy", "policy-42-v7", caller=OPERATOR)
    return warden


@pytest.mark.parametrize(
    ("args", "header"),
    [
        (("query", "--tenant", "acme", "--all"), "memory_id\tstatus\twhy\texpires_at\tsummary"),
        (("keys", "list"), "key_id\trole\ttenants\tagent\tcreated_at\tstatus"),
        (("log", "tail", "-n", "3"), "seq\trecorded_at\tactor\ttype\tstream"),
        (("stats",), "week\treverified_after_expiry\tblocked_by_revocation\tsaved"),
        (("policy", "show"), "policy\tversion"),
    ],
)
def test_piped_tables_are_a_header_and_tab_separated_lines(
    korean: Warden, run_cli: Cli, args: tuple, header: str
) -> None:
    if args[0] == "keys":
        run_cli("keys", "create", "--role", "auditor")
    lines = run_cli(*args).stdout.splitlines()
    assert lines[0].startswith(header)
    width = lines[0].count("\t")
    assert lines[1:], "the table has rows"
    assert all(line.count("\t") == width for line in lines[1:])


def test_piped_query_keeps_korean_exactly(korean: Warden, run_cli: Cli) -> None:
    # the command reads the wall clock, past these memories' frozen-clock expiry
    rows = [line.split("\t") for line in run_cli("query", "--tenant", "acme", "--all").stdout.splitlines()[1:]]
    assert rows[-1][:2] == ["서울-1", "usable"] and rows[-1][2].startswith("expired")
    assert rows[-1][-1] == "서울 사무실 이전"


def test_on_a_terminal_tables_line_up_with_coloured_statuses(
    korean: Warden, run_cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    korean.revoke({"ids": ["en-1"]}, reason="gone", caller=OPERATOR)
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "160")
    out = run_cli("query", "--tenant", "acme", "--all").stdout
    assert "\x1b[" in out, "statuses are coloured on a terminal"
    assert "\x1b[31mrevoked" in out and "\x1b[32musable" in out
    plain = [ANSI.sub("", line) for line in out.splitlines() if line.strip()]
    assert [w for w in plain[0].split() if w not in "┃│"] == ["memory_id", "status", "why", "expires_at", "summary"]
    # Korean is two cells wide a character: the column rules still line up
    rules = {tuple(cell_len(line[:i]) for i, c in enumerate(line) if c in "┃│") for line in plain if "━" not in line}
    assert len(rules) == 1, plain


def test_explain_shows_the_derivation_tree(korean: Warden, run_cli: Cli) -> None:
    korean.revoke({"ids": ["en-1"]}, reason="gone", caller=OPERATOR)
    out = run_cli("explain", "요약").stdout
    assert "drawn from" in out
    assert re.search(r"서울-1 v1 usable", out) and re.search(r"en-1 v1 revoked", out)
    assert "memory.invalidated" in out and "NOT usable: derived_from_unusable" in out
    parent = run_cli("explain", "서울-1").stdout
    assert "what was drawn from it" in parent and re.search(r"요약 v1 invalidated", parent)


def test_json_failures_print_their_object_on_stdout(korean: Warden, run_cli: Cli) -> None:
    bad = run_cli("query", "--tenant", "acme", "--limit", "5", "--text", " ", "--json")
    assert bad.exit_code == 2
    assert json.loads(bad.stdout) == {"error": "invalid_input", "field": "text", "problem": "must be non-empty"}
    assert bad.stderr.count("\n") == 1
    missing = run_cli("get", "no-such", "--json")
    assert missing.exit_code == 1
    assert json.loads(missing.stdout) == {
        "error": "not_found",
        "field": "memory_id",
        "problem": "memory 'no-such' not found",
        "memory_id": "no-such",
    }
    # without --json, stdout stays empty on a refusal
    assert run_cli("get", "no-such").stdout == ""


def test_a_refusal_is_said_once_and_the_log_needs_asking(korean: Warden, db_path: Path) -> None:
    korean.close()
    refused = memwarden_subprocess(db_path, "revoke", "--reason", "x", env={"MEMWARDEN_LOG": ""})
    assert refused.returncode == 2
    assert refused.stderr.strip().count("\n") == 0 and "empty selector" in refused.stderr
    done = memwarden_subprocess(db_path, "revoke", "--tenant", "acme", "--reason", "x", env={"MEMWARDEN_LOG": ""})
    assert done.returncode == 0 and done.stderr == ""
    verbose = memwarden_subprocess(db_path, "-v", "revoke", "--tenant", "globex", "--reason", "x")
    assert "revocation_issued" in verbose.stderr
    setting = memwarden_subprocess(db_path, "revoke", "--tenant", "x", "--reason", "x", env={"MEMWARDEN_LOG": "info"})
    assert "revocation_issued" in setting.stderr
    wrong = memwarden_subprocess(db_path, "audit", "head", env={"MEMWARDEN_LOG": "loud"})
    assert wrong.returncode == 2 and "MEMWARDEN_LOG" in wrong.stderr


def test_words(korean: Warden, run_cli: Cli) -> None:
    assert "1 memory taken out" in run_cli("revoke", "--id", "en-1", "--reason", "x").stdout
    assert "erased 1 memory" in run_cli("erase", "--id", "서울-1", "--reason", "gdpr").stdout
    refused = run_cli("keys", "create", "--role", "auditor", "--tenant", "acme")
    assert refused.exit_code == 2 and "an auditor key reads every tenant" in refused.stderr
    agent = run_cli("keys", "create", "--role", "auditor", "--agent", "x", "--json")
    assert agent.exit_code == 2 and json.loads(agent.stdout)["field"] == "agent"  # the one given is named
    miss = run_cli("cache", "get", "--tool", "t", "--tool-version", "1", "--input-hash", "h", "--tenant", "acme")
    assert miss.exit_code == 1 and miss.stdout.strip() == "miss"
    head = korean.head_seq()
    assert run_cli("audit", "verify").stdout.strip() == f"ok: {head} events, head seq {head}"


def run_on_a_terminal(db: Path, *args: str) -> str:
    """The installed command with stdout and stderr on a pseudo-terminal, as
    a person at a terminal runs it; what the terminal showed."""
    main, secondary = pty.openpty()
    exe = Path(sys.executable).with_name("memwarden")
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([str(exe), "--db", str(db), *args], stdout=secondary, stderr=secondary, env=env)
    os.close(secondary)
    shown = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    proc.wait(timeout=120)
    os.close(main)
    return shown.decode("utf-8", "replace")


@pytest.mark.parametrize("command", ["audit verify", "export", "import-records"])
def test_long_commands_show_a_progress_bar_on_a_terminal(
    warden: Warden, clock: FrozenClock, db_path: Path, tmp_path: Path, command: str
) -> None:
    for i in range(30):
        save_memory(warden, f"m{i}")
    warden.close()
    args = command.split()
    if command == "export":
        args.append(str(tmp_path / "log.jsonl"))
    if command == "import-records":
        records = tmp_path / "records.jsonl"
        line = {
            "memory_id": "rec-1",
            "kind": "external_fact",
            "summary": "배포 API는 승인된 프로젝트에서만 실행한다",
            "source_url": "https://example.com/policy/42",
            "fetched_at": "2026-08-06T09:00:00Z",
            "expires_at": "2026-08-06T15:00:00Z",
            "scope": {"tenant": "team-a", "project": "website", "permission": "deploy:read"},
            "revocation_version": "policy-42-v7",
            "invalidation_reason": None,
            "verified_at": "2026-08-06T09:00:00Z",
        }
        records.write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
        args.append(str(records))
    shown = run_on_a_terminal(db_path, *args)
    assert args[0] in ANSI.sub("", shown) and "━" in shown, shown
    # piped, the same command prints its answer and no bar
    piped = memwarden_subprocess(db_path, *args)
    assert "━" not in piped.stderr + piped.stdout


def test_an_agents_escape_sequence_is_shown_never_dropped(warden: Warden, db_path: Path, run_cli: Cli) -> None:
    # click strips what looks like a colour code from output that is not a
    # terminal: an agent's ESC [2J must show as its escape there too
    save_memory(warden, "esc", summary="before\x1b[2Jafter\x1b]0;title\x07")
    piped = run_cli("get", "esc").stdout
    assert "before\\u001b[2Jafter\\u001b]0;title\\u0007" in piped, piped
    assert "\x1b" not in piped
    warden.close()
    shown = run_on_a_terminal(db_path, "get", "esc")
    assert "before\\u001b[2Jafter" in shown and "\x1b[2J" not in shown, shown


def test_a_subcommands_table_on_a_terminal_is_drawn_not_escaped(korean: Warden, db_path: Path) -> None:
    # ``policy show`` runs inside two command groups: the table's own colours
    # reach the terminal as colours, not as visible escapes
    korean.close()
    shown = run_on_a_terminal(db_path, "policy", "show")
    assert "\\u001b" not in shown and "\x1b[" in shown, shown
    assert "deploy" in shown and "policy-42-v7" in shown


def test_policy_show_with_no_policy_says_so(run_cli: Cli, warden: Warden) -> None:
    out = run_cli("policy", "show").stdout
    assert out.strip() != "policy\tversion" and "no policy version has been set" in out, out
    assert run_cli.json("policy", "show") == {"policies": {}}
