"""Each scheduler job its own APScheduler job: its own interval, failing or
stuck alone, set by the policy file's scheduler table."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from memwarden.engine import Scheduler, Warden
from memwarden.events import FrozenClock

from .conftest import Cli, save_memory
from .test_scheduler import expiries

# -- each job its own APScheduler job --------------------------------------------------------


def _until(condition: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the deadline"
        time.sleep(0.02)


def test_each_job_runs_on_its_own_interval_and_a_stuck_one_delays_no_other(warden: Warden, clock: FrozenClock) -> None:
    """APScheduler owns the jobs: one job each (expiry, read-back,
    re-verification, erasure purge, sinks) on its own interval, so a
    re-verification stuck on a slow source holds back no expiry."""
    jobs = Scheduler(warden, interval=3600, intervals={"expiry": 0.1})
    assert jobs.intervals == {"expiry": 0.1, "readback": 3600, "reverify": 3600, "erasure_purge": 3600, "sinks": 3600}
    stuck, released = threading.Event(), threading.Event()
    calls: dict[str, int] = {"expiry": 0, "reverify": 0}
    expire_due = jobs.expire_due

    def counted_expiry() -> int:
        calls["expiry"] += 1
        return expire_due()

    def stuck_reverify() -> list[Any]:
        calls["reverify"] += 1
        stuck.set()
        released.wait(30)
        return []

    jobs.expire_due = counted_expiry  # type: ignore[method-assign]
    jobs.reverify_due = stuck_reverify  # type: ignore[method-assign]
    save_memory(warden, "short", ttl="10m")
    scheduler = jobs.start()
    try:
        assert {j.id: j.trigger.interval.total_seconds() for j in scheduler.get_jobs()} == {
            f"memwarden-{job}": seconds for job, seconds in jobs.intervals.items()
        }
        _until(stuck.is_set)  # re-verification runs at once, and stays stuck
        clock.advance("11m")
        _until(lambda: [m for m, _ in expiries(warden)] == ["short"])
        before = calls["expiry"]
        _until(lambda: calls["expiry"] >= before + 3)  # expiry goes on every 0.1 s meanwhile
        assert calls["reverify"] == 1
    finally:
        released.set()
        jobs.stop()


def test_a_failing_job_fails_alone_and_is_counted(warden: Warden, clock: FrozenClock) -> None:
    from memwarden.engine._metrics import SCHEDULER_FAILURES

    jobs = Scheduler(warden, interval=3600, intervals={"expiry": 0.1, "reverify": 0.1})

    def broken() -> list[Any]:
        raise RuntimeError("source gone")

    jobs.reverify_due = broken  # type: ignore[method-assign]
    failed_before = SCHEDULER_FAILURES._value.get()
    save_memory(warden, "short", ttl="10m")
    clock.advance("11m")
    jobs.start()
    try:
        _until(lambda: len(expiries(warden)) == 1 and SCHEDULER_FAILURES._value.get() >= failed_before + 2)
        assert jobs.failures["re-verification"] == "RuntimeError: source gone"
    finally:
        jobs.stop()


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ("[scheduler]\nexpiry = 0", "scheduler.expiry"),
        ('[scheduler]\nreverify = "1m"', "scheduler.reverify"),
        ("[scheduler]\ncleanup = 5", "scheduler.cleanup"),
        ("[scheduler]\nsinks = true", "scheduler.sinks"),
    ],
)
def test_a_bad_scheduler_table_exits_2_naming_the_job(tmp_path: Path, table: str, field: str) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(table, encoding="utf-8")
    result = Cli(tmp_path / "s.db")("--policy-file", str(policy), "scheduler", "--once", "--json")
    assert result.exit_code == 2 and field in result.output, result.output


def test_the_policy_files_scheduler_table_sets_each_jobs_interval(tmp_path: Path) -> None:
    from memwarden.engine import PolicyFile

    policy = tmp_path / "policy.toml"
    policy.write_text("[scheduler]\nexpiry = 5\nreverify = 120.5\n", encoding="utf-8")
    settings = PolicyFile.read(policy)
    w = Warden(tmp_path / "p.db", schedule=settings.schedule)
    try:
        jobs = Scheduler(w, interval=30)
        assert jobs.intervals == {"expiry": 5, "readback": 30, "reverify": 120.5, "erasure_purge": 30, "sinks": 30}
    finally:
        w.close()
