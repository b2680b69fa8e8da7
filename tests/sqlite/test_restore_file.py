"""``memwarden restore`` of an SQLite backup (issue 58): the file put in
place of the store once every erasure the store knew of is applied to it,
or refused, nothing changed, saying why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memwarden.engine import OPERATOR, InvalidInput, Warden, restore
from memwarden.events import FrozenClock

from ..conftest import Cli
from ..test_restore import (
    erased_after_backup,
    filled,
    holds_nothing_erased,
    holds_nothing_revoked,
    revocable,
    revoked_after_backup,
)


def test_a_backup_restored_after_an_erasure_serves_none_of_it(tmp_path: Path, clock: FrozenClock) -> None:
    db, backup = tmp_path / "store.db", tmp_path / "before.db"
    cli = Cli(db)
    with Warden(db, clock=clock) as w:
        filled(w)
        assert cli.json("backup", str(backup))["head_seq"] == 2
        erased_after_backup(w)
    before = backup.read_bytes()
    done = cli.json("restore", str(backup))
    assert done["replaced"] is True and done["erasures_reapplied"] == 1 and done["erasure_marks_carried"] == 1
    assert done["head_seq"] == 3  # the backup's two events and the erasure carried into it
    assert backup.read_bytes() == before  # the backup itself is left as it was
    assert not Path(f"{db}.restoring").exists() and not Path(f"{backup}-wal").exists()
    with Warden(db, clock=clock) as w:
        assert w.audit_head(caller=OPERATOR)["hash"] == done["head_hash"]
        raw = b"".join(p.read_bytes() for p in tmp_path.glob("store.db*") if p.is_file())
        holds_nothing_erased(w, raw)
    # restored again over the restored store: it knew of both, and the backup still does not
    again = cli.json("restore", str(backup))
    assert (again["erasures_reapplied"], again["erasure_marks_carried"]) == (1, 1)
    with Warden(db, clock=clock) as w:
        (history,) = [e for e in w.log.read(types=("memory.erased",)) if e.payload["memory_id"] == "pii"]
        assert history.payload["reason"] == "re-applied at restore: GDPR art. 17"  # said once, not nested


def test_a_backup_restored_after_a_revocation_serves_none_of_it(tmp_path: Path, clock: FrozenClock) -> None:
    """save, backup, revoke (a sink was told), restore: what was revoked
    stays out, the revoked key stays revoked, and a second restore of the
    same backup re-applies each once again, never twice."""
    db, backup = tmp_path / "store.db", tmp_path / "before.db"
    cli = Cli(db)
    with Warden(db, clock=clock) as w:
        key = revocable(w)
        cli.json("backup", str(backup))
        ids = revoked_after_backup(w, clock, key)
    counts = ("revocations_reapplied", "key_revocations_reapplied", "policy_changes_reapplied")
    done = cli.json("restore", str(backup))
    assert [done[c] for c in counts] == [2, 1, 1] and done["replaced"] is True
    assert cli("get", "x1").exit_code == 1
    with Warden(db, clock=clock) as w:
        assert w.audit_head(caller=OPERATOR)["hash"] == done["head_hash"]
        holds_nothing_revoked(w, clock, key, ids)
    for _ in range(2):  # over a store that re-applied them: each carried once more, as the original
        again = cli.json("restore", str(backup))
        assert [again[c] for c in counts] == [2, 1, 1]
        with Warden(db, clock=clock) as w:
            reasons = sorted(e.payload["reason"] for e in w.log.read(types=("revocation.issued",)))
            assert reasons == [
                f"re-applied at restore: revocation {ids['x1']}: a sink was told",
                f"re-applied at restore: revocation {ids['y']}: stale",
            ]
            assert not w.get("x1", caller=OPERATOR).usable and w.get("keep", caller=OPERATOR).usable


def test_a_restore_over_a_store_it_cannot_read_or_in_use_is_refused(tmp_path: Path, clock: FrozenClock) -> None:
    db, backup = tmp_path / "store.db", tmp_path / "before.db"
    cli = Cli(db)
    with Warden(db, clock=clock) as w:
        filled(w)
        w.backup(backup, caller=OPERATOR)
        erased_after_backup(w)
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
    # another store's backup is not put in this one's place: its whole history would be gone
    other = tmp_path / "other.db"
    with Warden(other, clock=clock) as o:
        filled(o)
    stranger = cli("restore", str(other), "--json")
    assert stranger.exit_code == 2 and "is no backup of" in json.loads(stranger.stdout)["problem"]
    with Warden(db, clock=clock) as w:
        assert w.audit_head(caller=OPERATOR) == head
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
    assert done.exit_code == 0 and "nothing taken out since the backup could be re-applied" in done.stdout
    with pytest.raises(InvalidInput, match="pg_restore"):
        restore("postgresql://127.0.0.1/x", backup)
    # an SQLite URL names its file as a path does
    assert restore(f"sqlite:///{db}", backup)["replaced"] is True
