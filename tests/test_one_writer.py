"""One writer per event id (issue 58): an event two paths can write (a
revocation's read-back, a sink's read-back outcome) is written once, and
the second writer reads the first's result. A committed revocation's
``"wait": true`` answers its result, never 4xx, however the request races
the scheduler's read-back and sink jobs."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from memwarden.engine import OPERATOR, InvalidInput, KeyStore, Scheduler, SinkWorker, Warden, sinks_from_table
from memwarden.engine.faces.http import create_app
from memwarden.engine.sinks._records import deadline_event, outcome_event, record

from ._sizes import larger
from .backends import Backend
from .conftest import START

# rounds of REQUESTS at once, each racing the other requests and both
# jobs: 1,000 races in all across the two backends under --runslow, more
# where one costs less; by default half: still 500 races of a commit
# against both jobs, each of the three orders many times
ROUNDS = {"sqlite": larger(60, 120), "postgres": larger(40, 80)}
REQUESTS = 5


@pytest.fixture
def served(db_path: Path, backend: Backend) -> Iterator[tuple[TestClient, Warden, str]]:
    # the engine's own vector index as the sink: in process, so the race is
    # between memwarden's writers alone; NORMAL so that 500 rounds are quick
    w = Warden(db_path, sinks=sinks_from_table({"vectors": {"kind": "index"}}), synchronous="NORMAL")
    key = KeyStore(w).create("security", caller=OPERATOR)[0]
    with TestClient(create_app(w, scheduler=False, mcp=False)) as client:
        yield client, w, key
    w.close()


def _raced(requests: list[Callable[[], Any]], jobs: list[Callable[[], Any]], committed: threading.Event) -> list[Any]:
    """Each of ``requests`` and ``jobs`` on a thread of its own, the jobs
    released the moment a request's revocation commits (as the scheduler's
    listener releases its own); what each returned or raised."""
    runs = [*requests, *jobs]
    out: list[Any] = [None] * len(runs)

    def go(i: int) -> None:
        if i >= len(requests):
            committed.wait(10)
        try:
            out[i] = runs[i]()
        except BaseException as exc:  # whatever a writer raised, the test reports
            out[i] = exc

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(runs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_wait_true_races_the_scheduler_and_the_sink_job_and_answers_the_commit(
    served: tuple[TestClient, Warden, str], backend: Backend
) -> None:
    client, w, key = served
    rounds = ROUNDS[backend.name]
    jobs = Scheduler(w)
    committed = threading.Event()
    w.revocation_listeners.append(lambda _revocation_id: committed.set())
    ids = [f"m{i}" for i in range(rounds * REQUESTS)]
    w.save_many(
        [
            dict(
                memory_id=m,
                kind="external_fact",
                summary=f"{m} noted",  # its own first word: the read-back searches for it
                content=f"text {m}",
                source_url=f"https://example.org/{m}",
                scope={"tenant": "acme", "project": "p1"},
            )
            for m in ids
        ],
        caller=OPERATOR,
    )

    def request(memory_id: str) -> Callable[[], Any]:
        body = {"selector": {"ids": [memory_id], "tenant": "acme"}, "reason": memory_id, "wait": True}
        return lambda: client.post("/v1/revocations", json=body, headers={"x-api-key": key})

    answers: list[dict[str, Any]] = []
    problems: list[str] = []
    for i in range(rounds):
        committed.clear()
        mine = ids[i * REQUESTS : (i + 1) * REQUESTS]
        *requests, readback, sinks = _raced(
            [request(m) for m in mine],
            [lambda: jobs.run_job("readback"), lambda: jobs.run_job("sinks")],
            committed,
        )
        for name, got in (
            *((f"request {m}", r) for m, r in zip(mine, requests, strict=True)),
            ("readback job", readback),
            ("sink job", sinks),
        ):
            if isinstance(got, BaseException):
                problems.append(f"round {i}: the {name} raised {got!r}")
        # a job that failed says so in ``failures`` until it next succeeds: asked every round
        problems += [f"round {i}: {job}: {reason}" for job, reason in jobs.failures.items()]
        for got in requests:
            if isinstance(got, BaseException):
                continue
            if got.status_code != 201:
                problems.append(f"round {i}: a committed revocation answered {got.status_code}: {got.text}")
            else:
                answers.append(got.json())
    jobs.sink_worker.close()
    assert not problems, problems[:5]
    assert len(answers) == rounds * REQUESTS
    for answer in answers:
        assert "readback_error" not in answer["readback"] and "sinks_error" not in answer, answer
        assert answer["readback"]["readback_status"] == "confirmed", answer
        assert [s["sink"] for s in answer["sinks"]] == ["vectors"]
    # and each revocation's read-back, and each sink's final outcome, is in the log exactly once
    confirmed = Counter(e.stream for e in w.log.read(types=("readback.confirmed",)))
    finals = Counter(e.stream for e in w.log.read(types=("sink.readback_recorded",)) if e.payload["final"])
    revoked = {a["revocation_id"] for a in answers}
    assert set(confirmed) == revoked and set(confirmed.values()) == {1}
    assert set(finals) <= revoked and set(finals.values()) == {1}
    # every sink's line ends settled: the row points at the one final event the log holds
    jobs = Scheduler(w)
    jobs.run_job("sinks")
    jobs.sink_worker.close()
    finals = Counter(e.stream for e in w.log.read(types=("sink.readback_recorded",)) if e.payload["final"])
    assert set(finals) == revoked and set(finals.values()) == {1}
    final_seqs = {e.stream: e.seq for e in w.log.read(types=("sink.readback_recorded",))}
    for revocation_id in revoked:
        (line,) = w.sink_readbacks(revocation_id, caller=OPERATOR)
        assert line["status"] == "confirmed" and line["final_seq"] == final_seqs[revocation_id]
    assert w.audit_verify(caller=OPERATOR)["ok"]


def test_a_second_final_outcome_reads_the_first_and_leaves_the_line_as_it_is(db_path: Path, backend: Backend) -> None:
    """What two writers of one read-back meet, in order: the second read the
    line open (before the first's commit) and found another outcome, or
    the same with another latency, or the deadline passed."""
    w = Warden(db_path, sinks=sinks_from_table({"vectors": {"kind": "index"}}))
    try:
        w.save(
            memory_id="m1",
            kind="external_fact",
            summary="a note",
            content="its text",
            source_url="https://example.org/1",
            scope={"tenant": "acme", "project": "p1"},
            caller=OPERATOR,
        )
        revoked = w.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
        (stale,) = w.sink_readbacks(revoked.revocation_id, caller=OPERATOR)
        row = {**stale, "revocation_id": revoked.revocation_id, "notice_id": _notice(w, revoked.revocation_id)}
        (first,) = w.settle_sinks(revoked.revocation_id, caller=OPERATOR)
        assert first["status"] == "confirmed" and first["final_seq"] is not None
        spec = w.sinks[0]
        head = w.head_seq()
        later = outcome_event(spec, row, "confirmed", final=True, latency_ms=first["latency_ms"] + 5, attempts=1)
        assert record(w, later, {**_state("confirmed"), "latency_ms": first["latency_ms"] + 5}) == first["final_seq"]
        assert record(w, deadline_event(spec, row, "timed out")) == first["final_seq"]
        # a leak the stale reader found is not written after the final, nor its state over the line
        leak = outcome_event(spec, row, "leaked", final=False, leaked=["m1"], attempts=1)
        assert record(w, leak, {**_state("leaked"), "leaked": ["m1"]}) == first["final_seq"]
        with w.store.outbox() as outbox:  # nor the state of a try that wrote no event
            outbox.set_readback(revoked.revocation_id, spec.name, **_state("unreachable"))
        assert w.head_seq() == head
        (line,) = w.sink_readbacks(revoked.revocation_id, caller=OPERATOR)
        assert line == first
    finally:
        w.close()


def _notice(w: Warden, revocation_id: str) -> str:
    (notice,) = [n for n in w.sink_notices(caller=OPERATOR) if n["revocation_id"] == revocation_id]
    return str(notice["notice_id"])


def _state(status: str) -> dict[str, Any]:
    return {"status": status, "latency_ms": None, "leaked": [], "detail": None, "next_at": 0.0, "checked_at": START}


def test_a_committed_revocation_whose_sinks_cannot_be_tried_is_answered_201(
    served: tuple[TestClient, Warden, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, w, key = served

    def refused(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        raise InvalidInput("sink", "refused for the test")

    monkeypatch.setattr(SinkWorker, "settle", refused)  # the one try every face's wait makes
    w.save(
        memory_id="m1",
        kind="external_fact",
        summary="m1 noted",
        content="its text",
        source_url="https://example.org/1",
        scope={"tenant": "acme", "project": "p1"},
        caller=OPERATOR,
    )
    body = {"selector": {"tenant": "acme"}, "reason": "r", "wait": True}
    answer = client.post("/v1/revocations", json=body, headers={"x-api-key": key})
    assert answer.status_code == 201, answer.text
    data = answer.json()
    assert data["covered"] == 1 and data["readback"]["readback_status"] == "confirmed"
    assert data["sinks_error"]["field"] == "sink" and [s["status"] for s in data["sinks"]] == ["pending"]
    assert w.get("m1", caller=OPERATOR).reason == "revoked"  # in force all the same
