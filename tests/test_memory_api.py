"""The Memory API's times: ``saved_at`` means one thing wherever ``load``
shows it (the time the content stands for), and the log's own time of a
save is ``recorded_at``, never shown under the same name."""

from __future__ import annotations

import json

from memwarden.engine import OPERATOR, Warden
from memwarden.events import FrozenClock


def test_saved_at_is_the_same_instant_in_the_entry_and_its_history(warden: Warden, clock: FrozenClock) -> None:
    envelope = json.dumps({"text": "# 규칙 v1", "saved_at": "2026-01-05T08:00:00Z"}, ensure_ascii=False)
    warden.memory_save(tenant="acme", agent="bot", key="MEMORY.md", content=envelope, caller=OPERATOR)
    clock.advance("1m")
    warden.memory_save(tenant="acme", agent="bot", key="MEMORY.md", content="# 규칙 v2", caller=OPERATOR)
    (entry,) = warden.memory_load(tenant="acme", agent="bot", history=True, caller=OPERATOR)["memories"]
    first, latest = entry["history"]
    # the entry's saved_at is its current version's, as the history says it
    assert latest["version"] == entry["version"] == 2
    assert entry["saved_at"] == latest["saved_at"]
    # the agent's own saved_at is the time its content stands for
    assert first["saved_at"].startswith("2026-01-05T08:00:00")
    # when the log recorded each save is recorded_at: the event's own time
    recorded = [e.recorded_at for e in warden.log.read() if e.type == "memory.saved"]
    assert [first["recorded_at"], latest["recorded_at"]] == recorded
    assert first["recorded_at"] != first["saved_at"]
