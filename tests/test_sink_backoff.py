"""A sink's delivery retries use the scheduler's shared per-host backoff
(``SharedBackoff``, kept in the store): a host that fails a fetch holds its
sink back, a sink that fails holds back the fetches of its host, on every
node; the dead letter after ``max_attempts`` still comes, each wait the
host's."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from memwarden.engine import OPERATOR, Scheduler, SharedBackoff, SinkWorker, Warden, sinks_from_table
from memwarden.events import FrozenClock

from ._sinks import LOOPBACK, notice_of, receiver, save_n
from .sink_receiver import Receiver

__all__ = ["receiver"]  # the fixture, shared


def webhook(rcv: Receiver, **extra: Any) -> dict[str, Any]:
    return {
        "index": {
            "kind": "webhook",
            "url": rcv.url,
            "probe_url": rcv.probe_url,
            "secret_env": rcv.env,  # type: ignore[attr-defined]
            "retry_base": 5,
            "retry_ceiling": 8,
            "timeout": 5,
            **extra,
        }
    }


@pytest.fixture
def clock() -> FrozenClock:
    # near the real time: the receiver refuses a signature more than five minutes off
    return FrozenClock(datetime.now(UTC))


def node(db: Any, rcv: Receiver, clock: FrozenClock, **extra: Any) -> Warden:
    return Warden(db, sinks=sinks_from_table(webhook(rcv, **extra)), fetchers=LOOPBACK, clock=clock)


@pytest.fixture
def w(db_path: Path, receiver: Receiver, clock: FrozenClock) -> Iterator[Warden]:
    warden = node(db_path, receiver, clock)
    yield warden
    warden.close()


def host(rcv: Receiver) -> str:
    return f"127.0.0.1:{rcv.port}"


def attempts(w: Warden) -> list[int]:
    return [n["attempts"] for n in w.sink_notices(sink="index", caller=OPERATOR)]


def test_a_host_that_failed_a_fetch_holds_its_sink_back(w: Warden, receiver: Receiver, clock: FrozenClock) -> None:
    save_n(w, 3)
    jobs = Scheduler(w)
    try:
        now = clock.now().timestamp()
        # what the scheduler records when a source on that host fails a re-check
        until = jobs.backoff.record(host(receiver), False, now)
        assert until == now + w.fetchers.backoff
        result = w.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
        done = jobs.sink_worker.deliver(w.sinks[0])
        assert done["delivered"] == 0 and done["waiting_until"] == until
        assert receiver.applied == [] and attempts(w) == [0]  # not even tried: the host waits
        states = {s["sink"]: s["status"] for s in w.settle_sinks(result.revocation_id, caller=OPERATOR)}
        assert states == {"index": "pending"}
        clock.advance(timedelta(seconds=w.fetchers.backoff + 1))
        states = {s["sink"]: s["status"] for s in w.settle_sinks(result.revocation_id, caller=OPERATOR)}
        assert states == {"index": "confirmed"} and len(receiver.applied) == 1
        # the sink's success cleared the host for the fetcher too
        assert jobs.backoff.ready(host(receiver), clock.now().timestamp())
        with w.reading() as view:
            assert view.side().backoff(host(receiver)) is None
    finally:
        jobs.stop()


def test_a_sink_that_fails_holds_back_its_hosts_fetches_on_every_node(
    w: Warden, db_path: Path, receiver: Receiver, clock: FrozenClock
) -> None:
    save_n(w, 2)
    receiver.stop()
    w.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
    done = SinkWorker(w).deliver(w.sinks[0])
    assert done["failed"] == 1
    now = clock.now().timestamp()
    other = node(db_path, receiver, clock)  # another node on the same store
    try:
        fetches = Scheduler(other).backoff
        assert isinstance(fetches, SharedBackoff)
        assert not fetches.ready(host(receiver), now)
        assert fetches.waits_until(host(receiver)) == now + 5  # the sink's own retry_base
        # and that node's sink worker waits for it too: no second attempt yet
        assert SinkWorker(other).deliver(other.sinks[0])["waiting_until"] == now + 5
        assert attempts(w) == [1]
        receiver.start()
        clock.advance("6s")
        assert SinkWorker(other).deliver(other.sinks[0])["delivered"] == 1
        assert fetches.ready(host(receiver), clock.now().timestamp())
    finally:
        other.close()


def test_the_dead_letter_still_comes_after_the_bound_each_wait_the_hosts(
    db_path: Path, receiver: Receiver, clock: FrozenClock
) -> None:
    w = node(db_path, receiver, clock, max_attempts=3)
    try:
        ids = save_n(w, 4)
        receiver.fail_next = 3  # three answers of 500
        first = w.revoke({"ids": ids[:2], "tenant": "acme"}, reason="a", caller=OPERATOR)
        second = w.revoke({"ids": ids[2:], "tenant": "acme"}, reason="b", caller=OPERATOR)
        worker = SinkWorker(w)
        waits = []
        for _ in range(3):
            now = clock.now().timestamp()
            done = worker.deliver(w.sinks[0])
            assert done["delivered"] == 0 and done["failed"] + done["dead"] == 1
            until = worker.backoff.waits_until(host(receiver))
            waits.append(until - now)
            assert not worker.deliver(w.sinks[0]).get("delivered")  # waiting: nothing tried meanwhile
            clock.advance(timedelta(seconds=until - now))
        assert waits == pytest.approx([5, 8, 8])  # doubling from retry_base, up to retry_ceiling, in the shared state
        dead = w.sink_notices(sink="index", state="dead", caller=OPERATOR)
        assert [n["notice_id"] for n in dead] == [notice_of(w, first.seq)] and dead[0]["attempts"] == 3
        # the line goes on behind it once the host may be tried, and the host is cleared
        assert worker.deliver(w.sinks[0])["delivered"] == 1
        assert [n["revocation_id"] for n in receiver.applied][-1] == second.revocation_id
        assert worker.backoff.ready(host(receiver), clock.now().timestamp())
        assert w.redeliver(dead[0]["notice_id"], caller=OPERATOR)["requeued"] == 1
        assert worker.deliver(w.sinks[0])["delivered"] == 1
        worker.close()
    finally:
        w.close()
