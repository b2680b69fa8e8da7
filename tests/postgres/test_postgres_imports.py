"""Imports on PostgreSQL pay round trips by the batch, not by the memory:
an export's texts go in one statement per 5,000, and a record file's
policy versions are judged once per (policy, version), not per record."""

from __future__ import annotations

import json
from pathlib import Path

from memwarden.engine import OPERATOR, Warden
from memwarden.events import FrozenClock

from .statements import recorded_statements


def _saved(url: str, n: int) -> Warden:
    w = Warden(url, clock=FrozenClock("2026-01-05T09:00:00Z"))
    if not n:
        return w
    w.save_many(
        [
            {
                "memory_id": f"m{i}",
                "kind": "permission",
                "summary": f"권한 {i}",
                "content": f"비밀 {i}",
                "source_url": f"https://src.example/{i}",
                "scope": {"tenant": f"t{i % 3}"},
            }
            for i in range(n)
        ],
        caller=OPERATOR,
    )
    return w


def _statements_of(action: object) -> int:
    with recorded_statements() as seen:
        action()  # type: ignore[operator]
    return len(seen)


def test_importing_an_export_sends_its_texts_together(pg_url: str, tmp_path: Path) -> None:
    w = _saved(pg_url, 200)
    export = tmp_path / "export.jsonl"
    w.export(export, caller=OPERATOR)
    assert w.import_log(export, caller=OPERATOR) == 0  # a re-import of the log's own prefix writes nothing
    count = _statements_of(lambda: w.import_log(export, caller=OPERATOR))
    assert count < 40, count  # 200 texts: not a statement each
    w.close()


def test_a_record_files_policy_versions_are_judged_once(pg_url: str, tmp_path: Path) -> None:
    w = _saved(pg_url, 0)
    w.revoke({"tenant": "t0"}, reason="breach", caller=OPERATOR)

    def records(n: int) -> Path:
        path = tmp_path / f"records-{n}.jsonl"
        with open(path, "w", encoding="utf-8") as fh:
            for i in range(n):
                record = {
                    "memory_id": f"r{i}",
                    "kind": "permission",
                    "summary": f"권한 {i}",
                    "source_url": "https://src.example/x",
                    "fetched_at": "2026-01-05T08:00:00Z",
                    "scope": {"tenant": "t0"},
                    "revocation_version": 1,
                }
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        return path

    few, many = records(10), records(110)
    assert len(w.import_records(many, caller=OPERATOR).refused) == 110  # every one covered by the revocation
    per_record = (
        _statements_of(lambda: w.import_records(many, caller=OPERATOR))
        - _statements_of(lambda: w.import_records(few, caller=OPERATOR))
    ) / 100
    assert per_record <= 1, per_record  # the record's own event id, looked up; nothing of its policy
    w.close()
