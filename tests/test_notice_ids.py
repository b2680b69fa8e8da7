"""A notice's id (a webhook's ``webhook-id``) is never another notice's,
for the life of the store (issue 58): a backup restored hands its seqs out
again, and a receiver that de-duplicates by id, as Standard Webhooks asks,
must not drop a new revocation as one it already applied."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memwarden.engine import OPERATOR, Warden, restore, sinks_from_table

from ._sinks import LOOPBACK, receiver, save_n
from .backends import Backend
from .sink_receiver import Receiver

__all__ = ["receiver"]  # the fixture, shared


def hook(rcv: Receiver) -> Any:
    return sinks_from_table(
        {
            "hook": {
                "kind": "webhook",
                "url": rcv.url,
                "probe_url": rcv.probe_url,
                "secret_env": rcv.env,  # type: ignore[attr-defined]
                "retry_base": 0.05,
                "retry_ceiling": 0.2,
                "timeout": 5,
            }
        }
    )


def revoke_and_deliver(w: Warden, memory_id: str) -> int:
    done = w.revoke({"ids": [memory_id], "tenant": "acme"}, reason=f"took {memory_id} out", caller=OPERATOR)
    (line,) = w.settle_sinks(done.revocation_id, caller=OPERATOR)
    assert line["status"] == "confirmed", line
    return done.seq


def test_no_notice_id_repeats_after_a_backup_is_restored(tmp_path: Path, backend: Backend, receiver: Receiver) -> None:
    live = backend.db(tmp_path, "live.db")
    with Warden(live, sinks=hook(receiver), fetchers=LOOPBACK) as w:
        ids = save_n(w, 3)
        receiver.hold("acme", ids)
        revoke_and_deliver(w, ids[0])
        if backend.name == "sqlite":
            w.backup(tmp_path / "backup.db", caller=OPERATOR)
            restored = live
        else:  # pg_dump, restored with pg_restore into a database of its own
            restored = backend.db(tmp_path, "restored.db")
            backend.copy_store(live, restored)
        second = revoke_and_deliver(w, ids[1])
    reissued = 0
    if backend.name == "sqlite":
        # the second revocation is issued again at the seq it had (no sink is told: it was)
        reissued = restore(live, tmp_path / "backup.db")["revocations_reapplied"]
        assert reissued == 1
    with Warden(restored, sinks=hook(receiver), fetchers=LOOPBACK) as w:
        third = revoke_and_deliver(w, ids[2])
    assert third == second + reissued  # the restored store handed the same seqs out again
    # the receiver applied each notice, the third as the new one it is
    assert receiver.duplicates == 0
    applied = [n["notice_id"] for n in receiver.applied]
    assert len(applied) == len(set(applied)) == 3
    assert [n["ids"] for n in receiver.applied] == [{"acme": [m]} for m in ids]
    assert receiver.held["acme"] == set()
