"""Per host: after a failure, leave the host alone for a while, doubling.

One rule and one state per host for everything memwarden sends a host: a
source's fetches (the scheduler's re-verification) and a sink's deliveries
and probes. A host that fails backs off for the fetcher and the sink alike,
and one that answers either clears it for both. ``SharedBackoff`` keeps the
state in the store, so every node on one database (PostgreSQL) and a
restarted one leave a failing host alone together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlparse

from ._core import Core

# (base, ceiling) of a caller with its own rule (a sink's retry_base and retry_ceiling)
Rule = tuple[float, float]


@dataclass
class HostBackoff:
    """Per host: after a failure, wait before trying it again (in memory)."""

    base: float = 30.0
    ceiling: float = 3600.0
    failures: dict[str, int] = field(default_factory=dict)
    until: dict[str, float] = field(default_factory=dict)

    def ready(self, host: str, now: float) -> bool:
        return self.until.get(host, 0.0) <= now

    def waits_until(self, host: str) -> float:
        """The time before which ``host`` is left alone (0: it is not)."""
        return self.until.get(host, 0.0)

    def record(self, host: str, ok: bool, now: float, rule: Rule | None = None) -> float:
        """A try of ``host`` and whether it worked; the time before which it
        is left alone now (0 after a success). ``rule``: the caller's own
        (base, ceiling), else this backoff's."""
        if ok:
            self.failures.pop(host, None)
            self.until.pop(host, None)
            return 0.0
        n = self.failures[host] = self.failures.get(host, 0) + 1
        self.until[host] = now + self.delay(n, rule)
        return self.until[host]

    def delay(self, failures: int, rule: Rule | None = None) -> float:
        """How long to leave a host alone after ``failures`` in a row."""
        base, ceiling = rule or (self.base, self.ceiling)
        return min(base * 2 ** max(failures - 1, 0), ceiling)


class SharedBackoff(HostBackoff):
    """``HostBackoff``'s rule, kept in the store: every scheduler and sink
    worker on one database (any number of nodes on PostgreSQL) leaves a
    failing host alone together, and a restart remembers it."""

    def __init__(self, warden: Core, *, base: float = 30.0, ceiling: float = 3600.0) -> None:
        super().__init__(base=base, ceiling=ceiling)
        self.warden = warden

    def ready(self, host: str, now: float) -> bool:
        return self.waits_until(host) <= now

    def waits_until(self, host: str) -> float:
        with self.warden.reading() as view:
            held = view.side().backoff(host)
        return held.until if held is not None else 0.0

    def record(self, host: str, ok: bool, now: float, rule: Rule | None = None) -> float:
        if ok:
            with self.warden.reading() as view:
                if view.side().backoff(host) is None:
                    return 0.0  # the usual answer: nothing to clear, no write
            with self.warden.transaction() as tx:
                tx.view.clear_backoff(host)
            return 0.0
        with self.warden.transaction() as tx:
            held = tx.view.side().backoff(host)
            failures = (held.failures if held is not None else 0) + 1
            until = now + self.delay(failures, rule)
            tx.view.set_backoff(host, failures, until)
        return until


def host_of(url: str) -> str:
    """What a failure backs off: a network address's host (and port);
    otherwise the address itself (one callable, one file, one repository),
    so that one failing callable does not hold back every other."""
    return urlparse(url).netloc or url
