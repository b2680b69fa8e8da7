"""A restore never serves a text erased since its backup (issue 58): the
erasures of the store it replaces are applied to the restored one before
anything reads it, or the restore is refused and says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memwarden.engine import OPERATOR, InvalidInput, Warden, restore
from memwarden.events import FrozenClock, TextErased

from .backends import Backend
from .conftest import START, Cli, save_memory

SECRET = "주민등록번호 900101-1234567 RESTOREMARKER"
LATER = "a later secret LATERMARKER"


def _erased_after_backup(w: Warden) -> None:
    """Erasures a backup taken before them does not know of: one of a
    memory it holds, one of a memory saved after it."""
    w.erase(memory_id="pii", reason="GDPR art. 17", caller=OPERATOR)
    save_memory(w, "later", content=LATER, summary="later")
    w.erase(memory_id="later", reason="account closed", caller=OPERATOR)


def _filled(w: Warden) -> None:
    save_memory(w, "pii", content=SECRET, summary="개인 정보 RESTOREMARKER", scope={"user": "kim"})
    save_memory(w, "keep", content="nothing secret here", summary="kept")


def _holds_nothing_erased(w: Warden, raw: bytes) -> None:
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


def test_a_backup_restored_after_an_erasure_serves_none_of_it(tmp_path: Path, clock: FrozenClock) -> None:
    db, backup = tmp_path / "store.db", tmp_path / "before.db"
    cli = Cli(db)
    with Warden(db, clock=clock) as w:
        _filled(w)
        assert cli.json("backup", str(backup))["head_seq"] == 2
        _erased_after_backup(w)
    before = backup.read_bytes()
    done = cli.json("restore", str(backup))
    assert done["replaced"] is True and done["erasures_reapplied"] == 1 and done["erasure_marks_carried"] == 1
    assert done["head_seq"] == 3  # the backup's two events and the erasure carried into it
    assert backup.read_bytes() == before  # the backup itself is left as it was
    assert not Path(f"{db}.restoring").exists() and not Path(f"{backup}-wal").exists()
    with Warden(db, clock=clock) as w:
        assert w.audit_head(caller=OPERATOR)["hash"] == done["head_hash"]
        raw = b"".join(p.read_bytes() for p in tmp_path.glob("store.db*") if p.is_file())
        _holds_nothing_erased(w, raw)
    # restored again over the restored store: it knew of both, and the backup still does not
    again = cli.json("restore", str(backup))
    assert (again["erasures_reapplied"], again["erasure_marks_carried"]) == (1, 1)
    with Warden(db, clock=clock) as w:
        (history,) = [e for e in w.log.read(types=("memory.erased",)) if e.payload["memory_id"] == "pii"]
        assert history.payload["reason"] == "re-applied at restore: GDPR art. 17"  # said once, not nested


def test_a_restore_over_a_store_it_cannot_read_or_in_use_is_refused(tmp_path: Path, clock: FrozenClock) -> None:
    db, backup = tmp_path / "store.db", tmp_path / "before.db"
    cli = Cli(db)
    with Warden(db, clock=clock) as w:
        _filled(w)
        w.backup(backup, caller=OPERATOR)
        _erased_after_backup(w)
        # held open (a server): refused, and the store is as it was
        head = w.audit_head(caller=OPERATOR)
        refused = cli("restore", str(backup), "--json")
        assert refused.exit_code == 2 and "open in another process" in json.loads(refused.stdout)["problem"]
        assert w.audit_head(caller=OPERATOR) == head and w.get("pii", caller=OPERATOR).reason == "erased"
    with Warden(db, clock=clock) as w:
        assert w.audit_head(caller=OPERATOR) == head
    # a backup that is no store, and the store itself, are named as such
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    assert json.loads(cli("restore", str(junk), "--json").stdout)["field"] == "backup"
    assert "is the store itself" in json.loads(cli("restore", str(db), "--json").stdout)["problem"]
    assert cli("restore", str(tmp_path / "missing.db")).exit_code == 2
    # a store whose erasures cannot be read is not restored over
    db.write_bytes(b"\x00damaged" * 4096)
    for side in ("-wal", "-shm"):
        Path(f"{db}{side}").unlink(missing_ok=True)
    refused = cli("restore", str(backup), "--json")
    problem = json.loads(refused.stdout)["problem"]
    assert refused.exit_code == 2 and "cannot be read" in problem and "nothing was restored" in problem
    assert db.read_bytes() == b"\x00damaged" * 4096
    # moved aside, knowingly: the restore goes ahead, and says none could be re-applied
    db.rename(tmp_path / "damaged.db")
    done = cli("restore", str(backup))
    assert done.exit_code == 0 and "no erasure recorded since the backup could be re-applied" in done.stdout
    with pytest.raises(InvalidInput, match="pg_restore"):
        restore("postgresql://127.0.0.1/x", backup)
    # an SQLite URL names its file as a path does
    assert restore(f"sqlite:///{db}", backup)["replaced"] is True


def test_erasures_are_reapplied_after_an_operators_restore(tmp_path: Path, backend: Backend) -> None:
    """PostgreSQL's backup is pg_dump and its restore pg_restore, which
    memwarden does not run: ``reapply-erasures`` carries the erasures of
    the database a restored one replaces (on SQLite too, after a copy made by hand)."""
    clock = FrozenClock(START)
    db, restored = backend.db(tmp_path, "live.db"), backend.db(tmp_path, "restored.db")
    with Warden(db, clock=clock) as w:
        _filled(w)
        backend.copy_store(db, restored)  # the backup, restored as it was
        _erased_after_backup(w)
    with Warden(restored, clock=clock) as w:
        assert w.get("pii", caller=OPERATOR).content == SECRET  # what a restore alone serves
        done = Cli(restored).json("reapply-erasures", str(db))
        assert (done["erasures_reapplied"], done["erasure_marks_carried"]) == (1, 1)
        _holds_nothing_erased(w, backend.bytes_at_rest(restored))
        again = w.reapply_erasures(db, caller=OPERATOR)  # nothing left to carry
        assert (again["erasures_reapplied"], again["erasure_marks_carried"]) == (0, 0)
        with pytest.raises(InvalidInput, match="not this store"):
            w.reapply_erasures(w.path, caller=OPERATOR)
