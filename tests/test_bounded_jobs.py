"""Jobs and read-backs cannot be poisoned (#38): a summary an agent chose
never stops the read-back or the scheduler, each job fails alone, and a
committed revocation is answered as committed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import structlog
from memwarden.engine import OPERATOR, InvalidInput, Scheduler, TtlPolicy, Warden
from memwarden.engine._readback import _first_word
from memwarden.events import FrozenClock

from ._http_server import Server, save_body, server  # noqa: F401  (the live server fixture)
from .backends import Backend
from .conftest import save_memory

POISONED = ["\u001bfoo rest", "x" * 1500 + " tail", '"""*** ( NEAR', "\u001b[2J\u001b]0;title\u0007 more"]


def test_the_sample_word_is_a_word_the_text_index_holds() -> None:
    assert _first_word("\u001bfoo rest") == "foo"
    assert _first_word("x" * 1500) == "x" * 100
    assert _first_word("Café 서울에서") == "cafe"
    assert _first_word("*** ---") is None


def test_a_poisoned_summary_does_not_stop_the_read_back(warden: Warden) -> None:
    for n, summary in enumerate(POISONED):
        save_memory(warden, f"p{n}", summary=summary)
    rev = warden.revoke({"tenant": "acme"}, reason="poison", caller=OPERATOR)
    result = Scheduler(warden).run_once()
    assert result["readbacks"] == [{"revocation_id": rev.revocation_id, "status": "confirmed"}]
    assert result["failures"] == {}


def test_each_job_fails_alone_and_is_logged_once(warden: Warden, monkeypatch: pytest.MonkeyPatch) -> None:
    save_memory(warden, "a")
    first = warden.revoke({"ids": ["a"]}, reason="one", caller=OPERATOR)
    save_memory(warden, "b")
    second = warden.revoke({"ids": ["b"]}, reason="two", caller=OPERATOR)
    jobs = Scheduler(warden)
    real = jobs._read_back_claimed

    def broken_first(revocation_id: str) -> dict[str, Any] | None:
        if revocation_id == first.revocation_id:
            raise RuntimeError("the first read-back breaks")
        return real(revocation_id)

    def broken_sweep() -> int:
        raise RuntimeError("the sweep breaks")

    monkeypatch.setattr(jobs, "_read_back_claimed", broken_first)
    monkeypatch.setattr(jobs, "expire_due", broken_sweep)
    # one capture: a logger caches its processors on first use
    with structlog.testing.capture_logs() as logs:
        results = [jobs.run_once() for _ in range(3)]
        monkeypatch.setattr(jobs, "_read_back_claimed", real)
        healed = jobs.run_once()
    result = results[-1]
    # the next read-back and the jobs after the sweep still ran
    assert results[0]["readbacks"] == [{"revocation_id": second.revocation_id, "status": "confirmed"}]
    assert result["erasures_finished"] is True
    assert result["failures"] == {
        "expiry": "RuntimeError: the sweep breaks",
        f"read-back {first.revocation_id}": "RuntimeError: the first read-back breaks",
    }
    failed = [e for e in logs if e["event"] == "scheduler_job_failed"]
    assert sorted(e["job"] for e in failed) == ["expiry", f"read-back {first.revocation_id}"]  # once, not a tick
    assert healed["readbacks"] == [{"revocation_id": first.revocation_id, "status": "confirmed"}]
    assert [e["job"] for e in logs if e["event"] == "scheduler_job_recovered"] == [f"read-back {first.revocation_id}"]


def test_every_line_a_job_logs_names_the_job(warden: Warden, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    real = Scheduler.expire_due

    def watched(self: Scheduler) -> int:
        seen.update(structlog.contextvars.get_contextvars())  # what every log line of the job is merged with
        return real(self)

    monkeypatch.setattr(Scheduler, "expire_due", watched)
    Scheduler(warden).run_job("expiry")
    assert seen == {"job": "expiry"}
    assert "job" not in structlog.contextvars.get_contextvars()  # unbound once the job is done


def test_a_waited_revocation_over_a_poisoned_summary_answers_committed(server: Server) -> None:  # noqa: F811
    with server.client("agent") as c:
        for n, summary in enumerate(POISONED):
            body = save_body(f"poison-{n}", summary=summary, scope={"project": "poison"})
            assert c.post("/v1/memories", json=body).status_code == 201, body
    with server.client("security") as c:
        answer = c.post(
            "/v1/revocations", json={"selector": {"tenant": "acme", "project": "poison"}, "reason": "x", "wait": True}
        )
        assert answer.status_code == 201, answer.text
        data = answer.json()
        assert data["covered"] == len(POISONED) and data["readback"]["readback_status"] == "confirmed", data


def test_a_committed_revocation_is_answered_whatever_its_read_back_meets(
    warden: Warden, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_memory(warden, "w")
    jobs = Scheduler(warden)

    def refused(core: Any, revocation_id: str, *, caller: Any, http: Any = None) -> dict[str, Any]:
        raise InvalidInput("text", "must be at most 1000 characters")

    # the one read-back every waiting caller's answer runs (the scheduler's, the faces')
    monkeypatch.setattr("memwarden.engine._committed.read_back", refused)
    rev = warden.revoke({"ids": ["w"]}, reason="x", caller=OPERATOR)
    answered = jobs.read_back_committed(rev.revocation_id, caller=OPERATOR)
    assert answered["revocation_id"] == rev.revocation_id and answered["readback_status"] is None
    assert answered["readback_error"]["field"] == "text" and answered["covered"] == 1
    assert warden.get("w", caller=OPERATOR).reason == "revoked"  # in force all the same


def test_one_memory_whose_check_raises_does_not_stop_the_round(
    tmp_path: Path, clock: FrozenClock, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = Warden(
        backend.db(tmp_path, "r.db"),
        clock=clock,
        policy=TtlPolicy({"research_result": {"ttl": "1h", "reverify": True}}),
    )
    try:
        w.fetchers.register("same", lambda row: f"text of {row['memory_id']}")
        for memory_id in ("bad", "good"):
            save_memory(
                w,
                memory_id,
                tenant="t",
                kind="research_result",
                content=f"text of {memory_id}",
                source_url="callable:same",
                ttl="1h",
            )
        clock.advance("2h")
        jobs = Scheduler(w)
        real = w.verify

        def verify(memory_id: str, **kwargs: Any) -> Any:
            if memory_id == "bad":
                raise InvalidInput("content", "poisoned")
            return real(memory_id, **kwargs)

        monkeypatch.setattr(w, "verify", verify)
        outcomes = {r["memory_id"]: r["outcome"] for r in jobs.run_once()["reverified"]}
        assert outcomes == {"bad": "failed", "good": "verified"}
        assert list(jobs.failures) == ["verify t/bad"] and "poisoned" in jobs.failures["verify t/bad"]
    finally:
        w.close()
