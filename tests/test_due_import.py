"""An operator's memory-record file: import it, and `due` lists exactly what
must be re-verified."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memwarden.engine import OPERATOR, InvalidInput, Warden
from memwarden.events import FrozenClock

from .conftest import Cli

NOW = "2026-01-05T09:00:00Z"


def record(memory_id: str, *, expires: str | None, invalid: str | None = None, **extra: object) -> dict:
    return {
        "memory_id": memory_id,
        "kind": "external_fact",
        "summary": f"{memory_id} 요약",
        "source_url": f"https://src.example/{memory_id}",
        "fetched_at": "2026-01-04T09:00:00Z",
        "expires_at": expires,
        "scope": {"tenant": "acme", "project": "p1", "permission": "read"},
        "revocation_version": 1,
        "invalidation_reason": invalid,
        "verified_at": "2026-01-04T09:00:00Z",
        **extra,
    }


@pytest.fixture
def records(tmp_path: Path) -> Path:
    rows = [
        record("fresh-1", expires="2026-01-06T09:00:00Z"),
        record("fresh-2", expires=None),
        record("past-1", expires="2026-01-05T08:00:00Z"),
        record("past-2", expires="2026-01-05T09:00:00Z"),  # expiry is exclusive: at 09:00 it is past
        record("invalid-1", expires="2026-01-06T09:00:00Z", invalid="source_changed"),
        record("invalid-and-past", expires="2026-01-04T10:00:00Z", invalid="superseded by v2"),
    ]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_due_lists_exactly_the_invalidated_and_the_expired(warden: Warden, records: Path) -> None:
    result = warden.import_records(records, caller=OPERATOR)
    assert result.imported == 6 and result.refused == []
    due = {d.memory_id: d.reason for d in warden.due(caller=OPERATOR)}
    assert due == {"past-1": "expired", "past-2": "expired", "invalid-1": "revoked", "invalid-and-past": "revoked"}
    usable = {v.memory_id for v in warden.query(tenant="acme", caller=OPERATOR)}
    assert usable == {"fresh-1", "fresh-2"}
    assert warden.get("invalid-and-past", caller=OPERATOR).reason == "invalidated"
    assert warden.get("invalid-and-past", caller=OPERATOR).detail == "superseded by v2"
    assert warden.get("invalid-1", caller=OPERATOR).reason == "source_changed"


def test_due_cli_text_and_json(warden: Warden, records: Path, run_cli: Cli, clock: FrozenClock) -> None:
    assert run_cli.json("import-records", str(records)) == {"imported": 6, "refused": [], "skipped": 0}
    # the CLI reads the wall clock (later than every expiry here): every record that can expire is due
    lines = run_cli("due").stdout.splitlines()
    assert "invalid-1 https://src.example/invalid-1 revoked" in lines
    assert "past-1 https://src.example/past-1 expired" in lines
    assert len(lines) == 5 and not any(line.startswith("fresh-2") for line in lines)
    data = run_cli.json("due")
    assert data["due"][0] == {
        "memory_id": "fresh-1",
        "source_url": "https://src.example/fresh-1",
        "reason": "expired",
        "tenant": "acme",
    }
    assert {d["reason"] for d in data["due"] if d["memory_id"].startswith("invalid")} == {"revoked"}


def test_reimporting_is_a_no_op(warden: Warden, records: Path) -> None:
    warden.import_records(records, caller=OPERATOR)
    head = warden.log.head().seq
    again = warden.import_records(records, caller=OPERATOR)
    assert (again.imported, again.skipped) == (0, 6)
    assert warden.log.head().seq == head


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("{not json", "line 3"),
        ('["a list"]', "line 3"),
        (json.dumps(record("x", expires="2026-01-06T09:00:00Z", extra_field=1)), "line 3.extra_field"),
        (json.dumps({**record("x", expires=None), "fetched_at": "2026-01-04T09:00:00"}), "line 3.fetched_at"),
        (json.dumps({**record("x", expires=None), "memory_id": ""}), "line 3.memory_id"),
        (json.dumps({**record("x", expires=None), "scope": {"project": "p"}}), "line 3.scope.tenant"),
        # a fetch from the future is refused, not trusted
        (json.dumps({**record("x", expires=None), "fetched_at": "8999-01-01T00:00:00Z"}), "line 3.fetched_at"),
    ],
)
def test_a_malformed_line_is_refused_with_its_number_and_nothing_imported(
    warden: Warden, tmp_path: Path, run_cli: Cli, line: str, field: str
) -> None:
    good = json.dumps(record("ok", expires=None))
    path = tmp_path / "bad.jsonl"
    path.write_text(f"{good}\n{good.replace('ok', 'ok2')}\n{line}\n", encoding="utf-8")
    with pytest.raises(InvalidInput) as info:
        warden.import_records(path, caller=OPERATOR)
    assert str(info.value).startswith(field)
    assert warden.log.head().seq == 0
    result = run_cli("import-records", str(path))
    assert result.exit_code == 2 and field in result.stderr


def test_a_record_expiring_at_or_before_its_fetch_is_imported_born_expired(warden: Warden, tmp_path: Path) -> None:
    """As the article's scan treats it: due at once, and the rest of the file goes in."""
    path = tmp_path / "odd.jsonl"
    rows = [
        record("born-expired", expires="2026-01-01T00:00:00Z"),  # before its fetch on the 4th
        record("at-fetch", expires="2026-01-04T09:00:00Z"),  # at its fetch
        record("fine", expires="2026-01-06T09:00:00Z"),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert warden.import_records(path, caller=OPERATOR).imported == 3
    due = {d.memory_id: d.reason for d in warden.due(caller=OPERATOR)}
    assert due == {"born-expired": "expired", "at-fetch": "expired"}
    assert warden.get("fine", caller=OPERATOR).usable
    assert [d.memory_id for d in warden.scan_records(path, caller=OPERATOR)] == ["born-expired", "at-fetch"]


def test_records_at_a_higher_revocation_version_raise_the_policy(warden: Warden, tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(
        json.dumps({**record("a", expires=None), "revocation_version": 3})
        + "\n"
        + json.dumps({**record("b", expires=None), "revocation_version": 2})
        + "\n",
        encoding="utf-8",
    )
    warden.import_records(path, caller=OPERATOR)
    assert warden.policies(caller=OPERATOR) == {"default": 3}
    assert warden.get("a", caller=OPERATOR).usable
    assert warden.get("b", caller=OPERATOR).reason == "policy_changed"
    assert {d.memory_id: d.reason for d in warden.due(caller=OPERATOR)} == {"b": "policy_changed"}
