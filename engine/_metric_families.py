"""The Prometheus families, in one registry of this process; imported by
``_metrics`` when something is first counted (it says why)."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from ._gate import decisions

REGISTRY = CollectorRegistry(auto_describe=True)

SAVES = Counter("memwarden_saves", "Memories saved (each new version).", registry=REGISTRY)
EVENTS = Counter("memwarden_events_appended", "Events appended to the log by this process.", registry=REGISTRY)
REVOCATIONS = Counter("memwarden_revocations", "Revocations issued.", registry=REGISTRY)
READBACK = Histogram(
    "memwarden_readback_latency_seconds",
    "From a revocation's commit to its read-back record.",
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 30, 60, 300),
    registry=REGISTRY,
)
SINK_DELIVERIES = Counter(
    "memwarden_sink_deliveries",
    "Notice delivery attempts per sink, by outcome (delivered, failed, dead).",
    ["sink", "outcome"],
    registry=REGISTRY,
)
SINK_READBACKS = Counter(
    "memwarden_sink_readbacks",
    "Read-backs of a sink, by what they found (confirmed, leaked, unreachable).",
    ["sink", "status"],
    registry=REGISTRY,
)
SINK_READBACK_LATENCY = Histogram(
    "memwarden_sink_readback_latency_seconds",
    "From a revocation's commit to a sink's confirmed read-back.",
    ["sink"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 30, 60, 300),
    registry=REGISTRY,
)
SCHEDULER_LAST_RUN = Gauge(
    "memwarden_scheduler_last_run_timestamp_seconds",
    "When the scheduler's jobs last ran (Unix time).",
    registry=REGISTRY,
)
SCHEDULER_LAG = Gauge(
    "memwarden_scheduler_lag_seconds", "Seconds since the scheduler's jobs last ran.", registry=REGISTRY
)
SCHEDULER_FAILURES = Counter("memwarden_scheduler_job_failures", "Scheduler runs that failed.", registry=REGISTRY)
FETCH_FAILURES = Counter(
    "memwarden_fetch_failures", "Failed fetches of a source, by category.", ["category"], registry=REGISTRY
)
VIEW_POSITION = Gauge("memwarden_view_position", "The seq the usable view has folded up to.", registry=REGISTRY)
HEAD = Gauge("memwarden_log_head", "The log's head seq.", registry=REGISTRY)
REQUESTS_SHED = Counter(
    "memwarden_requests_shed", "HTTP requests answered 429: their caller's lane was full.", registry=REGISTRY
)


class _GateDecisions(Collector):
    """The gate's own counts (``_gate.decisions``), read when /metrics is asked."""

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "memwarden_gate_decisions", "Usability decisions, by reason (usable: allowed).", labels=["reason"]
        )
        for reason, count in sorted(decisions().items()):
            family.add_metric([reason], count)
        yield family


REGISTRY.register(_GateDecisions())

_last_run: list[float] = []


def scheduler_ran() -> None:
    now = time.time()
    _last_run[:] = [now]
    SCHEDULER_LAST_RUN.set(now)


def scheduler_lag() -> float | None:
    """Seconds since the scheduler last ran in this process (None: never)."""
    return time.time() - _last_run[0] if _last_run else None
