"""The scheduler writes what time and revocations imply: once, whatever
restarts, runs twice, or is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from memwarden.engine import OPERATOR, HostBackoff, Scheduler, SharedBackoff, TtlPolicy, Warden
from memwarden.engine._scheduler import _host
from memwarden.events import FrozenClock, MemorySaved, Scope, content_checksum

from ._wait import wait_for
from .backends import Backend
from .conftest import Cli, memwarden_subprocess, save_memory


def expiries(w: Warden) -> list[tuple[str, str]]:
    return [(e.payload["memory_id"], e.payload["expires_at"]) for e in w.log.read(types=("memory.expired",))]


def test_expiry_events_carry_the_memory_expires_at(warden: Warden, clock: FrozenClock) -> None:
    save_memory(warden, "short", ttl="10m")
    save_memory(warden, "long", ttl="3h")
    save_memory(warden, "forever", ttl=None, kind="permission")
    jobs = Scheduler(warden)
    clock.advance("1h")
    assert jobs.run_once()["expired"] == 1
    assert expiries(warden) == [("short", "2026-01-05T09:10:00.000000Z")]  # not the sweep's time
    assert warden.get("short", caller=OPERATOR).status == "expired"
    clock.advance("5h")
    assert jobs.run_once()["expired"] == 1
    assert jobs.run_once()["expired"] == 0
    assert [m for m, _ in expiries(warden)] == ["short", "long"]


def test_restart_and_a_second_scheduler_never_duplicate(db_path: Path, clock: FrozenClock) -> None:
    w = Warden(db_path, clock=clock)
    with w.transaction() as tx:  # more than one sweep batch
        for i in range(2500):
            w.texts.put("t", f"m{i}", 1, f"m{i}", f"text {i}")
        tx.append(
            [
                MemorySaved(
                    memory_id=f"m{i}",
                    version=1,
                    kind="research_result",
                    summary="s",
                    content_checksum=content_checksum(f"text {i}"),
                    content_length=6,
                    source_url="https://e",
                    fetched_at="2026-01-05T09:00:00Z",
                    expires_at="2026-01-05T09:30:00Z",
                    scope=Scope(tenant="t"),
                )
                for i in range(2500)
            ]
        )
    clock.advance("1h")
    other = Warden(db_path, clock=clock)
    results: list[int] = []
    threads = [
        threading.Thread(target=lambda s=s: results.append(s.expire_due()))
        for s in (Scheduler(w), Scheduler(other), Scheduler(w))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(results) == 2500
    assert Scheduler(Warden(db_path, clock=clock)).expire_due() == 0  # a restart finds nothing left
    assert len(expiries(w)) == 2500 and len(set(expiries(w))) == 2500
    assert w.audit_verify(caller=OPERATOR)["ok"] and w.check_projections(caller=OPERATOR).ok


def test_a_stale_read_path_fails_the_readback_naming_the_leak(warden: Warden, run_cli: Cli, backend: Backend) -> None:
    save_memory(warden, "a", tenant="acme", summary="서울 계약서")
    save_memory(warden, "b", tenant="acme", summary="부산 계약서")
    rev = warden.revoke({"tenant": "acme"}, reason="breach", caller=OPERATOR)
    # leave one read path stale: the view row of "b" goes back to usable behind the engine's back
    backend.set_view(warden.path, "b", status="usable", reason=None)
    result = Scheduler(warden).run_once()
    assert result["readbacks"] == [{"revocation_id": rev.revocation_id, "status": "failed"}]
    failed = [e for e in warden.log.read(types=("readback.failed",))]
    assert len(failed) == 1 and failed[0].payload["leaked_ids"] == ["b"] and failed[0].payload["still_visible"] == 1
    assert set(failed[0].payload["paths_checked"]) == {"python_query", "fts_text_search"}
    # retrying while the same memory leaks records nothing new
    Scheduler(warden).run_once()
    assert len(list(warden.log.read(types=("readback.failed",)))) == 1
    out = run_cli("readback", rev.revocation_id, "--json")
    assert out.exit_code == 1 and json.loads(out.stdout)["confirmed"] is False
    # repair the view from the log; the next run confirms
    warden.rebuild(caller=OPERATOR)
    assert Scheduler(warden).run_once()["readbacks"][0]["status"] == "confirmed"
    data = run_cli.json("readback", rev.revocation_id)
    assert data["confirmed"] is True and [r["type"] for r in data["records"]] == [
        "readback.failed",
        "readback.confirmed",
    ]
    assert data["records"][-1]["covered"] == 2 and data["records"][-1]["still_visible"] == 0


def test_revocation_through_the_same_process_is_read_back_at_once(warden: Warden) -> None:
    save_memory(warden, "a", tenant="acme")
    jobs = Scheduler(warden, interval=3600)
    ran: list[str] = []
    run_job = jobs.run_job

    def noting(job: str) -> Any:
        try:
            return run_job(job)
        finally:
            ran.append(job)

    jobs.run_job = noting  # type: ignore[method-assign]
    jobs.start()
    try:
        # the first, catch-up read-back has run: the next is an hour away, so only the revocation's own
        # wake can read this one back
        wait_for(lambda: "readback" in ran, what="the catch-up read-back")
        rev = warden.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
        wait_for(
            lambda: warden.revocation(rev.revocation_id, caller=OPERATOR)["readback_status"],
            what="the revocation read back",
        )
        assert warden.revocation(rev.revocation_id, caller=OPERATOR)["readback_status"] == "confirmed"
    finally:
        jobs.stop()


def test_start_catches_up_on_what_came_due_while_down(warden: Warden, clock: FrozenClock) -> None:
    save_memory(warden, "a", ttl="1m")
    warden.revoke({"ids": ["zzz"]}, reason="nothing covered", caller=OPERATOR)
    clock.advance("1h")  # downtime
    jobs = Scheduler(warden, interval=3600)
    jobs.start()
    try:
        deadline = time.monotonic() + 10
        while not expiries(warden) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert expiries(warden) == [("a", "2026-01-05T09:01:00.000000Z")]
    finally:
        jobs.stop()
    assert warden.revocation(warden.log.tail(10)[1].stream, caller=OPERATOR)["readback_status"] == "confirmed"


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


def _fill_due(db: Path, n: int) -> None:
    w = Warden(db, synchronous="NORMAL")
    with w.transaction() as tx:
        tx.append(
            [
                MemorySaved(
                    memory_id=f"m{i}",
                    version=1,
                    kind="research_result",
                    summary="s",
                    content_checksum=content_checksum("x"),
                    content_length=1,
                    source_url="https://e",
                    fetched_at="2026-01-01T00:00:00Z",
                    expires_at="2026-01-01T01:00:00Z",
                    scope=Scope(tenant="t"),
                )
                for i in range(n)
            ]
        )
    w.close()


DUE = 12_000


def test_sigkill_during_a_sweep_then_the_next_run_completes_it(tmp_path: Path, backend: Backend) -> None:
    db = backend.db(tmp_path, "k.db")
    # twelve batches of 1000: the kill lands after the first and long before the last
    _fill_due(db, DUE)
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("memwarden")), "--db", str(db), "scheduler", "--once"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # kill it as soon as the sweep has committed something
        if backend.count_events(db, "memory.expired"):
            break
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    w = Warden(db)
    partial = len(expiries(w))
    assert 0 < partial < DUE
    assert w.audit_verify(caller=OPERATOR)["ok"] and w.check_projections(caller=OPERATOR).ok
    assert partial % 1000 == 0  # whole batches only
    done = memwarden_subprocess(db, "scheduler", "--once", "--json")
    assert done.returncode == 0
    assert json.loads(done.stdout)["expired"] == DUE - partial
    assert len(expiries(w)) == DUE and len(set(expiries(w))) == DUE


def test_sigterm_stops_cleanly(tmp_path: Path, backend: Backend) -> None:
    db = backend.db(tmp_path, "t.db")
    Warden(db).close()
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("memwarden")), "--db", str(db), "scheduler", "--interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    # signalled once its handlers are in place (it says so), however slowly it started
    lines = []
    while not any("scheduler running" in line for line in lines):
        line = proc.stderr.readline()
        assert line, "".join(lines)  # it exited before it was running
        lines.append(line)
    time.sleep(0.5)  # paces only (a run or two of the jobs): a SIGTERM at any moment must end it cleanly
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, "".join(lines) + err


def test_revoke_wait_prints_the_readback_latency(run_cli: Cli, warden: Warden) -> None:
    save_memory(warden, "a", tenant="acme")
    data = run_cli.json("revoke", "--tenant", "acme", "--reason", "r", "--wait")
    assert data["readback"]["readback_status"] == "confirmed" and data["readback"]["readback_latency_ms"] >= 0
    text = run_cli("revoke", "--tenant", "acme", "--reason", "again", "--wait")
    assert text.exit_code == 0 and "read-back confirmed after" in text.stdout
    assert run_cli("readback", "rev_nope").exit_code == 1


@pytest.mark.parametrize("once", [True])
def test_scheduler_once_cli(run_cli: Cli, once: bool) -> None:
    assert run_cli.json("scheduler", "--once") == {
        "expired": 0,
        "readbacks": [],
        "reverified": [],
        "erasures_finished": True,
        "failures": {},
        "seconds": pytest.approx(0, abs=1),
    }


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
