"""The scheduler: writes the events that time and revocations imply.

The gate never depends on it (expiry is judged at read time, revocations
are in force at commit); it makes the log tell the whole story: expiries,
read-back confirmations, and opt-in re-verification.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC
from typing import Any, TypeVar

import structlog
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.schedulers.background import BackgroundScheduler
from memwarden.events import MemoryExpired, get_logger, parse_ts, sha256_hex
from memwarden.projections import Access, RevocationQuery

from . import _metrics
from ._backoff import HostBackoff, SharedBackoff, host_of
from ._committed import read_back_committed
from ._due import due_of
from ._policy import JOBS, schedule_from_table
from ._readback import ReadPath, read_back
from ._rights import SYSTEM, Principal
from ._views import DueItem, VerifyResult
from ._warden import Warden
from .sinks._worker import SinkWorker

log = get_logger("memwarden.scheduler")

# the expiry events one commit of a sweep writes: each commit is a sync to
# disk, and 5,000 keep a batch's memory small
SWEEP_BATCH = 5000

_T = TypeVar("_T")


def expiry_event_id(tenant: str, memory_id: str, version: int, expires_at: str) -> str:
    """Deterministic, so a restart or a second scheduler never writes an
    expiry twice: the log refuses nothing and stores one."""
    return "exp_" + sha256_hex(f"{tenant}\x00{memory_id}\x00{version}\x00{expires_at}")[:40]


class Scheduler:
    """Runs the jobs against one Warden: each on its own interval once
    started (``interval``, or the store's [scheduler] table for the jobs it
    names); ``run_once`` runs each job once, in order."""

    def __init__(
        self,
        warden: Warden,
        *,
        interval: float = 30.0,
        intervals: Mapping[str, float] | None = None,
        http_path: ReadPath | None = None,
        concurrency: int = 4,
        backoff: HostBackoff | None = None,
    ) -> None:
        self.warden = warden
        self.interval = interval
        named = schedule_from_table(warden.schedule if intervals is None else intervals)
        self.intervals = {job: named.get(job, interval) for job in JOBS}
        self.http_path = http_path
        self.concurrency = concurrency
        self.backoff = backoff or SharedBackoff(warden, base=warden.fetchers.backoff)
        # one run of each job at a time, whoever runs it (its own interval, run_once)
        self._locks = {job: threading.Lock() for job in JOBS}
        # what each failing job (or revocation's read-back) last failed with:
        # a failure is logged when it starts or changes, not every tick
        self.failures: dict[str, str] = {}
        self._scheduler: BackgroundScheduler | AsyncIOScheduler | None = None
        self.sink_worker = SinkWorker(warden, backoff=self.backoff)
        warden.revocation_listeners.append(self._revoked)

    # -- jobs ---------------------------------------------------------------------

    def expire_due(self) -> int:
        """A ``memory.expired`` for every usable memory whose expires_at has
        passed, carrying that expires_at. Commits a batch at a time, so a
        killed sweep leaves whole batches and the next run finishes it."""
        now = self.warden.now()
        with self.warden.store.claim("expiry sweep") as mine:
            # another process sweeping now writes the same events: leave it
            return self._sweep(now) if mine else 0

    def _sweep(self, now: str) -> int:
        written = 0
        after: tuple[str, str, str] | None = None
        while True:
            with self.warden.reading() as view:
                rows = view.past_expiry(Access.system(), now, SWEEP_BATCH, after)
            if not rows:
                return written
            last = rows[-1]
            after = (last.expires_at, last.tenant, last.memory_id)
            events = [
                MemoryExpired(
                    event_id=expiry_event_id(t, m, v, e),
                    tenant=t,
                    memory_id=m,
                    version=v,
                    expires_at=parse_ts(e),
                    actor="scheduler",
                )
                for t, m, v, e in rows
            ]
            with self.warden.transaction() as tx:
                before = tx.head.seq
                tx.append(events)
                written += tx.head.seq - before
            if len(rows) < SWEEP_BATCH:
                return written

    def finish_erasures(self) -> bool:
        """An erasure whose bytes could not all leave the store's files (a
        transaction older than it was running) finished once it can be: one
        node at a time. True when none is left unfinished."""
        with self.warden.store.claim("erasure purge") as mine:
            return self.warden.store.finish_erasures() if mine else True

    def pending_readbacks(self) -> list[str]:
        with self.warden.reading() as view:
            return [r.revocation_id for r in view.revocation_records(RevocationQuery(unconfirmed=True))]

    def read_back(self, revocation_id: str, *, caller: Principal) -> dict[str, Any]:
        """Read a revocation back now and return its record (a caller waiting for it)."""
        return read_back(self.warden, revocation_id, caller=caller, http=self.http_path)

    def read_back_committed(self, revocation_id: str, *, caller: Principal) -> dict[str, Any]:
        """A committed revocation's read-back, for a caller waiting on it
        (``_committed.read_back_committed``): never an exception."""
        return read_back_committed(self.warden, revocation_id, caller=caller, http=self.http_path)

    def _read_back_claimed(self, revocation_id: str) -> dict[str, Any] | None:
        # a scheduler's own runs: skipped while another process holds it
        with self.warden.store.claim(f"read-back {revocation_id}") as mine:
            return self.read_back(revocation_id, caller=SYSTEM) if mine else None

    def readback_pending(self) -> list[dict[str, Any]]:
        """Each pending revocation read back on its own: one that fails is
        recorded as a read-back failure, and the next is still read back."""
        done: list[dict[str, Any]] = []
        for revocation_id in self.pending_readbacks():
            record = self._guarded(f"read-back {revocation_id}", self._read_back_claimed, revocation_id)
            if record is not None:
                done.append(record)
        return done

    def _guarded(self, job: str, run: Callable[..., _T], *args: Any) -> _T | None:
        """``run`` as one job that fails alone: its failure is recorded with
        its reason (logged once while the reason stays the same) and None
        returned, so the jobs after it still run."""
        try:
            result = run(*args)
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"[:500]
            _metrics.SCHEDULER_FAILURES.inc()
            if self.failures.get(job) != reason:
                log.error("scheduler_job_failed", job=job, reason=reason, exc_info=True)
            self.failures[job] = reason
            return None
        if self.failures.pop(job, None) is not None:
            log.warning("scheduler_job_recovered", job=job)
        return result

    def reverify_due(self) -> list[VerifyResult]:
        """Re-verify due memories of the kinds whose policy opts in, a few at a
        time, skipping hosts that failed recently."""
        kinds = {k for k, rule in self.warden.policy.rules.items() if rule.reverify}
        if not kinds:
            return []
        items = due_of(self.warden, Access.system(), kinds=kinds)
        # the warden's clock, so a frozen clock governs the waits too
        now = self.warden.clock.now().timestamp()
        ready = [d for d in items if self.backoff.ready(_host(d.source_url), now)]
        with ThreadPoolExecutor(max_workers=max(self.concurrency, 1)) as pool:
            results = list(pool.map(self._reverify_alone, ready))
        # recorded after the round in due order, not as the threads finish: a
        # host that both served and failed in one round ends where its last
        # due memory left it, whatever order the threads ran in
        done = self.warden.clock.now().timestamp()
        for d, result in zip(ready, results, strict=True):
            if result.outcome != "skipped":
                self.backoff.record(_host(d.source_url), result.outcome != "failed", done)
        return results

    def _reverify_alone(self, due: DueItem) -> VerifyResult:
        """One memory's re-verification, failing alone: one whose check
        raises is counted failed with its reason (its source backs off),
        and the others of the round are verified all the same."""
        job = f"verify {due.tenant}/{due.memory_id}"
        result = self._guarded(job, self._reverify, due)
        if result is None:
            return VerifyResult(
                memory_id=due.memory_id, outcome="failed", detail=self.failures.get(job), tenant=due.tenant
            )
        return result

    def _reverify(self, due: DueItem) -> VerifyResult:
        # claimed, so two nodes never fetch the same source for one memory at
        # once; one held elsewhere is verified there (its result counted here
        # as skipped, which neither backs a host off nor clears it)
        with self.warden.store.claim(f"verify {due.tenant}/{due.memory_id}") as mine:
            if mine:
                return self.warden.verify(due.memory_id, tenant=due.tenant, caller=SYSTEM)
        return VerifyResult(
            memory_id=due.memory_id, outcome="skipped", detail="verified by another process", tenant=due.tenant
        )

    def run_sinks(self) -> dict[str, Any]:
        """Each sink's delivery and read-back as a job of its own: a sink
        that fails (down, refusing, misconfigured) fails alone."""
        return {
            spec.name: self._guarded(f"sink {spec.name}", self.sink_worker.run_sink, spec) for spec in self.warden.sinks
        }

    def _steps(self) -> dict[str, tuple[str, Callable[[], Any]]]:
        """Each job: (the name its failures are recorded under, what it runs)."""
        return {
            "expiry": ("expiry", self.expire_due),
            "readback": ("read-back", self.readback_pending),
            "reverify": ("re-verification", self.reverify_due),
            "erasure_purge": ("erasure purge", self.finish_erasures),
            "sinks": ("sinks", self.run_sinks),  # each sink fails alone inside
        }

    def run_job(self, job: str) -> Any:
        """One job once, failing alone (its failure recorded, None returned).
        The job's name is bound into the log's context for its run, so every
        line it writes, down to the sinks and the fetchers, says which job."""
        name, step = self._steps()[job]
        with self._locks[job], structlog.contextvars.bound_contextvars(job=job):
            return step() if job == "sinks" else self._guarded(name, step)

    def run_once(self) -> dict[str, Any]:
        """Every job once, in order (catching up on whatever came due meanwhile)."""
        started = time.perf_counter()
        expired = self.run_job("expiry") or 0
        readbacks = self.run_job("readback") or []
        verified = self.run_job("reverify") or []
        erasures_done = self.run_job("erasure_purge")
        sinks = self.run_job("sinks")
        summary = {
            "expired": expired,
            "readbacks": [{"revocation_id": r["revocation_id"], "status": r["readback_status"]} for r in readbacks],
            "reverified": [v.as_dict() for v in verified],
            "erasures_finished": erasures_done,
            "failures": dict(self.failures),
            "seconds": round(time.perf_counter() - started, 3),
        }
        if sinks:  # only where sinks are configured: the answer's shape is otherwise as it was
            summary["sinks"] = sinks
        if expired or readbacks or verified:
            log.info("scheduler_ran", expired=expired, readbacks=len(readbacks), reverified=len(verified))
        return summary

    def _revoked(self, revocation_id: str) -> None:
        # A revocation through this process: confirm it now, not at the next tick.
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.add_job(
                self._guarded,
                args=[f"read-back {revocation_id}", self._read_back_claimed, revocation_id],
                id=f"readback-{revocation_id}",
                replace_existing=True,
            )
            if self.warden.sinks:  # and its notices out now, each sink on its own
                self._scheduler.add_job(self.run_sinks, id="sinks-now", replace_existing=True)

    # -- running ----------------------------------------------------------------------

    def start(self) -> BackgroundScheduler:
        """Run the jobs every ``interval`` seconds in a background thread,
        the first run at once (catching up after any downtime)."""
        scheduler = BackgroundScheduler(timezone="UTC")
        self._add(scheduler)
        scheduler.start()
        self._scheduler = scheduler
        return scheduler

    def start_async(self) -> AsyncIOScheduler:
        """The same inside a running asyncio loop (the HTTP server)."""
        scheduler = AsyncIOScheduler(timezone="UTC")
        self._add(scheduler)
        scheduler.start()
        self._scheduler = scheduler
        return scheduler

    def _add(self, scheduler: BackgroundScheduler | AsyncIOScheduler) -> None:
        from datetime import datetime

        # revocations issued through other processes on a shared database
        # (PostgreSQL): read them back now too, not at the next tick
        self.warden.store.on_revocation(self._revoked)
        for job in JOBS:  # each the first time at once (catching up after any downtime)
            scheduler.add_job(
                self._tick,
                "interval",
                args=[job],
                seconds=self.intervals[job],
                id=f"memwarden-{job}",
                max_instances=1,
                coalesce=True,
                next_run_time=datetime.now(UTC),
                misfire_grace_time=None,
            )

    def _tick(self, job: str) -> None:
        with structlog.contextvars.bound_contextvars(job=job):
            try:
                done = self.run_job(job)
            finally:
                _metrics.scheduler_ran()
            if done and job in ("expiry", "readback", "reverify"):
                log.info("scheduler_ran", done=done if isinstance(done, int) else len(done))

    def stop(self, wait: bool = True) -> None:
        """Stop after the job that is running, if any."""
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.shutdown(wait=wait)
        self._scheduler = None
        self.sink_worker.close()

    def run_forever(self, stop: threading.Event) -> None:
        self.start()
        try:
            while not stop.wait(0.5):
                pass
        finally:
            self.stop(wait=True)


_host = host_of  # the name the tests and older callers use
