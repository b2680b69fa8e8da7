"""The smaller frictions of issue #43, each replayed as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from memwarden.engine import OPERATOR, Warden

from .conftest import Cli, save_memory


def test_replay_before_1970_is_refused(run_cli: Cli) -> None:
    result = run_cli("replay", "--as-of", "1960-01-01T00:00:00Z")
    assert result.exit_code == 2 and "as_of" in result.stderr and "1970" in result.stderr


def test_erasing_a_user_with_no_memories_is_refused(warden: Warden, run_cli: Cli) -> None:
    save_memory(warden, "m1", scope={"user": "kim"})
    head = warden.head_seq()
    result = run_cli("erase", "--user", "kmi", "--reason", "typo")
    assert result.exit_code != 0 and "kmi" in result.stderr
    assert warden.head_seq() == head


def test_as_a_library_info_lines_stay_off_stdout(tmp_path: Path) -> None:
    script = (
        "from memwarden.engine import OPERATOR, Warden\n"
        f"w = Warden({str(tmp_path / 'lib.db')!r})\n"
        "w.save(memory_id='m', kind='external_fact', summary='s', content='c', source_url='https://x.example/',"
        " scope={'tenant': 't'}, caller=OPERATOR)\n"
        "w.set_policy('default', 2, caller=OPERATOR)\n"
        "w.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "policy_version_changed" in done.stderr  # warnings still say what happened
    assert "memory_saved" not in done.stderr + done.stdout


def test_stats_weekly_is_the_default_table(warden: Warden, run_cli: Cli) -> None:
    save_memory(warden, "m1")
    assert run_cli.json("stats", "--weekly") == run_cli.json("stats")
    assert warden.stats(caller=OPERATOR)


def test_the_revocation_dry_run_counts_the_cascade(warden: Warden) -> None:
    save_memory(warden, "evidence")
    save_memory(warden, "summary", derived_from=["evidence"])
    save_memory(warden, "digest", derived_from=["summary"])
    preview = warden.preview_revocation({"ids": ["evidence"]}, caller=OPERATOR)
    result = warden.revoke({"ids": ["evidence"]}, reason="bad source", caller=OPERATOR)
    assert (preview["covered"], preview["cascaded"]) == (result.covered, result.cascaded) == (1, 2)
