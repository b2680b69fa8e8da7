"""Delivering the outbox and reading each sink back.

Each sink has a line: its notices in log order, the head delivered before
the next is tried (``Outbox.take_head``). A node takes the head under a
lease; a node killed mid-delivery leaves a lease that runs out, and the
next node to look delivers it again (at least once: the notice id is the
receiver's idempotency key). A failed attempt backs the sink's host off
in the state the scheduler's fetches share (``SharedBackoff``: every node,
and the sources on that host, wait with it), doubling from the sink's
``retry_base`` to its ``retry_ceiling``; while its host waits, the line
waits. Past ``max_attempts`` the notice is a dead letter, the line goes on,
and ``redeliver`` puts it back.

A revocation's read-back per sink asks, once its notice is delivered,
which of the covered ids the sink still holds: none is ``confirmed`` (with
the time from the revocation's commit), some is ``leaked`` (with exactly
those ids), no answer is ``unreachable``; asked again until confirmed or
the sink's ``readback_deadline``. How a sink is asked depends on its kind:
a Redis ``EXISTS``, a webhook's signed probe or its signed
acknowledgements (``_acks``), the engine's own vector index through
recall (``_index``). Each outcome an auditor must see (confirmed, a
leak when found, the state at the deadline) is an event in the log
(``_records``), written with the row's update.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from memwarden.events import get_logger, parse_ts

from .. import _metrics
from .._backoff import HostBackoff, SharedBackoff, host_of
from .._core import Core
from .._errors import AckRefused, InvalidInput, SinkNotFound, SinkUnavailable
from ._acks import accept_ack
from ._clients import Reply, SinkClient, client_for
from ._config import SinkSpec
from ._index import IndexSink
from ._records import deadline_event, outcome_event, record

log = get_logger("memwarden.sinks")

# the notices one run delivers to one sink at most, so one busy sink cannot
# hold the scheduler's other jobs for long
PER_RUN = 500


def sink_host(url: str) -> str:
    """The host a sink's failures back off, as the fetcher names a source's."""
    return host_of(url)


def retry_delay(spec: SinkSpec, failures: int) -> float:
    """How long to leave a sink alone after ``failures`` in a row."""
    return min(spec.retry_base * 2 ** max(failures - 1, 0), spec.retry_ceiling)


class SinkWorker:
    """Delivers and reads back for one process (a node): holds a client per
    sink and names itself in the leases it takes."""

    def __init__(self, core: Core, *, owner: str | None = None, backoff: HostBackoff | None = None) -> None:
        self.core = core
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._clients: dict[str, SinkClient] = {}
        # the scheduler's per-host state (in the store, every node's): a host
        # that fails backs off for its fetches and its sink alike
        self.backoff = backoff if backoff is not None else SharedBackoff(core, base=core.fetchers.backoff)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def spec(self, name: str) -> SinkSpec:
        for spec in self.core.sinks:
            if spec.name == name:
                return spec
        raise SinkNotFound("sink", name)

    def client(self, spec: SinkSpec) -> SinkClient:
        if spec.name not in self._clients:
            self._clients[spec.name] = (
                IndexSink(spec, self.core)
                if spec.kind == "index"
                else client_for(spec, self.core.fetchers, self.core.clock)
            )
        return self._clients[spec.name]

    def _now(self) -> float:
        return self.core.clock.now().timestamp()

    # -- delivery ------------------------------------------------------------------------

    def deliver(self, spec: SinkSpec, limit: int = PER_RUN) -> dict[str, Any]:
        """Deliver ``spec``'s line from its head until it is empty, its head
        is not due (waiting after a failure) or held by another node; none
        while its host is backing off (``waiting_until`` says until when)."""
        done: dict[str, Any] = {"delivered": 0, "failed": 0, "dead": 0}
        host = sink_host(spec.url)
        if not self.backoff.ready(host, self._now()):
            # failed lately, for a fetch or a delivery: the head waits for the host
            done["waiting_until"] = self.backoff.waits_until(host)
            return done
        for _ in range(limit):
            with self.core.store.outbox() as outbox:
                notice = outbox.take_head(spec.name, self.owner, self._now(), spec.lease)
            if notice is None:
                break
            try:
                reply = self.client(spec).deliver(notice["notice_id"], notice["body"])
            except (SinkUnavailable, InvalidInput) as exc:
                state = self._failed(spec, notice, str(exc))
                done["dead" if state == "dead" else "failed"] += 1
                _metrics.SINK_DELIVERIES.labels(spec.name, state if state == "dead" else "failed").inc()
                # a pending head waits, and nothing behind it may overtake it;
                # behind a dead letter the line goes on once its host may be tried
                break
            with self.core.store.outbox() as outbox:
                outbox.delivered(spec.name, notice["notice_id"], self.core.now())
            if not done["delivered"]:
                self.backoff.record(host, True, self._now())  # it answers: clear it for every caller
            done["delivered"] += 1
            _metrics.SINK_DELIVERIES.labels(spec.name, "delivered").inc()
            if reply is not None:
                self._acknowledged(spec, reply)
        return done

    def _acknowledged(self, spec: SinkSpec, reply: Reply) -> None:
        # the delivery stands (the sink answered 2xx); an acknowledgement that
        # does not verify only leaves the read-back waiting for a genuine one
        try:
            accept_ack(self.core, spec, *reply)
        except (AckRefused, InvalidInput, SinkNotFound) as exc:
            log.warning("sink_ack_refused", sink=spec.name, problem=str(exc))

    def _failed(self, spec: SinkSpec, notice: dict[str, Any], error: str) -> str:
        now = self._now()
        # the host backs off by the sink's own rule, in the state it shares
        # with the fetcher; the notice waits at least as long as the host
        until = self.backoff.record(sink_host(spec.url), False, now, (spec.retry_base, spec.retry_ceiling))
        next_at = max(until, now + retry_delay(spec, notice["attempts"] + 1))
        with self.core.store.outbox() as outbox:
            state = outbox.failed(spec.name, notice["notice_id"], self.owner, error, next_at, spec.max_attempts)
        if state == "dead":
            log.error("sink_notice_dead", sink=spec.name, notice_id=notice["notice_id"], error=error)
        else:
            log.warning("sink_delivery_failed", sink=spec.name, notice_id=notice["notice_id"], error=error)
        return state

    # -- read-back -----------------------------------------------------------------------

    def read_back(self, revocation_id: str | None = None, sinks: list[str] | None = None) -> list[dict[str, Any]]:
        """Every open read-back due now (of one revocation, when named): each
        recorded as it stands. The rows written."""
        names = sinks if sinks is not None else [s.name for s in self.core.sinks]
        with self.core.reading() as view:
            rows = view.outbox().open_readbacks(self._now(), names)
        if revocation_id is not None:
            rows = [r for r in rows if r["revocation_id"] == revocation_id]
        return [self._read_back_one(self.spec(row["sink"]), row) for row in rows]

    def _read_back_one(self, spec: SinkSpec, row: dict[str, Any]) -> dict[str, Any]:
        with self.core.reading() as view:
            notice = view.outbox().notice(spec.name, row["notice_id"])
        assert notice is not None  # written in the same commit as the read-back row
        body = orjson.loads(notice["body"])
        now = self._now()
        leaked: list[str] = []
        latency: float | None = None
        if notice["state"] == "pending":
            status = "pending" if not notice["attempts"] else "unreachable"
            detail = notice["last_error"]
            next_at = max(notice["next_at"], now)
        elif notice["state"] == "dead":
            status, detail, next_at = "unreachable", f"dead letter: {notice['last_error']}", now + spec.retry_ceiling
        elif spec.ack:
            # read back from what the sink acknowledged, signed: nothing to ask it
            next_at = now + retry_delay(spec, row["attempts"] + 1)
            with self.core.reading() as view:
                removed = view.outbox().removed(spec.name, notice["notice_id"])
            if removed is None:
                status, detail = "unreachable", "no signed acknowledgement from the sink yet"
            else:
                leaked = sorted({m for t, ms in body["ids"].items() for m in ms if m not in removed.get(t, ())})
                status, detail = ("leaked" if leaked else "confirmed"), None
                if not leaked:
                    latency = max((now - parse_ts(body["recorded_at"]).timestamp()) * 1000, 0.0)
        else:
            host = sink_host(spec.probe_url or spec.url)
            next_at = now + retry_delay(spec, row["attempts"] + 1)
            if not self.backoff.ready(host, now):
                # the probe's host failed lately (a fetch, a delivery, a probe): asked once it may be
                status, detail = "unreachable", f"{host} is left alone after failures (shared with fetches)"
                next_at = max(next_at, self.backoff.waits_until(host))
            else:
                try:
                    held = self.client(spec).held(notice["notice_id"], body["ids"])
                except (SinkUnavailable, InvalidInput) as exc:
                    status, detail = "unreachable", str(exc)
                    until = self.backoff.record(host, False, now, (spec.retry_base, spec.retry_ceiling))
                    next_at = max(next_at, until)
                else:
                    self.backoff.record(host, True, now)
                    leaked = sorted({m for ms in held.values() for m in ms})
                    status, detail = ("leaked" if leaked else "confirmed"), None
                    if not leaked:
                        latency = max((now - parse_ts(body["recorded_at"]).timestamp()) * 1000, 0.0)
        state = {
            "status": status,
            "latency_ms": latency,
            "leaked": leaked,
            "detail": detail,
            "next_at": next_at,
            "checked_at": self.core.now(),
        }
        # an outcome an auditor must see goes into the log with the row's
        # update: confirmed (final), a leak when found or when what leaks changes
        event = None
        if status == "confirmed":
            event = outcome_event(spec, row, status, final=True, latency_ms=latency, attempts=row["attempts"] + 1)
        elif status == "leaked" and (row["status"] != "leaked" or row["leaked_ids"] != leaked):
            event = outcome_event(spec, row, status, final=False, leaked=leaked, attempts=row["attempts"] + 1)
        if event is not None:
            record(self.core, event, state)
        else:
            with self.core.store.outbox() as outbox:
                outbox.set_readback(row["revocation_id"], spec.name, **state)
        if status != "pending":
            _metrics.SINK_READBACKS.labels(spec.name, status).inc()
        if latency is not None:
            _metrics.SINK_READBACK_LATENCY.labels(spec.name).observe(latency / 1000)
        if status == "leaked":
            log.error("sink_readback_leaked", sink=spec.name, revocation_id=row["revocation_id"], leaked=leaked[:20])
        return {**row, "status": status, "latency_ms": latency, "leaked_ids": leaked, "detail": detail}

    # -- one pass, as the scheduler runs it --------------------------------------------------

    def close_deadlines(self, spec: SinkSpec) -> int:
        """Record, as its final outcome, the state each of ``spec``'s
        read-backs was left in when its deadline passed; how many."""
        with self.core.reading() as view:
            outbox = view.outbox()
            rows = outbox.unsettled_past_deadline(self._now(), [spec.name])
            errors = {r["notice_id"]: (outbox.notice(spec.name, r["notice_id"]) or {}).get("last_error") for r in rows}
        for row in rows:
            event = deadline_event(spec, row, errors[row["notice_id"]])
            record(self.core, event)
            if event.outcome != "confirmed":
                log.error(
                    "sink_readback_deadline",
                    sink=spec.name,
                    revocation_id=row["revocation_id"],
                    outcome=event.outcome,
                    leaked=list(event.leaked_ids[:20]),
                )
        return len(rows)

    def run_sink(self, spec: SinkSpec) -> dict[str, Any]:
        """One sink's delivery and read-back: what a scheduler job runs, so a
        failing sink fails alone."""
        delivered = self.deliver(spec)
        checked = self.read_back(sinks=[spec.name])
        closed = self.close_deadlines(spec)
        out = {**delivered, "read_back": len(checked)}
        if closed:
            out["closed_at_deadline"] = closed
        return out

    def settle(self, revocation_id: str, wait: float = 0.0) -> list[dict[str, Any]]:
        """Try a revocation's sinks now: deliver their lines up to its notice
        and read it back, for up to ``wait`` seconds; its sinks' states as they stand."""
        deadline = time.monotonic() + wait
        while True:
            with self.core.reading() as view:
                rows = view.outbox().readbacks(revocation_id)
            # each sink on its own thread: the slowest sink, not their sum, is the wait
            open_sinks = [self.spec(r["sink"]) for r in rows if r["status"] != "confirmed"]
            for spec in open_sinks:
                self.client(spec)  # made here, not raced for by the threads
            with ThreadPoolExecutor(max_workers=max(len(open_sinks), 1)) as pool:
                list(pool.map(lambda spec: self._settle_one(spec, revocation_id), open_sinks))
            with self.core.reading() as view:
                rows = view.outbox().readbacks(revocation_id)
            if all(r["status"] == "confirmed" for r in rows) or time.monotonic() >= deadline:
                return [sink_line(r) for r in rows]
            time.sleep(0.05)

    def _settle_one(self, spec: SinkSpec, revocation_id: str) -> None:
        self.deliver(spec)
        self.read_back(revocation_id, sinks=[spec.name])


def sink_line(row: dict[str, Any]) -> dict[str, Any]:
    """A sink's read-back of a revocation as every face shows it."""
    return {
        "sink": row["sink"],
        "status": row["status"],
        "covered": row["covered"],
        "latency_ms": row["latency_ms"],
        "leaked_ids": row["leaked_ids"],
        "attempts": row["attempts"],
        "checked_at": row["checked_at"],
        "detail": row["detail"],
        "final_seq": row.get("final_seq"),
    }
