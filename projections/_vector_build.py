"""The graph past the threshold: an agent's exact part that outgrows
``IndexSettings.exact_up_to`` keeps answering while its HNSW graph is
built on a thread of its own from a snapshot of its rows; the changes
made to the part meanwhile are applied to the graph outside the lock, in
rounds, and the graph takes over once few are left (``SWAP_AT``, applied
under the lock). A build never blocks a search, a revocation or a
catch-up: they go on against the exact part, which records in its
``dirty`` set what the graph has yet to take.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from memwarden.events import get_logger

if TYPE_CHECKING:
    import numpy as np

    from ._vector_parts import Part, TenantIndex

log = get_logger("memwarden")

# a graph built beside its exact part takes over when at most this many
# changes are left to apply to it (under the lock: about a tenth of a second)
SWAP_AT = 256


class Builds:
    """The graph builds of one process's vector index, under its lock.

    ``current(t)``: whether ``t`` is still the open index of its tenant (a
    restore replaces it; that one builds its own). ``on_built`` is called
    on a builder's thread when a graph is built, before it is brought up
    to its part and swapped in (tests hold a build there)."""

    def __init__(
        self,
        lock: threading.RLock,
        stop: threading.Event,
        current: Callable[[TenantIndex], bool],
        exact_up_to: int,
        save_after: int,
    ) -> None:
        self._lock = lock
        self._stop = stop
        self._current = current
        self.exact_up_to = exact_up_to
        self.save_after = save_after
        self.on_built: Callable[[str, str | None], None] | None = None
        self.threads: list[threading.Thread] = []

    def start(self, t: TenantIndex) -> None:
        """A build, on a thread, for each exact part of ``t`` past the
        threshold and not being built (called under the lock)."""
        from ._vector_kinds import Exact

        for agent, part in t.parts.items():
            if part.dirty is not None or not isinstance(part.index, Exact):
                continue
            if len(part.index) <= self.exact_up_to:
                continue
            part.dirty = set()
            ids, rows = part.index.live()
            builder = threading.Thread(
                target=self._build, args=(t, agent, part, ids, rows), name="memwarden-hnsw", daemon=True
            )
            self.threads.append(builder)
            builder.start()

    def _build(self, t: TenantIndex, agent: str | None, part: Part, ids: list[str], rows: np.ndarray) -> None:
        """The graph of a snapshot of ``part``, built and brought up to the
        part beside it, outside the lock; the lock is taken only to read
        what changed since the last look, and to swap once few changes are
        left to apply."""
        from ._vector_kinds import Hnsw

        started = time.monotonic()
        try:
            graph = Hnsw.built(t.dims, ids, rows)
            if self.on_built is not None:
                self.on_built(t.tenant, agent)
            while not self._stop.is_set():
                with self._lock:
                    if not self._current(t) or t.parts.get(agent) is not part:
                        return  # replaced meanwhile (a restore, or the part emptied): that one builds its own
                    # what changed in the part since the last look, as the exact part holds it now
                    changed = sorted(part.dirty or ())
                    changes = [(m, part.index.held(m)) for m in changed]
                    if len(changes) <= SWAP_AT:
                        graph.put_many(changes)
                        graph.scrub()
                        part.index, part.dirty = graph, None
                        t.changes = max(t.changes, self.save_after)  # saved by the next pass
                        break
                    part.dirty = set()
                graph.put_many(changes)
                graph.scrub()  # a removed vector's bytes leave the slot before the graph serves
            else:
                return
            log.info(
                "vector_graph_built",
                tenant=t.tenant,
                agent=agent,
                vectors=len(ids),
                seconds=round(time.monotonic() - started, 2),
            )
        except Exception:  # the exact part goes on answering; the next search tries again
            log.exception("vector_graph_failed", tenant=t.tenant)
            with self._lock:
                part.dirty = None

    def settle(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the graphs being built."""
        deadline = time.monotonic() + timeout
        while self.threads:
            builder = self.threads.pop()
            builder.join(max(0.0, deadline - time.monotonic()))
