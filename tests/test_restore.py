"""A restore never serves a text erased since its backup (issue 58), nor
anything revoked since: the erasures, revocations, key revocations and
policy changes of the store it replaces are applied to the restored one
before anything reads it, or the restore is refused and says why.
``memwarden restore`` of an SQLite backup: ``tests/sqlite/test_restore_file.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from memwarden.engine import OPERATOR, InvalidInput, KeyStore, Warden
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


def revocable(w: Warden) -> str:
    """Memories and a key a backup taken now holds, to be taken out after
    it: the security key's secret."""
    save_memory(w, "x1", summary="x1 REVOKEMARKER", content="x1 REVOKEMARKER text")
    save_memory(w, "y", summary="y REVOKEMARKER", content="y REVOKEMARKER text")
    save_memory(w, "keep", content="nothing revoked here", summary="kept")
    save_memory(w, "contract", policy="contracts")
    return KeyStore(w).create("security", caller=OPERATOR)[0]


def revoked_after_backup(w: Warden, clock: FrozenClock, key: str) -> dict[str, str]:
    """Take out after the backup what ``revocable`` saved: x1 and y
    revoked (y saved again from a later fetch, usable in this store), the
    key revoked, the policy of ``contract`` raised; the revocations' ids."""
    ids = {
        "x1": w.revoke({"tenant": "acme", "ids": ["x1"]}, reason="a sink was told", caller=OPERATOR).revocation_id,
        "y": w.revoke({"tenant": "acme", "ids": ["y"]}, reason="stale", caller=OPERATOR).revocation_id,
    }
    clock.advance("1s")
    save_memory(w, "y", summary="y afresh", content="y fetched again")  # usable here: fetched after
    assert w.get("y", caller=OPERATOR).usable and not w.get("x1", caller=OPERATOR).usable
    keys = KeyStore(w)
    key_id = key[3:].partition("_")[0]
    assert keys.revoke(key_id, caller=OPERATOR) and keys.authenticate(key) is None
    w.change_policy("contracts", 2, caller=OPERATOR)
    return ids


def holds_nothing_revoked(w: Warden, clock: FrozenClock, key: str, ids: dict[str, str]) -> None:
    for memory_id in ("x1", "y"):  # y's fresh version came after the backup: not restored
        view = w.get(memory_id, caller=OPERATOR)
        assert not view.usable and view.reason == "revoked" and view.content is None
    assert w.get("contract", caller=OPERATOR).reason == "policy_changed"
    assert {m.memory_id for m in w.query(tenant="acme", caller=OPERATOR)} == {"keep"}
    assert w.query(tenant="acme", text="REVOKEMARKER", caller=OPERATOR) == []
    assert [
        f.view.memory_id for f in w.search(tenant="acme", query_text="REVOKEMARKER", mode="text", caller=OPERATOR)
    ] == []
    assert KeyStore(w).authenticate(key) is None
    assert w.get("keep", caller=OPERATOR).usable
    # each re-applied once, covering what the original covered, and naming it
    again = {e.payload["selector"]["ids"][0]: e for e in w.log.read(types=("revocation.issued",))}
    assert sorted(again) == ["x1", "y"]
    for memory_id, event in again.items():
        original = ids[memory_id]
        assert event.payload["reason"].startswith(f"re-applied at restore: revocation {original}: ")
        assert event.payload["revocation_id"] != original and event.actor == "restore"
    # as in the store replaced, a fetch after the revocation is usable again
    clock.advance("1s")
    save_memory(w, "y", summary="y afresh", content="y fetched again")
    assert w.get("y", caller=OPERATOR).usable and not w.get("x1", caller=OPERATOR).usable
    assert w.audit_verify(caller=OPERATOR)["ok"]
    assert w.check_projections(caller=OPERATOR).ok


def test_revocations_keys_and_policies_are_reapplied_after_an_operators_restore(
    tmp_path: Path, backend: Backend
) -> None:
    """``reapply`` (and ``reapply-erasures``, its former name) carries
    everything the replaced store took out, once however often it runs."""
    clock = FrozenClock(START)
    db, restored = backend.db(tmp_path, "live.db"), backend.db(tmp_path, "restored.db")
    with Warden(db, clock=clock) as w:
        key = revocable(w)
        backend.copy_store(db, restored)  # the backup, restored as it was
        ids = revoked_after_backup(w, clock, key)
    with Warden(restored, clock=clock) as w:
        assert w.get("x1", caller=OPERATOR).usable and KeyStore(w).authenticate(key) is not None  # a restore alone
        done = Cli(restored).json("reapply", str(db))
        counts = ("revocations_reapplied", "key_revocations_reapplied", "policy_changes_reapplied")
        assert [done[c] for c in counts] == [2, 1, 1] and done["erasures_reapplied"] == 0
        holds_nothing_revoked(w, clock, key, ids)
        again = Cli(restored).json("reapply-erasures", str(db))  # nothing left to carry
        assert [again[c] for c in (*counts, "erasures_reapplied", "erasure_marks_carried")] == [0] * 5
        assert sum(1 for _ in w.log.read(types=("revocation.issued",))) == 2
        assert w.get("y", caller=OPERATOR).usable


def test_a_store_that_knew_the_revocation_gets_no_second_one(tmp_path: Path, backend: Backend) -> None:
    """A backup taken after a revocation and a fresh save holds both: the
    replaced store's revocation is not issued again, and the fresh version
    stays usable as it was there; a policy the backup is past stays put."""
    clock = FrozenClock(START)
    db, restored = backend.db(tmp_path, "live.db"), backend.db(tmp_path, "restored.db")
    with Warden(db, clock=clock) as w:
        revocable(w)
        w.revoke({"tenant": "acme", "ids": ["y"]}, reason="stale", caller=OPERATOR)
        clock.advance("1s")
        save_memory(w, "y", summary="y afresh", content="y fetched again")
        w.change_policy("contracts", 2, caller=OPERATOR)
        backend.copy_store(db, restored)
    with Warden(restored, clock=clock) as w:
        done = w.reapply(db, caller=OPERATOR)
        assert (done["revocations_reapplied"], done["policy_changes_reapplied"]) == (0, 0)
        assert w.get("y", caller=OPERATOR).usable and w.get("y", caller=OPERATOR).version == 2
        assert w.get("contract", caller=OPERATOR).reason == "policy_changed"
        assert sum(1 for _ in w.log.read(types=("revocation.issued",))) == 1


def test_an_invalidation_since_the_backup_is_reapplied(tmp_path: Path, backend: Backend) -> None:
    """A source that changed after the backup: its memory is invalidated
    again in the restored store, once, and what was drawn from it follows."""
    clock = FrozenClock(START)
    source = tmp_path / "rule.txt"
    source.write_text("the rule as it was", encoding="utf-8")
    db, restored = backend.db(tmp_path, "live.db"), backend.db(tmp_path, "restored.db")
    with Warden(db, clock=clock) as w:
        save_memory(w, "rule", content="the rule as it was", source_url=source.as_uri())
        parent = {"memory_id": "rule", "version": 1}
        save_memory(w, "drawn", derived_from=[parent])
        backend.copy_store(db, restored)
        source.write_text("the rule now", encoding="utf-8")
        assert w.verify("rule", caller=OPERATOR).outcome == "changed"
        assert w.get("rule", caller=OPERATOR).reason == "source_changed"
    with Warden(restored, clock=clock) as w:
        assert w.get("rule", caller=OPERATOR).usable
        done = w.reapply(db, caller=OPERATOR)
        assert done["invalidations_reapplied"] == 1 and done["revocations_reapplied"] == 0
        assert w.get("rule", caller=OPERATOR).reason == "source_changed"
        assert w.get("drawn", caller=OPERATOR).reason == "derived_from_unusable"
        assert w.reapply(db, caller=OPERATOR)["invalidations_reapplied"] == 0
        assert w.check_projections(caller=OPERATOR).ok


def test_an_anchor_past_the_restored_head_says_the_log_was_cut_back(tmp_path: Path, backend: Backend) -> None:
    """An auditor's anchor taken after the backup: the restored log ends
    before it, and the answer says so rather than calling the file damaged."""
    with Warden(backend.db(tmp_path, "older.db")) as older:
        save_memory(older, "a")
        with Warden(backend.db(tmp_path, "newer.db")) as newer:
            save_memory(newer, "a")
            save_memory(newer, "b")
            anchor = newer.audit_head(caller=OPERATOR)
        verdict = older.audit_verify(f"{anchor['seq']}:{anchor['hash']}", caller=OPERATOR)
    assert not verdict["ok"] and verdict["extends_anchor"] is False
    assert verdict["file_problems"] == []
    assert f"ends at seq 1, before the anchored seq {anchor['seq']}" in verdict["problem"]
