from __future__ import annotations

import json
from pathlib import Path

import pytest
from memwarden.engine import MAX_BATCH, OPERATOR, ChecksumMismatch, InvalidInput, TtlPolicy, Warden
from memwarden.events import FrozenClock, content_checksum

from .backends import Backend
from .conftest import Cli, save_memory

KOREAN = "서울 본사 3층 회의실은 목요일 오후 2시부터 4시까지 예약되어 있습니다.\n담당: 김민준 🙂"


def test_save_stores_content_addressed_and_returns_its_checksum(warden: Warden, backend: Backend) -> None:
    result = save_memory(warden, "m1", content=KOREAN)
    assert result.checksum == content_checksum(KOREAN) and result.version == 1 and result.seq == 1
    assert backend.stored_text(warden.path, result.checksum) == KOREAN.encode("utf-8")
    event = warden.log.get(1)
    assert event is not None and event.payload["content_checksum"] == result.checksum
    assert "서울 본사" not in event.payload_json  # the text itself is not in the log
    assert warden.get("m1", caller=OPERATOR).content == KOREAN


def test_korean_content_end_to_end_through_the_cli(run_cli: Cli, tmp_path: Path) -> None:
    source = tmp_path / "note.md"
    source.write_bytes(KOREAN.encode("utf-8"))
    saved = run_cli.json(
        "save",
        "--id",
        "회의",
        "--kind",
        "project_rule",
        "--summary",
        "회의실 예약",
        "--content-file",
        str(source),
        "--source-url",
        source.as_uri(),
        "--tenant",
        "본사",
    )
    assert saved["checksum"] == content_checksum(KOREAN)
    got = run_cli.json("get", "회의")
    assert got["content"] == KOREAN and got["summary"] == "회의실 예약" and got["scope"]["tenant"] == "본사"
    found = run_cli.json("query", "--tenant", "본사", "--text", "회의실")
    assert [m["memory_id"] for m in found["memories"]] == ["회의"]
    raw = run_cli("get", "회의", "--json")
    assert KOREAN.encode("utf-8").replace(b"\n", b"\\n") in raw.stdout_bytes


def test_a_checksum_that_does_not_match_is_refused(warden: Warden, run_cli: Cli) -> None:
    wrong = "sha256:" + "0" * 64
    with pytest.raises(ChecksumMismatch, match=f"checksum: {wrong} does not match"):
        save_memory(warden, "m1", content="text", checksum=wrong)
    assert save_memory(warden, "m1", content="text", checksum=content_checksum("text")).version == 1
    result = run_cli(
        "save",
        "--id",
        "m2",
        "--kind",
        "external_fact",
        "--summary",
        "s",
        "--content",
        "x",
        "--source-url",
        "https://e",
        "--tenant",
        "t",
        "--checksum",
        wrong,
    )
    assert result.exit_code == 2
    assert "checksum" in result.stderr and wrong in result.stderr and content_checksum("x") in result.stderr
    assert warden.log.head().seq == 1


@pytest.mark.parametrize(
    ("kind", "hours"), [("research_result", 1), ("external_fact", 6), ("project_rule", 720), ("permission", None)]
)
def test_shipped_ttl_defaults(warden: Warden, kind: str, hours: int | None) -> None:
    result = save_memory(warden, f"m-{kind}", kind=kind, ttl=None)
    if hours is None:
        assert result.expires_at is None
    else:
        assert (
            result.expires_at == FrozenClock("2026-01-05T09:00:00Z").advance(f"{hours}h").isoformat()[:-6] + ".000000Z"
        )


def test_ttl_from_a_policy_file_flag_and_expires_at(tmp_path: Path, clock: FrozenClock, backend: Backend) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[kinds.weather]\nttl = "15m"\n[kinds.contract]\nreview = "30d"\n[kinds.grant]\nevents_only = true\n'
    )
    w = Warden(backend.db(tmp_path, "p.db"), clock=clock, policy=TtlPolicy.from_file(policy))
    assert save_memory(w, "a", kind="weather", ttl=None).expires_at == "2026-01-05T09:15:00.000000Z"
    assert save_memory(w, "b", kind="grant", ttl=None).expires_at is None
    assert save_memory(w, "c", kind="weather", ttl="90s").expires_at == "2026-01-05T09:01:30.000000Z"
    assert (
        save_memory(w, "d", kind="weather", ttl=None, expires_at="2026-01-05T20:00:00+09:00").expires_at
        == "2026-01-05T11:00:00.000000Z"
    )
    with pytest.raises(InvalidInput, match="kind: kind 'unknown-kind' has no TTL"):
        save_memory(w, "e", kind="unknown-kind", ttl=None)
    with pytest.raises(InvalidInput, match="ttl: give either"):
        save_memory(w, "f", ttl="1h", expires_at="2026-01-06T00:00:00Z")
    w.close()
    cli = Cli(backend.db(tmp_path, "p2.db"))
    result = cli.runner.invoke(
        __import__("memwarden.engine.faces.cli", fromlist=["cli"]).cli,
        [
            "--db",
            str(backend.db(tmp_path, "p2.db")),
            "--policy-file",
            str(policy),
            "save",
            "--id",
            "x",
            "--kind",
            "weather",
            "--summary",
            "s",
            "--content",
            "c",
            "--source-url",
            "https://weather.example/u",
            "--tenant",
            "t",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    bad = tmp_path / "bad.toml"
    bad.write_text('[kinds.weather]\nttl = "soon"\n')
    with pytest.raises(InvalidInput, match="kinds.weather"):
        TtlPolicy.from_file(bad)


def test_saving_again_makes_a_new_version_and_keeps_history(
    warden: Warden, clock: FrozenClock, backend: Backend
) -> None:
    save_memory(warden, "m1", content="first")
    clock.advance("1m")
    second = save_memory(warden, "m1", content="second")
    assert second.version == 2
    assert warden.get("m1", caller=OPERATOR).content == "second"
    history = warden.explain("m1", caller=OPERATOR)["history"]
    assert [h["event"] for h in history] == ["memory.saved", "memory.saved"]
    assert backend.text_versions(warden.path) == 2


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--fetched-at", "2026-01-05T09:00:00"], "fetched_at"),
        (["--fetched-at", "yesterday"], "fetched_at"),
        (["--ttl", "soon"], "ttl"),
        (["--ttl", "1h", "--expires-at", "2026-01-06T00:00:00Z"], "ttl"),
        (["--expires-at", "2020-01-01T00:00:00Z", "--fetched-at", "2021-01-01T00:00:00Z"], "expires_at"),
        (["--revocation-version", "v 7"], "revocation_version"),
        (["--revocation-version", "99999999999999999999999"], "revocation_version"),
        (["--fetched-at", "2099-01-01T00:00:00Z"], "fetched_at"),
        (["--tool-version", "1"], "tool"),
        (["--checksum", "md5:abc"], "checksum"),
    ],
)
def test_bad_input_names_the_field_exits_2_and_changes_nothing(run_cli: Cli, args: list[str], field: str) -> None:
    base = [
        "save",
        "--id",
        "m1",
        "--kind",
        "external_fact",
        "--summary",
        "s",
        "--content",
        "c",
        "--source-url",
        "https://e",
        "--tenant",
        "t",
    ]
    result = run_cli(*base, *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"Error: {field}") or f"{field}:" in result.stderr, result.stderr
    assert result.stdout == ""
    assert run_cli.json("audit", "head")["seq"] == 0


def test_bad_ids_and_scope_are_refused(warden: Warden) -> None:
    with pytest.raises(InvalidInput, match="memory_id"):
        save_memory(warden, "has space")
    with pytest.raises(InvalidInput, match="scope.tenant"):
        save_memory(warden, "ok", tenant="")
    with pytest.raises(InvalidInput, match="content"):
        warden.save(
            memory_id="x",
            kind="external_fact",
            summary="s",
            content=b"bytes",
            source_url="u",  # type: ignore[arg-type]
            scope={"tenant": "t"},
            caller=OPERATOR,
        )
    # an empty idempotency key is a mistake, not "no key": a retry under it would save twice
    with pytest.raises(InvalidInput, match="event_id"):
        save_memory(warden, "ok", event_id="")
    with pytest.raises(ValueError, match="event_id"):  # BatchRefused, naming each item's field
        warden.save_many(
            [
                dict(
                    memory_id="ok",
                    kind="external_fact",
                    summary="s",
                    content="c",
                    source_url="https://example.org/ok",
                    scope={"tenant": "t"},
                    event_id="",
                )
            ],
            caller=OPERATOR,
        )
    assert warden.log.head().seq == 0


@pytest.mark.parametrize("memory_id", ["c1/explain", "a/b/verify"])
def test_an_id_that_would_address_an_http_action_is_refused(warden: Warden, memory_id: str) -> None:
    """Saved, ``c1/explain`` could never be read by its id over HTTP: the
    server decodes ``%2F`` before routing, and the explain of ``c1`` answered."""
    with pytest.raises(InvalidInput, match="memory_id"):
        save_memory(warden, memory_id)
    item = dict(
        memory_id=memory_id,
        kind="external_fact",
        summary="s",
        content="c",
        source_url="https://example.org/x",
        scope={"tenant": "t"},
    )
    with pytest.raises(ValueError, match="memory_id"):
        warden.save_many([item], caller=OPERATOR)
    assert warden.log.head().seq == 0
    save_memory(warden, "c1/explained")  # only the action's own name, at the end, is refused
    save_memory(warden, "a/b")


def test_json_output_is_one_document(run_cli: Cli) -> None:
    result = run_cli(
        "save",
        "--id",
        "m1",
        "--kind",
        "external_fact",
        "--summary",
        "s",
        "--content",
        "c",
        "--source-url",
        "https://e",
        "--tenant",
        "t",
        "--json",
    )
    data = json.loads(result.stdout)
    assert set(data) >= {"memory_id", "version", "checksum", "seq", "expires_at"}


def test_an_empty_tenant_and_an_oversized_batch_are_named_on_the_command_line(run_cli: Cli, tmp_path: Path) -> None:
    empty = run_cli("get", "m1", "--tenant", "")
    assert empty.exit_code == 2 and empty.stderr.startswith("Error: tenant: is empty"), empty.stderr
    line = {
        "kind": "external_fact",
        "summary": "s",
        "content": "c",
        "source_url": "https://e",
        "scope": {"tenant": "t"},
    }
    batch = tmp_path / "batch.jsonl"
    batch.write_text("".join(json.dumps({**line, "memory_id": f"m{i}"}) + "\n" for i in range(MAX_BATCH + 1)))
    refused = run_cli("save-many", str(batch))
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.startswith(f"Error: memories: holds {MAX_BATCH + 1}"), refused.stderr  # named once
    assert run_cli.json("audit", "head")["seq"] == 0
