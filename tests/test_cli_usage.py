"""A usage error (a value of the wrong kind, an unknown option, one given
without its value) exits 2 with click's message on stderr, and with
``--json`` its object on stdout too, as every refusal (CLI.md)."""

from __future__ import annotations

import json

import pytest

from .conftest import Cli


@pytest.mark.parametrize(
    ("args", "field"),
    [
        # --json before the bad option: what follows that is never parsed, and was still asked for
        (["query", "--json", "--tenant", "acme", "--limit", "many"], "limit"),
        (["query", "--tenant", "acme", "--colour", "red", "--json"], "colour"),
        (["audit", "verify", "--json", "--against"], "against"),
    ],
)
def test_a_usage_error_with_json_is_json_on_stdout(run_cli: Cli, args: list[str], field: str) -> None:
    result = run_cli(*args)
    assert result.exit_code == 2, result.output
    refused = json.loads(result.stdout)
    assert refused["error"] == "usage" and refused["field"] == field
    assert refused["problem"] in result.stderr


def test_a_usage_error_without_json_is_only_on_stderr(run_cli: Cli) -> None:
    result = run_cli("query", "--tenant", "acme", "--limit", "many")
    assert result.exit_code == 2 and result.stdout == ""
    assert "Invalid value for '--limit'" in result.stderr


def test_json_after_a_double_dash_is_not_the_flag(run_cli: Cli) -> None:
    result = run_cli("get", "--nope", "--", "--json")
    assert result.exit_code == 2 and result.stdout == ""
