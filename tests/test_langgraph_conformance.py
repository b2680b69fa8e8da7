"""LangGraph's own store tests against ``MemwardenStore``
(``scripts/conformance/langgraph``): both distributions' suites, on SQLite,
on PostgreSQL and through a live server's ``Client`` and ``AsyncClient``,
pass but for the committed intended differences. Then that the harness
can fail: on a failure the list does not name, and on a listed test that
passes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "conformance" / "langgraph"
DIFFERENCES = SCRIPT.with_name("langgraph_differences.toml")
PACKAGES = ("langgraph-checkpoint", "langgraph-checkpoint-sqlite")


def conformance(*args: str, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=dict(os.environ)
    )


def suites_pass_but_for_the_listed_differences(tmp_path: Path, legs: list[str]) -> None:
    counts_file = tmp_path / "counts.json"
    done = conformance("--legs", ",".join(legs), "--json", str(counts_file))
    assert done.returncode == 0, done.stdout[-30000:] + done.stderr[-5000:]
    counts = json.loads(counts_file.read_text(encoding="utf-8"))
    if "postgres leg skipped" in done.stdout:
        legs = [leg for leg in legs if leg != "postgres"]
    assert sorted(counts) == sorted(PACKAGES)
    for name in PACKAGES:
        assert sorted(counts[name]) == sorted(legs), name
        for leg, tally in counts[name].items():
            # nothing failed or was skipped; the bulk of the tests built a MemwardenStore
            assert set(tally) <= {"passed", "xfailed", "of which built a store"}, (name, leg, tally)
            assert tally["passed"] > 80 and tally["of which built a store"] > 80, (name, leg, tally)


# each leg takes a minute or more, most of it their suites' sleeps and waits: in process on
# SQLite here, over the client and on PostgreSQL in files of their own
# (test_langgraph_conformance_client.py, _postgres.py), so three workers share them
@pytest.mark.timeout(900)
def test_langgraphs_store_suites_pass_in_process(tmp_path: Path) -> None:
    suites_pass_but_for_the_listed_differences(tmp_path, ["sqlite"])


def test_a_failure_the_list_does_not_name_fails_the_run(tmp_path: Path) -> None:
    unlisted = tmp_path / "differences.toml"
    unlisted.write_text("# nothing intended\n", encoding="utf-8")
    done = conformance(
        "--package", "langgraph-checkpoint-sqlite", "--legs", "sqlite", "--differences", str(unlisted),
        "--", "-k", "test_nonnull_migrations",
    )  # fmt: skip
    assert done.returncode != 0 and "1 failed" in done.stdout, done.stdout[-5000:]


def test_a_listed_test_that_passes_fails_the_run(tmp_path: Path) -> None:
    listed = tmp_path / "differences.toml"
    listed.write_text(
        DIFFERENCES.read_text(encoding="utf-8")
        + '\n[[difference]]\ntest = "langgraph-checkpoint-sqlite/tests/test_store.py::'
        + 'test_search_empty_prefix_is_unconstrained"\nwhy = "listed here to check the harness"\n',
        encoding="utf-8",
    )
    done = conformance(
        "--package", "langgraph-checkpoint-sqlite", "--legs", "sqlite", "--differences", str(listed),
        "--", "-k", "test_search_empty_prefix_is_unconstrained or test_nonnull_migrations",
    )  # fmt: skip
    assert done.returncode != 0 and "XPASS(strict)" in done.stdout, done.stdout[-5000:]
    assert "1 xfailed" in done.stdout  # the listed failure is still expected
