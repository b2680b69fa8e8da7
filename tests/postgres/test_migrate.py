"""Moving over: SQLite -> PostgreSQL -> SQLite keeps every seq and hash,
the texts, the keys and the verdicts."""

from __future__ import annotations

from pathlib import Path

from memwarden.engine import OPERATOR, Warden
from memwarden.engine._keys import KeyStore
from memwarden.events import FrozenClock

from .._sinks import LOOPBACK, receiver, save_n
from ..conftest import START, Cli, save_memory
from ..sink_receiver import Receiver
from ..test_notice_ids import hook, revoke_and_deliver

__all__ = ["receiver"]  # the fixture, shared

KOREAN = "서울 본사의 3분기 매출은 12% 증가했다"


def _fill(w: Warden) -> None:
    for i in range(40):
        save_memory(w, f"m{i}", tenant=f"t{i % 3}", content=f"{KOREAN} #{i}")
    save_memory(w, "child", tenant="t0", derived_from=["m0", "m3"], kind="derived")
    w.revoke({"tenant": "t1"}, reason="leak", by="sec", caller=OPERATOR)
    w.erase(memory_id="m6", tenant="t0", reason="gdpr", caller=OPERATOR)
    w.set_policy("default", 2, caller=OPERATOR)


def test_a_round_trip_keeps_every_hash_text_key_and_verdict(tmp_path: Path, pg_url: str) -> None:
    clock = FrozenClock(START)
    source = Warden(tmp_path / "source.db", clock=clock)
    _fill(source)
    keys = KeyStore(source)
    secret, _ = keys.create("agent", tenants=["t0"], caller=OPERATOR)
    _, revoked = keys.create("auditor", caller=OPERATOR)
    keys.revoke(revoked.key_id, caller=OPERATOR)
    agent = source.acting_as(KeyStore(source).authenticate(secret))
    saved = agent.save(
        memory_id="tk",
        kind="external_fact",
        summary="s",
        content="c",
        source_url="https://e.example/tk",
        scope={"tenant": "t0"},
        ttl="6h",
    )
    token = saved.seq  # a client's consistency token, issued before the move
    kept = source.audit_head(caller=OPERATOR)
    before = {(v.scope["tenant"], v.memory_id): (v.usable, v.reason, v.content) for v in _every(source)}

    moved = source.migrate(pg_url, caller=OPERATOR)
    assert moved["same_head"] and moved["projections_ok"] and moved["keys"] == 2
    assert moved["head"] == f"{kept['seq']}:{kept['hash']}"
    on_pg = Warden(pg_url, clock=clock)
    assert on_pg.audit_verify(against=f"{kept['seq']}:{kept['hash']}", caller=OPERATOR)["ok"]
    assert on_pg.check_projections(caller=OPERATOR).ok
    assert {(v.scope["tenant"], v.memory_id): (v.usable, v.reason, v.content) for v in _every(on_pg)} == before
    assert KeyStore(on_pg).authenticate(secret).tenants == ("t0",)  # the same key works there
    # and the token still reads: the store's secret moved with it
    assert on_pg.acting_as(KeyStore(on_pg).authenticate(secret)).get("tk", min_seq=token).usable
    # the text index is built from the copied texts
    assert on_pg.query(tenant="t0", text="서울", include_unusable=True, caller=OPERATOR)

    back = tmp_path / "back.db"
    assert on_pg.migrate(str(back), caller=OPERATOR)["same_head"]
    again = Warden(back, clock=clock)
    assert [e.hash for e in again.log.read()] == [e.hash for e in source.log.read()]
    assert again.check_projections(caller=OPERATOR).ok
    for w in (source, on_pg, again):
        w.close()


def test_the_target_must_be_empty_and_the_cli_says_so(tmp_path: Path, pg_url: str) -> None:
    clock = FrozenClock(START)
    source = Warden(tmp_path / "a.db", clock=clock)
    save_memory(source, "m1")
    source.close()
    cli = Cli(tmp_path / "a.db")
    first = cli.json("migrate", "--to", pg_url)
    assert first["events"] == 1 and first["projections_ok"]
    refused = cli("migrate", "--to", pg_url)
    assert refused.exit_code == 2 and "already holds 1 events" in refused.stderr, refused.stderr
    bad = cli("migrate", "--to", "mysql://x/y")
    assert bad.exit_code == 2 and "to" in bad.stderr


def _every(w: Warden) -> list:
    views = []
    for tenant in ("t0", "t1", "t2"):
        views += w.query(tenant=tenant, include_unusable=True, limit=1000, caller=OPERATOR)
    return views


def test_a_backup_moved_to_postgresql_hands_out_notice_ids_never_used(
    tmp_path: Path, pg_url: str, receiver: Receiver
) -> None:
    """A backup migrated to PostgreSQL goes on from the backup's seqs, which
    the SQLite store it was taken from had handed out since: the notices
    written there are new ones to a receiver that keeps the ids it saw."""
    live, backup = tmp_path / "live.db", tmp_path / "backup.db"
    with Warden(live, sinks=hook(receiver), fetchers=LOOPBACK) as w:
        ids = save_n(w, 2)
        receiver.hold("acme", ids)
        w.backup(backup, caller=OPERATOR)
        moved_at = revoke_and_deliver(w, ids[0])
    with Warden(backup) as w:
        assert w.migrate(pg_url, caller=OPERATOR)["same_head"]
    with Warden(pg_url, sinks=hook(receiver), fetchers=LOOPBACK) as w:
        assert revoke_and_deliver(w, ids[1]) == moved_at  # the same seq, handed out again
    assert receiver.duplicates == 0 and len({n["notice_id"] for n in receiver.applied}) == 2
    assert receiver.held["acme"] == set()
