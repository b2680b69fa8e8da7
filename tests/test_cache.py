from __future__ import annotations

import pytest
from memwarden.engine import OPERATOR, Warden
from memwarden.events import FrozenClock

from .conftest import Cli

KEY = ["--tool", "web_search", "--tool-version", "2.1", "--input-hash", "sha256:abc", "--tenant", "acme"]


def test_hit_only_when_every_key_part_and_scope_match(run_cli: Cli, clock: FrozenClock) -> None:
    put = run_cli.json(
        "cache",
        "put",
        *KEY,
        "--project",
        "p1",
        "--content",
        "검색 결과 3건",
        "--source-url",
        "https://search.example/?q=x",
        "--ttl",
        "15m",
    )
    assert put["memory_id"].startswith("cache:") and put["seq"] == 1
    hit = run_cli.json("cache", "get", *KEY, "--project", "p1")
    assert hit == {"hit": True, "memory_id": put["memory_id"], "content": "검색 결과 3건", "reason": "hit"}
    for changed in (
        [
            "--tool",
            "web_search",
            "--tool-version",
            "2.2",
            "--input-hash",
            "sha256:abc",
            "--tenant",
            "acme",
            "--project",
            "p1",
        ],
        [
            "--tool",
            "web_search",
            "--tool-version",
            "2.1",
            "--input-hash",
            "sha256:abd",
            "--tenant",
            "acme",
            "--project",
            "p1",
        ],
        [
            "--tool",
            "web_fetch",
            "--tool-version",
            "2.1",
            "--input-hash",
            "sha256:abc",
            "--tenant",
            "acme",
            "--project",
            "p1",
        ],
        [
            "--tool",
            "web_search",
            "--tool-version",
            "2.1",
            "--input-hash",
            "sha256:abc",
            "--tenant",
            "globex",
            "--project",
            "p1",
        ],
        [*KEY, "--project", "p2"],
        [*KEY, "--project", "p1", "--user", "kim"],
    ):
        miss = run_cli("cache", "get", *changed, "--json")
        assert miss.exit_code == 1, changed
        assert '"hit":false' in miss.stdout


def test_an_expired_entry_is_a_miss(warden: Warden, clock: FrozenClock) -> None:
    scope = {"tenant": "acme"}
    warden.cache_put(
        tool="t",
        tool_version="1",
        input_hash="h",
        scope=scope,
        content="r",
        source_url="tool:t",
        ttl="15m",
        caller=OPERATOR,
    )
    clock.advance("16m")
    assert warden.cache_get(tool="t", tool_version="1", input_hash="h", scope=scope, caller=OPERATOR)[2] == "expired"


def test_revoking_the_tool_empties_the_cache(warden: Warden) -> None:
    scope = {"tenant": "acme"}
    warden.cache_put(
        tool="calc",
        tool_version="1",
        input_hash="h",
        scope=scope,
        content="42",
        source_url="tool:calc",
        caller=OPERATOR,
    )
    assert warden.cache_get(tool="calc", tool_version="1", input_hash="h", scope=scope, caller=OPERATOR)[0]
    warden.revoke({"tool": "calc"}, reason="tool compromised", caller=OPERATOR)
    hit, _, reason = warden.cache_get(tool="calc", tool_version="1", input_hash="h", scope=scope, caller=OPERATOR)
    assert not hit and reason == "revoked"


@pytest.mark.parametrize("missing", ["--tool", "--tool-version", "--input-hash", "--tenant"])
def test_every_key_part_is_required(run_cli: Cli, missing: str) -> None:
    args = list(KEY)
    i = args.index(missing)
    del args[i : i + 2]
    assert run_cli("cache", "get", *args).exit_code == 2
