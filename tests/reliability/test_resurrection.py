"""At least 10,000 adversarial attempts to bring back revoked memories
(``--runslow``; the default run a tenth of each kind): none succeeds, and
every refusal is recorded."""

from __future__ import annotations

import json
import random
from pathlib import Path

from memwarden.engine import OPERATOR, InvalidInput, RevokedScope, Warden
from memwarden.events import FrozenClock, MemorySaved
from structlog.testing import capture_logs

from .._sizes import full_size
from ..backends import Backend

TENANTS = [f"t{i}" for i in range(5)]


def test_thousands_of_attempts(tmp_path: Path, backend: Backend) -> None:
    """Every way back a revoked memory has, tried a thousand times (ten
    thousand under ``--runslow``): none brings it back."""
    # a tenth is enough by default: the imports repeat one deterministic
    # operation on the same file, the replays and forgeries take thirty old
    # events each, and 900 saves with random ids, fetch times and versions
    # try each of the 240 revoked ids about four times
    share = 1 if full_size() else 10  # 1/share of each kind of attempt

    def times(n: int) -> int:
        return n // share

    clock = FrozenClock("2026-01-05T09:00:00Z")
    db = backend.db(tmp_path, "live.db")
    w = Warden(db, clock=clock)
    contents: dict[str, tuple[str, str]] = {}
    for i in range(400):
        tenant = TENANTS[i % 5]
        content = f"비밀 {i}"
        w.save(
            memory_id=f"m{i}",
            kind="permission",
            summary=f"권한 {i}",
            content=content,
            source_url=f"https://src.example/{i}",
            scope={"tenant": tenant, "project": f"p{i % 3}"},
            caller=OPERATOR,
        )
        contents[f"m{i}"] = (tenant, content)
    backup = backend.db(tmp_path, "backup.db")
    backend.copy_store(db, backup)
    old_export = tmp_path / "before.jsonl"
    w.export(old_export, caller=OPERATOR)
    records = tmp_path / "records.jsonl"
    with open(records, "w", encoding="utf-8") as fh:
        for memory_id, (tenant, content) in contents.items():
            if tenant not in TENANTS[:3]:
                continue  # the record file of the tenants about to be revoked
            fh.write(
                json.dumps(
                    {
                        "memory_id": memory_id,
                        "kind": "permission",
                        "summary": f"권한 {memory_id}",
                        "source_url": "https://src.example/x",
                        "fetched_at": "2026-01-05T09:00:00Z",
                        "expires_at": None,
                        "scope": {"tenant": tenant},
                        "revocation_version": 1,
                        "content": content,
                    }
                )
                + "\n"
            )
    old_events = [e.to_model() for e in w.log.read(types=("memory.saved",))]
    clock.advance("1h")
    for tenant in TENANTS[:3]:
        w.revoke({"tenant": tenant}, reason="breach", caller=OPERATOR)
    w.set_policy("default", 2, caller=OPERATOR)
    revoked = {m for m, (t, _) in contents.items() if t in TENANTS[:3]}
    assert len(revoked) == 240

    def brought_back(event: MemorySaved) -> bool | None:
        """Whether the event's memory is usable again (None: it was never revoked)."""
        if event.memory_id not in revoked:
            return None
        return w.get(event.memory_id, tenant=event.tenant, caller=OPERATOR).usable

    # only events of revoked memories count as attempts below
    old_events = [e for e in old_events if e.memory_id in revoked]
    rng = random.Random(10_000)
    attempts = refused = 0
    with capture_logs() as logs:
        for _ in range(times(9_000)):  # re-save the same content, claiming every plausible old fetch time
            memory_id = rng.choice(sorted(revoked))
            tenant, content = contents[memory_id]
            fetched = rng.choice(
                ["2026-01-05T09:00:00Z", "2026-01-05T09:30:00Z", "2026-01-05T10:00:00Z", "2026-01-05T08:00:00+09:00"]
            )
            attempts += 1
            try:
                w.save(
                    memory_id=memory_id,
                    kind="permission",
                    summary="again",
                    content=content,
                    source_url="https://src.example/x",
                    scope={"tenant": tenant},
                    fetched_at=fetched,
                    revocation_version=rng.choice([1, 2]),
                    caller=OPERATOR,
                )
            except (RevokedScope, InvalidInput):
                refused += 1
        for _ in range(times(300)):  # re-import the old export: a prefix of this log, so nothing happens
            attempts += 1
            assert w.import_log(old_export, caller=OPERATOR) == 0
            refused += 1
        for _ in range(times(100)):  # re-import the operator's record file
            attempts += 1
            result = w.import_records(records, caller=OPERATOR)
            assert result.imported == 0 and len(result.refused) == 240
            refused += 1
        for event in old_events[: times(300)]:  # replay old events: the same event is a no-op
            attempts += 1
            assert w.log.append([event]) == [w.log.read(streams=[event.stream]).__next__().seq]
            refused += brought_back(event) is False
        for event in old_events[: times(300)]:  # ...and under a new id it lands, but the view keeps it revoked
            attempts += 1
            forged = MemorySaved(**{**event.model_dump(), "event_id": f"forged-{event.event_id}"})
            w.log.append([forged])
            refused += brought_back(event) is False
        for _ in range(times(50)):  # lower the policy back: refused
            attempts += 1
            try:
                w.set_policy("default", 1, caller=OPERATOR)
            except InvalidInput:
                refused += 1
        # restore the pre-revocation backup as a new database, export it, import it here
        restored = backend.db(tmp_path, "restored.db")
        backend.copy_store(backup, restored)
        other = Warden(restored, clock=clock)
        restored_export = tmp_path / "restored.jsonl"
        other.export(restored_export, caller=OPERATOR)
        other.close()
        for _ in range(times(250)):
            attempts += 1
            assert w.import_log(restored_export, caller=OPERATOR) == 0
            refused += 1
    assert attempts >= times(10_000) and refused == attempts
    refusals_logged = [entry for entry in logs if entry["event"] == "save_refused"]
    assert len(refusals_logged) == times(9_000)  # every refused save is recorded, naming why
    assert sum(1 for entry in refusals_logged if entry["revocation_id"]) >= times(4_000)
    for memory_id in revoked:
        assert not w.get(memory_id, caller=OPERATOR).usable
    for tenant in TENANTS[:3]:
        assert w.query(tenant=tenant, limit=10_000, caller=OPERATOR) == []
    # the untouched tenants are usable again once re-verified under policy 2 (no fetcher: re-save fresh)
    assert w.audit_verify(caller=OPERATOR)["ok"] and w.check_projections(caller=OPERATOR).ok
    # a rebuild from the log reaches the same verdicts
    w.rebuild(caller=OPERATOR)
    assert all(not w.get(m, caller=OPERATOR).usable for m in revoked)
    # and so does a brand-new database importing today's log
    fresh = Warden(backend.db(tmp_path, "fresh.db"), clock=clock)
    today = tmp_path / "today.jsonl"
    w.export(today, caller=OPERATOR)
    fresh.import_log(today, caller=OPERATOR)
    assert all(not fresh.get(m, caller=OPERATOR).usable for m in revoked)
    fresh.close()
    w.close()
