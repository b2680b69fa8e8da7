"""A sink's read-back outcomes are events in the hash-chained log
(``sink.readback_recorded``, issue 42): confirmed, a leak when found, and
the state a sink was left in at its read-back deadline; an auditor's
replay (export, import, migrate, audit verify) carries them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from memwarden.engine import OPERATOR, SinkWorker, Warden, read_back, readback_records, sinks_from_table
from memwarden.events import FrozenClock, SinkReadbackRecorded
from pydantic import ValidationError

from ._sinks import LOOPBACK, notice_of, prefix, receiver, redis_server, save_n, sink_table
from .backends import Backend
from .conftest import Cli
from .sink_receiver import Receiver

__all__ = ["prefix", "receiver", "redis_server"]  # the fixtures, shared

TYPE = "sink.readback_recorded"


@pytest.fixture
def now_clock() -> FrozenClock:
    # near the real time: a receiver refuses a signature more than five minutes off
    return FrozenClock(datetime.now(UTC))


def open_clocked(db: Any, table: dict[str, Any], clock: FrozenClock) -> Warden:
    return Warden(db, sinks=sinks_from_table(table), fetchers=LOOPBACK, clock=clock)


@pytest.fixture
def clocked(db_path: Path, prefix: str, receiver: Receiver, now_clock: FrozenClock) -> Iterator[Warden]:
    table = sink_table(prefix, receiver, readback_deadline="2m")
    table["cache"]["readback_deadline"] = "2m"
    w = open_clocked(db_path, table, now_clock)
    yield w
    w.close()


def outcomes(w: Warden) -> list[dict[str, Any]]:
    return [{"seq": e.seq, "stream": e.stream, **e.payload} for e in w.log.read(types=(TYPE,))]


def run_all(w: Warden, times: int = 1) -> None:
    worker = SinkWorker(w)
    try:
        for _ in range(times):
            for spec in w.sinks:
                worker.run_sink(spec)
    finally:
        worker.close()


def test_each_sinks_confirmed_read_back_is_recorded_once_in_the_log(
    clocked: Warden, receiver: Receiver, backend: Backend
) -> None:
    ids = save_n(clocked, 5)
    receiver.hold("acme", ids)
    clocked.fill_cache("cache", tenant="acme", caller=OPERATOR)
    result = clocked.revoke({"tenant": "acme"}, reason="left", caller=OPERATOR)
    states = {s["sink"]: s for s in clocked.settle_sinks(result.revocation_id, caller=OPERATOR)}
    assert {k: v["status"] for k, v in states.items()} == {"cache": "confirmed", "index": "confirmed"}
    found = outcomes(clocked)
    assert sorted((o["sink"], o["sink_kind"], o["outcome"], o["final"]) for o in found) == [
        ("cache", "redis", "confirmed", True),
        ("index", "webhook", "confirmed", True),
    ]
    for o in found:
        assert o["stream"] == result.revocation_id and o["revocation_id"] == result.revocation_id
        assert o["covered"] == 5 and o["latency_ms"] >= 0 and o["leaked_ids"] == []
        assert o["notice_id"] == notice_of(clocked, result.seq)
        assert states[o["sink"]]["final_seq"] == o["seq"]  # the side table points at its event
    # read back again, and past the deadline: nothing more is written
    clocked.settle_sinks(result.revocation_id, caller=OPERATOR)
    clocked.clock.advance("3m")  # type: ignore[attr-defined]
    run_all(clocked, 2)
    assert outcomes(clocked) == found
    history = readback_records(clocked, result.revocation_id, caller=OPERATOR)
    assert [r["seq"] for r in history["sink_records"]] == [o["seq"] for o in found]
    assert clocked.audit_verify(caller=OPERATOR)["ok"]


def test_a_leak_is_recorded_when_found_and_as_final_at_the_deadline(
    clocked: Warden, receiver: Receiver, backend: Backend
) -> None:
    ids = save_n(clocked, 10)
    receiver.hold("acme", ids)
    receiver.keep = {ids[2], ids[4]}
    result = clocked.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
    run_all(clocked)
    found = [o for o in outcomes(clocked) if o["sink"] == "index"]
    assert [(o["outcome"], o["final"], o["leaked_ids"]) for o in found] == [("leaked", False, [ids[2], ids[4]])]
    # the same leak read back again is not written again; a change of what leaks is
    clocked.clock.advance("1s")  # type: ignore[attr-defined]
    run_all(clocked)
    assert len([o for o in outcomes(clocked) if o["sink"] == "index"]) == 1
    receiver.keep = {ids[4]}
    clocked.clock.advance("1s")  # type: ignore[attr-defined]
    run_all(clocked)
    found = [o for o in outcomes(clocked) if o["sink"] == "index"]
    assert [(o["outcome"], o["final"], o["leaked_ids"]) for o in found][-1] == ("leaked", False, [ids[4]])
    assert len(found) == 2
    # the deadline passes with the copy still there: the leak is final, with exactly its ids
    clocked.clock.advance("3m")  # type: ignore[attr-defined]
    run_all(clocked)
    final = [o for o in outcomes(clocked) if o["sink"] == "index" and o["final"]]
    assert [(o["outcome"], o["leaked_ids"]) for o in final] == [("leaked", [ids[4]])]
    line = {s["sink"]: s for s in clocked.sink_readbacks(result.revocation_id, caller=OPERATOR)}
    assert line["index"]["final_seq"] == final[0]["seq"] and line["index"]["status"] == "leaked"
    run_all(clocked)  # and only once
    assert len([o for o in outcomes(clocked) if o["final"]]) == 2  # the cache's confirmed, the index's leak


def test_a_sink_still_down_at_the_deadline_is_recorded_unreachable(
    clocked: Warden, receiver: Receiver, backend: Backend
) -> None:
    save_n(clocked, 3)
    receiver.stop()
    result = clocked.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
    run_all(clocked)
    assert [o["sink"] for o in outcomes(clocked)] == ["cache"]  # unreachable is not final before the deadline
    clocked.clock.advance("3m")  # type: ignore[attr-defined]
    run_all(clocked)
    index = [o for o in outcomes(clocked) if o["sink"] == "index"]
    assert len(index) == 1 and index[0]["outcome"] == "unreachable" and index[0]["final"]
    assert "ConnectError" in index[0]["detail"] or "not delivered" in index[0]["detail"]
    assert index[0]["revocation_id"] == result.revocation_id


def test_the_outcomes_travel_with_export_import_and_migrate(
    clocked: Warden, receiver: Receiver, tmp_path: Path, backend: Backend
) -> None:
    ids = save_n(clocked, 4)
    receiver.hold("acme", ids)
    receiver.keep = {ids[1]}
    clocked.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
    run_all(clocked)
    receiver.keep = set()
    clocked.clock.advance("1s")  # type: ignore[attr-defined]
    run_all(clocked)
    mine = outcomes(clocked)
    assert [(o["sink"], o["outcome"]) for o in mine] == [
        ("cache", "confirmed"),
        ("index", "leaked"),
        ("index", "confirmed"),
    ]
    kept = clocked.audit_head(caller=OPERATOR)
    head = f"{kept['seq']}:{kept['hash']}"
    path = tmp_path / "log.jsonl"
    clocked.export(path, caller=OPERATOR)
    imported = Warden(backend.db(tmp_path, "imported.db"))
    try:
        imported.import_log(path, caller=OPERATOR)
        assert outcomes(imported) == mine
        assert imported.audit_verify(against=head, caller=OPERATOR)["extends_anchor"] is True
    finally:
        imported.close()
    target = backend.db(tmp_path, "migrated.db")
    moved = clocked.migrate(str(target), caller=OPERATOR)
    assert moved["same_head"] and moved["projections_ok"]
    migrated = Warden(target)
    try:
        assert outcomes(migrated) == mine
        assert migrated.audit_verify(caller=OPERATOR)["ok"]
    finally:
        migrated.close()


def test_the_readback_command_shows_each_sinks_recorded_outcome(
    clocked: Warden, receiver: Receiver, db_path: Path
) -> None:
    save_n(clocked, 2)
    result = clocked.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
    clocked.settle_sinks(result.revocation_id, caller=OPERATOR)
    read_back(clocked, result.revocation_id, caller=OPERATOR)
    out = Cli(db_path)("readback", result.revocation_id)
    assert out.exit_code == 0, out.output
    assert "sink cache: confirmed (final)" in out.stdout and "sink index: confirmed (final)" in out.stdout


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"outcome": "leaked", "final": False}, "leaked_ids"),
        ({"outcome": "confirmed", "final": True, "leaked_ids": ["a"]}, "leaked_ids"),
        ({"outcome": "confirmed", "final": False}, "final"),
        ({"outcome": "unreachable", "final": True, "latency_ms": 1.0}, "latency_ms"),
        ({"outcome": "gone", "final": True}, "outcome"),
    ],
)
def test_an_outcome_that_contradicts_itself_is_refused(fields: dict[str, Any], field: str) -> None:
    base = {"revocation_id": "rev_1", "sink": "s", "sink_kind": "redis", "notice_id": "ntc_1", "covered": 1}
    with pytest.raises(ValidationError, match=field):
        SinkReadbackRecorded(**base, attempts=1, **fields)


def test_two_nodes_closing_one_deadline_at_once_record_one_final_outcome(
    db_path: Path, prefix: str, receiver: Receiver, now_clock: FrozenClock
) -> None:
    import threading

    table = sink_table(prefix, receiver, readback_deadline="2m")
    table["cache"]["readback_deadline"] = "2m"
    nodes = [open_clocked(db_path, table, now_clock) for _ in range(2)]
    try:
        save_n(nodes[0], 3)
        receiver.stop()  # the index never answers: its deadline closes it as unreachable
        result = nodes[0].revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
        now_clock.advance("3m")
        workers = [SinkWorker(n) for n in nodes]
        start = threading.Barrier(2)

        def close(worker: SinkWorker) -> None:
            start.wait()
            for spec in worker.core.sinks:
                worker.close_deadlines(spec)

        threads = [threading.Thread(target=close, args=(wk,)) for wk in workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        finals = [o for o in outcomes(nodes[1]) if o["final"]]
        assert sorted((o["sink"], o["outcome"]) for o in finals) == [("cache", "unreachable"), ("index", "unreachable")]
        lines = {s["sink"]: s["final_seq"] for s in nodes[1].sink_readbacks(result.revocation_id, caller=OPERATOR)}
        assert lines == {o["sink"]: o["seq"] for o in finals}
        for wk in workers:
            wk.close()
    finally:
        for n in nodes:
            n.close()
