"""Re-verification through the scheduler: opt-in per kind, with a backoff per
network host (or other source) that every scheduler on the store shares."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from memwarden.engine import OPERATOR, HostBackoff, Scheduler, SharedBackoff, TtlPolicy, Warden
from memwarden.engine._scheduler import _host
from memwarden.events import FrozenClock

from .backends import Backend


def test_reverification_is_opt_in_per_kind_with_backoff(tmp_path: Path, clock: FrozenClock, backend: Backend) -> None:
    policy = TtlPolicy({"research_result": {"ttl": "1h", "reverify": True}})
    w = Warden(backend.db(tmp_path, "r.db"), clock=clock, policy=policy)
    calls: list[str] = []
    answers = {"r1": "one", "r2": "two", "f1": "fact"}
    down = {"down"}

    def source(name: str) -> Callable[[dict], str]:
        def fetch(row: dict) -> str:
            calls.append(row["memory_id"])
            if name in down:
                raise OSError("host down")
            return answers[row["memory_id"]]

        return fetch

    for name in ("good", "down"):
        w.fetchers.register(name, source(name))
    for key, kind, src in (
        ("r1", "research_result", "good"),
        ("r2", "research_result", "down"),
        ("f1", "external_fact", "good"),
    ):
        w.save(
            memory_id=key,
            kind=kind,
            summary=key,
            content=answers[key],
            source_url=f"callable:{src}",
            scope={"tenant": "t"},
            ttl="1h",
            caller=OPERATOR,
        )
    clock.advance("2h")
    jobs = Scheduler(w, concurrency=2, backoff=HostBackoff(base=30, ceiling=3600))
    outcomes = {r["memory_id"]: r["outcome"] for r in jobs.run_once()["reverified"]}
    assert outcomes == {"r1": "verified", "r2": "failed"}  # f1's kind did not opt in
    assert w.get("r1", caller=OPERATOR).usable and not w.get("f1", caller=OPERATOR).usable
    # the failing source waits (on the warden's clock) before it is tried again
    calls.clear()
    assert jobs.run_once()["reverified"] == []
    clock.advance("29s")
    assert jobs.run_once()["reverified"] == []
    assert calls == []
    clock.advance("1s")
    assert [r["outcome"] for r in jobs.run_once()["reverified"]] == ["failed"]
    clock.advance("59s")  # the second failure doubled the wait
    assert jobs.run_once()["reverified"] == []
    down.clear()
    clock.advance("1s")
    assert [r["outcome"] for r in jobs.run_once()["reverified"]] == ["verified"]
    assert calls == ["r2", "r2"] and w.get("r2", caller=OPERATOR).usable
    assert jobs.backoff.until == {}


def test_backoff_is_per_network_host_and_per_other_source() -> None:
    assert _host("https://a.example/x") == _host("http://a.example/y") == "a.example"
    assert _host("callable:a") != _host("callable:b")
    assert _host("file:///srv/a.txt") != _host("file:///srv/b.txt")


def test_a_host_that_served_and_failed_in_one_round_ends_as_its_last_due_memory_left_it(
    tmp_path: Path, clock: FrozenClock, backend: Backend
) -> None:
    # threads finish in any order; the backoff is recorded in due order
    policy = TtlPolicy({"research_result": {"ttl": "1h", "reverify": True}})
    w = Warden(backend.db(tmp_path, "r.db"), clock=clock, policy=policy)
    w.fetchers.register("src", lambda row: {"a": "one"}[row["memory_id"]])  # "b" fails
    for key in ("a", "b"):
        w.save(
            memory_id=key,
            kind="research_result",
            summary=key,
            content="one",
            source_url="callable:src",
            scope={"tenant": "t"},
            ttl="1h",
            caller=OPERATOR,
        )
    clock.advance("2h")
    for _ in range(5):
        jobs = Scheduler(w, concurrency=2)
        assert {r["memory_id"]: r["outcome"] for r in jobs.run_once()["reverified"]} == {
            "a": "verified",
            "b": "failed",
        }
        assert not jobs.backoff.ready("callable:src", clock.now().timestamp())
        clock.advance("2h")


def test_host_backoff_grows_and_resets() -> None:
    backoff = HostBackoff(base=10, ceiling=35)
    backoff.record("h", False, 0)
    assert not backoff.ready("h", 5) and backoff.ready("h", 10)
    backoff.record("h", False, 10)
    assert not backoff.ready("h", 29) and backoff.ready("h", 30)
    backoff.record("h", False, 30)
    backoff.record("h", False, 30)
    assert backoff.until["h"] == 65  # capped at the ceiling
    backoff.record("h", True, 31)
    assert backoff.ready("h", 31)


def test_the_backoff_is_shared_by_every_scheduler_on_the_store(db_path: Path, clock: FrozenClock) -> None:
    """Two schedulers (two nodes, or a restart) leave a failing source alone together."""
    one, two = Warden(db_path, clock=clock), Warden(db_path, clock=clock)
    try:
        first, second = Scheduler(one).backoff, Scheduler(two).backoff
        assert isinstance(first, SharedBackoff)
        now = clock.now().timestamp()
        first.record("src.example", False, now)
        assert not second.ready("src.example", now + 29) and second.ready("src.example", now + 30)
        second.record("src.example", False, now + 30)  # the second failure in a row, wherever it happened
        assert not first.ready("src.example", now + 89) and first.ready("src.example", now + 90)
        assert second.ready("other.example", now)
        first.record("src.example", True, now + 90)
        assert second.ready("src.example", now + 90)
    finally:
        one.close()
        two.close()
