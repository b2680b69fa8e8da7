"""A restore never serves a text erased since its backup (issue 58): the
erasures of the store it replaces are applied to the restored one before
anything reads it, or the restore is refused and says why. ``memwarden
restore`` of an SQLite backup: ``tests/sqlite/test_restore_file.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from memwarden.engine import OPERATOR, InvalidInput, Warden
from memwarden.events import FrozenClock, TextErased

from .backends import Backend
from .conftest import START, Cli, save_memory

SECRET = "주민등록번호 900101-1234567 RESTOREMARKER"
LATER = "a later secret LATERMARKER"


def erased_after_backup(w: Warden) -> None:
    """Erasures a backup taken before them does not know of: one of a
    memory it holds, one of a memory saved after it."""
    w.erase(memory_id="pii", reason="GDPR art. 17", caller=OPERATOR)
    save_memory(w, "later", content=LATER, summary="later")
    w.erase(memory_id="later", reason="account closed", caller=OPERATOR)


def filled(w: Warden) -> None:
    save_memory(w, "pii", content=SECRET, summary="개인 정보 RESTOREMARKER", scope={"user": "kim"})
    save_memory(w, "keep", content="nothing secret here", summary="kept")


def holds_nothing_erased(w: Warden, raw: bytes) -> None:
    view = w.get("pii", caller=OPERATOR)
    assert not view.usable and view.reason == "erased" and view.content is None and view.summary is None
    assert w.query(tenant="acme", text="RESTOREMARKER", caller=OPERATOR) == []
    assert SECRET.encode() not in raw and b"RESTOREMARKER" not in raw and b"LATERMARKER" not in raw
    # the memory saved after the backup is not there, and its erased text may never be written back
    with pytest.raises(TextErased):
        w.texts.put("acme", "later", 1, "later", LATER)
    assert w.get("keep", caller=OPERATOR).content == "nothing secret here"
    assert w.audit_verify(caller=OPERATOR)["ok"]
    assert w.check_projections(caller=OPERATOR).ok
    (history,) = [e for e in w.log.read(types=("memory.erased",)) if e.payload["memory_id"] == "pii"]
    assert history.payload["reason"] == "re-applied at restore: GDPR art. 17" and history.actor == "restore"


def test_erasures_are_reapplied_after_an_operators_restore(tmp_path: Path, backend: Backend) -> None:
    """PostgreSQL's backup is pg_dump and its restore pg_restore, which
    memwarden does not run: ``reapply-erasures`` carries the erasures of
    the database a restored one replaces (on SQLite too, after a copy made by hand)."""
    clock = FrozenClock(START)
    db, restored = backend.db(tmp_path, "live.db"), backend.db(tmp_path, "restored.db")
    with Warden(db, clock=clock) as w:
        filled(w)
        backend.copy_store(db, restored)  # the backup, restored as it was
        erased_after_backup(w)
    with Warden(restored, clock=clock) as w:
        assert w.get("pii", caller=OPERATOR).content == SECRET  # what a restore alone serves
        done = Cli(restored).json("reapply-erasures", str(db))
        assert (done["erasures_reapplied"], done["erasure_marks_carried"]) == (1, 1)
        holds_nothing_erased(w, backend.bytes_at_rest(restored))
        again = w.reapply_erasures(db, caller=OPERATOR)  # nothing left to carry
        assert (again["erasures_reapplied"], again["erasure_marks_carried"]) == (0, 0)
        with pytest.raises(InvalidInput, match="not this store"):
            w.reapply_erasures(w.path, caller=OPERATOR)
