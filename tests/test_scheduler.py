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
from pathlib import Path
from typing import Any

import pytest
from memwarden.engine import OPERATOR, Scheduler, Warden
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
