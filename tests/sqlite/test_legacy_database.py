"""A database file written before tenant identity (schema 1) opens, verifies and answers as it did."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from memwarden.engine import OPERATOR, Warden
from memwarden.events import FrozenClock

from ..conftest import save_memory

DATA = Path(__file__).parent.parent / "data"


def test_a_database_from_before_tenant_identity_opens_verifies_and_answers_the_same(tmp_path: Path) -> None:
    db = tmp_path / "legacy.db"
    shutil.copy(DATA / "legacy_v1.db", db)
    expected = json.loads((DATA / "legacy_v1.json").read_text(encoding="utf-8"))
    w = Warden(db, clock=FrozenClock(expected["now"]))
    assert w.audit_verify(f"{expected['head']['seq']}:{expected['head']['hash']}", caller=OPERATOR)["ok"]
    for memory_id, answer in expected["answers"].items():
        view = w.get(memory_id, caller=OPERATOR)
        got = {
            "status": view.status,
            "usable": view.usable,
            "reason": view.reason,
            "version": view.version,
            "content": view.content,
            "summary": view.summary,
            "tenant": view.scope["tenant"],
        }
        assert got == answer, memory_id
    assert w.check_projections(caller=OPERATOR).ok
    # the two memories that shared one text now each hold their own
    w.erase(memory_id="a2", reason="request", caller=OPERATOR)
    assert w.get("b1", caller=OPERATOR).content == "shared words"
    # and the old memory goes on under its tenant
    save_memory(w, "a1", tenant="ta", content="v3")
    assert w.get("a1", caller=OPERATOR).version == 3
    assert [h["event"] for h in w.explain("a1", caller=OPERATOR)["history"]].count("memory.saved") == 3
    w.close()
