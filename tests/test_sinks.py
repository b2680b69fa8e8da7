"""Sinks: revocations reach the caches and indexes outside memwarden, and
the read-back proves they are gone there (issue 42).

A real Redis (127.0.0.1:6379, or ``MEMWARDEN_TEST_REDIS``) and webhook
receivers on loopback run by the tests (``sink_receiver``), verifying
every request with ``standardwebhooks``."""

from __future__ import annotations

import socket
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import standardwebhooks.webhooks as swh
from memwarden.engine import (
    OPERATOR,
    Fetchers,
    InvalidInput,
    Scheduler,
    SinkNotFound,
    SinkWorker,
    Warden,
    sinks_from_table,
)
from memwarden.projections import Outbox

from . import _sinks
from ._sinks import notice_of, open_warden, policy_file, save_args, save_n, sink_table, until_settled
from .conftest import Cli
from .sink_receiver import Receiver, new_secret

# Redis and the receivers (fixtures)
prefix = _sinks.prefix
receiver = _sinks.receiver
redis_server = _sinks.redis_server
sinked = _sinks.sinked


def test_a_revocation_of_1000_clears_redis_and_the_webhook_sink(
    sinked: Warden, receiver: Receiver, redis_server: Any, prefix: str
) -> None:
    ids = save_n(sinked, 1000)
    assert sinked.fill_cache("cache", tenant="acme", caller=OPERATOR)["put"] == 1000
    receiver.hold("acme", ids)
    assert len(list(redis_server.scan_iter(match=prefix + "*", count=1000))) == 1000
    # every cached entry expires no later than its memory's expires_at
    row = sinked.get(ids[0], caller=OPERATOR)
    expires = datetime.fromisoformat(row.expires_at.replace("Z", "+00:00")).timestamp()  # type: ignore[union-attr]
    assert redis_server.pexpiretime(prefix + "acme:" + ids[0]) <= expires * 1000 + 1

    result = sinked.revoke({"tenant": "acme"}, reason="contractor left", caller=OPERATOR)
    states = sinked.settle_sinks(result.revocation_id, caller=OPERATOR)
    assert {s["sink"]: s["status"] for s in states} == {"cache": "confirmed", "index": "confirmed"}
    assert all(s["covered"] == 1000 and s["latency_ms"] >= 0 for s in states)
    assert list(redis_server.scan_iter(match=prefix + "*")) == []
    assert receiver.held["acme"] == set() and receiver.refused == 0
    notice = receiver.applied[-1]
    assert notice["type"] == "revocation.issued" and notice["revocation_id"] == result.revocation_id
    assert notice["ids"] == {"acme": ids}


def test_a_sink_that_keeps_a_copy_is_reported_leaked_with_the_exact_ids(
    sinked: Warden, receiver: Receiver, redis_server: Any, prefix: str
) -> None:
    ids = save_n(sinked, 20)
    receiver.hold("acme", ids)
    receiver.keep = {ids[3], ids[7]}
    result = sinked.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
    SinkWorker(sinked).deliver(sinked.sinks[0])  # the cache's notice out; then a writer puts one back
    redis_server.set(prefix + "acme:" + ids[5], "stale copy")
    states = {s["sink"]: s for s in sinked.settle_sinks(result.revocation_id, caller=OPERATOR)}
    assert states["index"]["status"] == "leaked" and states["index"]["leaked_ids"] == [ids[3], ids[7]]
    assert states["cache"]["status"] == "leaked" and states["cache"]["leaked_ids"] == [ids[5]]
    # retried until it holds none: then confirmed
    receiver.keep = set()
    redis_server.delete(prefix + "acme:" + ids[5])
    states = until_settled(sinked, result.revocation_id)
    assert {k: v["status"] for k, v in states.items()} == {"cache": "confirmed", "index": "confirmed"}


def test_a_receiver_that_is_down_fails_or_gets_duplicates_ends_confirmed_in_order(
    sinked: Warden, receiver: Receiver
) -> None:
    ids = save_n(sinked, 30)
    receiver.hold("acme", ids)
    receiver.stop()  # down
    revocations = [
        sinked.revoke({"ids": ids[i : i + 10], "tenant": "acme"}, reason=f"r{i}", caller=OPERATOR).revocation_id
        for i in (0, 10)
    ]
    first = {s["sink"]: s for s in sinked.settle_sinks(revocations[0], caller=OPERATOR)}
    assert first["index"]["status"] == "unreachable" and first["index"]["detail"]
    assert first["cache"]["status"] == "confirmed"  # a failing sink fails alone
    receiver.start()
    receiver.fail_next = 2  # it applies, then answers 500: memwarden sends the same notice again
    receiver.slow = 0.05
    revocations.append(sinked.revoke({"ids": ids[20:], "tenant": "acme"}, reason="r20", caller=OPERATOR).revocation_id)
    for revocation_id in revocations:
        states = until_settled(sinked, revocation_id)
        assert states["index"]["status"] == "confirmed", states
    assert receiver.duplicates >= 2 and receiver.refused == 0
    seqs = [n["seq"] for n in receiver.applied]
    assert seqs == sorted(seqs) and len(seqs) == 3  # in log order, each applied once
    assert [n["revocation_id"] for n in receiver.applied] == revocations
    assert receiver.held["acme"] == set()


def test_a_forged_or_replayed_notice_is_refused_by_the_receivers_check(
    sinked: Warden, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_n(sinked, 3)
    result = sinked.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
    sinked.settle_sinks(result.revocation_id, caller=OPERATOR)
    path, body, headers = receiver.requests[-1]
    assert receiver.handle(path, body, headers)[0] == 200  # the genuine one verifies (a retry: not applied again)
    forged = body.replace(b'"acme"', b'"globex"')
    assert receiver.handle(path, forged, headers)[0] == 400
    other = Receiver(new_secret())  # signed with another secret
    try:
        assert other.handle(path, body, headers)[0] == 400
    finally:
        other.stop()
    moved = {**headers, "webhook-timestamp": str(int(time.time()) + 60)}
    assert receiver.handle(path, body, moved)[0] == 400  # the timestamp is signed too

    class Later(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
            return datetime.now(tz) + timedelta(minutes=10)

    monkeypatch.setattr(swh, "datetime", Later)
    assert receiver.handle(path, body, headers)[0] == 400  # replayed ten minutes later: too old
    assert receiver.refused == 3


def test_the_notice_commits_with_the_revocation_or_neither_does(
    sinked: Warden, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = save_n(sinked, 5)

    def broken(self: Outbox, *args: Any) -> None:
        raise OSError("outbox write failed")

    monkeypatch.setattr(Outbox, "add", broken)
    with pytest.raises(OSError, match="outbox write failed"):
        sinked.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
    assert sinked.revocations(caller=OPERATOR) == []
    assert all(sinked.get(m, caller=OPERATOR).usable for m in ids)
    assert not any(e.type == "revocation.issued" for e in sinked.log.read())
    monkeypatch.undo()
    result = sinked.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
    notices = sinked.sink_notices(caller=OPERATOR)
    assert {n["sink"] for n in notices} == {"cache", "index"}
    assert all(n["seq"] == result.seq and n["state"] == "pending" for n in notices)


def test_notices_of_a_sink_no_one_named_is_not_found_not_an_empty_list(sinked: Warden) -> None:
    assert sinked.sink_notices(sink="cache", caller=OPERATOR) == []  # named, nothing yet: empty
    with pytest.raises(SinkNotFound, match="nosuch"):
        sinked.sink_notices(sink="nosuch", caller=OPERATOR)
    with pytest.raises(InvalidInput, match="limit"):
        sinked.sink_notices(limit=True, caller=OPERATOR)


def test_erasure_invalidation_and_policy_change_are_noticed_too(sinked: Warden, receiver: Receiver) -> None:
    save_n(sinked, 4)
    sinked.save(
        memory_id="digest",
        kind="external_fact",
        summary="drawn from m00000",
        content="digest",
        source_url="https://example.org/digest",
        scope={"tenant": "acme", "project": "p1"},
        derived_from=[{"memory_id": "m00000", "version": 1}],
        caller=OPERATOR,
    )
    sinked.erase(memory_id="m00001", reason="asked", caller=OPERATOR)
    result = sinked.revoke({"ids": ["m00000"], "tenant": "acme"}, reason="r", caller=OPERATOR)
    sinked.change_policy("default", "v2", caller=OPERATOR)
    SinkWorker(sinked).deliver(sinked.sinks[1])
    kinds = [(n["type"], n["ids"]) for n in receiver.applied]
    assert kinds[0] == ("memory.erased", {"acme": ["m00001"]})
    # the revocation names what the cascade invalidated below it, which is not announced again
    assert kinds[1] == ("revocation.issued", {"acme": ["digest", "m00000"]})
    assert kinds[2][0] == "policy.version_changed"
    assert len(kinds) == 3
    states = sinked.settle_sinks(result.revocation_id, caller=OPERATOR)
    assert {s["sink"]: s["covered"] for s in states} == {"cache": 2, "index": 2}


def test_a_dead_letter_lets_the_line_go_on_and_is_redelivered(db_path: Path, prefix: str, receiver: Receiver) -> None:
    w = open_warden(db_path, sink_table(prefix, receiver, max_attempts=2))
    try:
        ids = save_n(w, 4)
        receiver.fail_next = 2
        first = w.revoke({"ids": ids[:2], "tenant": "acme"}, reason="a", caller=OPERATOR)
        second = w.revoke({"ids": ids[2:], "tenant": "acme"}, reason="b", caller=OPERATOR)
        until_settled(w, second.revocation_id)
        dead = w.sink_notices(sink="index", state="dead", caller=OPERATOR)
        assert [n["notice_id"] for n in dead] == [notice_of(w, first.seq)]
        assert dead[0]["attempts"] == 2 and "HTTP 500" in dead[0]["last_error"]
        assert {s["sink"]: s["status"] for s in w.sink_readbacks(first.revocation_id, caller=OPERATOR)} == {
            "cache": "confirmed",
            "index": "unreachable",
        }
        assert w.redeliver(dead[0]["notice_id"], sink="index", caller=OPERATOR)["requeued"] == 1
        assert until_settled(w, first.revocation_id)["index"]["status"] == "confirmed"
        with pytest.raises(SinkNotFound):
            w.redeliver("ntc_000000000999", caller=OPERATOR)
        with pytest.raises(InvalidInput) as refused:
            w.redeliver("nope", caller=OPERATOR)
        assert refused.value.field == "notice_id"
    finally:
        w.close()


def test_a_failing_sink_fails_alone_in_the_scheduler(db_path: Path, prefix: str, receiver: Receiver) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    table = {**sink_table(prefix, receiver), "broken": {"kind": "redis", "url": f"redis://127.0.0.1:{closed}/0"}}
    w = open_warden(db_path, table)
    try:
        save_n(w, 3)
        result = w.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
        jobs = Scheduler(w)
        summary = jobs.run_once()
        jobs.stop()
        assert summary["readbacks"][0]["status"] == "confirmed"  # memwarden's own, all the same
        states = {s["sink"]: s["status"] for s in w.sink_readbacks(result.revocation_id, caller=OPERATOR)}
        assert states == {"broken": "unreachable", "cache": "confirmed", "index": "confirmed"}
        assert summary["sinks"]["broken"] == {"delivered": 0, "failed": 1, "dead": 0, "read_back": 1}
    finally:
        w.close()


def test_the_address_rules_hold_for_webhook_sinks(db_path: Path, prefix: str, receiver: Receiver) -> None:
    w = open_warden(db_path, sink_table(prefix, receiver), fetchers=Fetchers())
    try:
        save_n(w, 2)
        result = w.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
        states = {s["sink"]: s for s in w.settle_sinks(result.revocation_id, caller=OPERATOR)}
        assert states["index"]["status"] == "unreachable"
        assert "refused address" in states["index"]["detail"] and receiver.applied == []
        assert w.test_sink("index", caller=OPERATOR)["ok"] is False
    finally:
        w.close()


def test_tenants_and_event_types_choose_what_a_sink_receives(db_path: Path, prefix: str, receiver: Receiver) -> None:
    table = sink_table(prefix, receiver, tenants=["globex"], events=["revocation.issued"])
    w = open_warden(db_path, table)
    try:
        save_n(w, 2, tenant="acme")
        save_n(w, 2, tenant="globex", start=10)
        w.erase(memory_id="m00010", tenant="globex", reason="asked", caller=OPERATOR)
        w.revoke({"project": "p1"}, reason="r", caller=OPERATOR)
        SinkWorker(w).deliver(w.sinks[1])
        assert [(n["type"], n["ids"]) for n in receiver.applied] == [
            ("revocation.issued", {"globex": ["m00010", "m00011"]})
        ]
    finally:
        w.close()


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({"x": {"kind": "kafka", "url": "kafka://h"}}, "sinks.x.kind"),
        ({"x": {"kind": "redis"}}, "sinks.x.url"),
        ({"x": {"kind": "redis", "url": "http://h"}}, "sinks.x.url"),
        ({"x": {"kind": "webhook", "url": "http://h", "probe_url": "http://h/p"}}, "sinks.x.secret_env"),
        ({"x": {"kind": "redis", "url": "redis://h", "max_attempts": 0}}, "sinks.x.max_attempts"),
        ({"x": {"kind": "redis", "url": "redis://h", "events": ["memory.saved"]}}, "sinks.x.events"),
        ({"x": {"kind": "redis", "url": "redis://h", "secret": "s"}}, "sinks.x.secret"),
        ({"x y": {"kind": "redis", "url": "redis://h"}}, "sinks.x y"),
    ],
)
def test_a_bad_sink_table_is_refused_naming_its_field(table: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        sinks_from_table(table)
    assert refused.value.field == field


def test_the_secret_never_enters_the_log_or_the_outbox(sinked: Warden, receiver: Receiver) -> None:
    save_n(sinked, 2)
    sinked.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
    secret = receiver.secret.removeprefix("whsec_")
    assert all(secret not in str(e.payload) for e in sinked.log.read())
    with sinked.reading() as view:
        assert all(secret not in str(n) for n in view.outbox().notices())
    assert all(secret not in str(s) for s in sinked.sinks_status(caller=OPERATOR))


def test_revoke_wait_reports_each_sinks_state(
    run_cli: Cli, db_path: Path, tmp_path: Path, prefix: str, receiver: Receiver
) -> None:
    policy = str(policy_file(tmp_path, prefix, receiver))
    run_cli.json("--policy-file", policy, "save", *save_args("a"))
    data = run_cli.json("--policy-file", policy, "revoke", "--tenant", "acme", "--reason", "r", "--wait")
    assert data["readback"]["readback_status"] == "confirmed"
    assert {s["sink"]: s["status"] for s in data["sinks"]} == {"cache": "confirmed", "index": "confirmed"}
    text = run_cli("--policy-file", policy, "revoke", "--tenant", "acme", "--reason", "again", "--wait")
    assert text.exit_code == 0 and "sink cache: confirmed" in text.stdout
