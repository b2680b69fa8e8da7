"""The vector projection: per tenant, the current version's vectors of
each memory that may yet be used, searched for the closest to a query.

It proposes; the usable view decides. It holds the vectors of every
memory that is neither erased nor revoked, whatever else its status (the
gate, asked afterwards, says which may be used now): an erased or revoked
memory never is again, and leaves the index at the commit that takes it
out (``committed``, in the process that commits; every other node before
its next search, which first brings the index to the view it reads). The
tenant is the wall: each (tenant, vector length) has an index of its own,
and within it each agent a part of its own (``_vector_parts``), so a
search compares only vectors its caller may see.

A part is exact (numpy) up to ``exact_up_to`` vectors and HNSW (usearch,
``_vector_kinds``) past it. An exact part that outgrows the threshold
keeps answering while its HNSW graph is built beside it (``_vector_build``).

Every index has applied the log up to a position. A search first brings
it to the position of the view it is served from (the one ``min_seq``
waited for), so the index answers from at least the state the view does.
Catching up reads the memory events and revocations after the index's
position from the log, and the changed memories' current vectors and
scope from the view. A follower thread does the same as the log grows (on
PostgreSQL woken by the log's notifications, with a poll behind them;
``wait_for_events``), so searches seldom wait for it, on every node, each
with its own copy.

Persisted (``_vector_files``): each index is saved with its position
after ``save_after`` changes (and at close); opened again, it is caught
up from the log. A file that is missing, damaged or from another history
is rebuilt from the view. An erasure overwrites and deletes the files of
its tenant at once; the next save writes them again without the erased
vectors.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memwarden.events import get_logger

from ._access import Access
from ._named import VectorRow
from ._reads import CoveredRow, Covering, TakenAt
from ._selector import could_cover
from ._vector_build import Builds
from ._vector_files import IndexFiles
from ._wanted import Wanted

if TYPE_CHECKING:
    import numpy as np
    from memwarden.events import EventLog

    from ._vector_parts import TenantIndex

# numpy and usearch (``_vector_parts``, ``_vector_kinds``) are imported where a
# tenant's vectors are first read: a store that holds none, and every command
# that searches none, starts without them

log = get_logger("memwarden")


@functools.cache
def _followed() -> tuple[str, ...]:
    """The events the index follows: every memory event, and revocations
    (asked when it first reads the log: the event models load with it)."""
    from memwarden.events import EVENT_TYPES

    return (*(t for t in EVENT_TYPES if t.startswith("memory.")), "revocation.issued")


_CHUNK = 500  # memory ids per lookup of their vectors
_STOP_CHECK = 0.05  # seconds between the follower's looks at its stop


class VectorRows(Protocol):
    def vector_rows(
        self, tenant: str, dims: int, memory_ids: Sequence[str] | None = None, *, any_status: bool = False
    ) -> list[VectorRow]: ...


class VectorView(Protocol):
    """What the index reads of a view (``VectorReads`` is how ``SQLView``
    answers it): named here, not as the port's view reader, because the
    backends that implement the port import this module."""

    def position(self) -> int: ...
    def vectors(self) -> VectorRows: ...
    def covered(self, query: Covering) -> list[CoveredRow]: ...


class Followed(Protocol):
    """What the index needs of a store: its log, its view and news of the log."""

    @property
    def log(self) -> EventLog: ...
    def reading(self, floor: int = 0) -> AbstractContextManager[VectorView]: ...
    def wait_for_events(self, after_seq: int, timeout: float) -> int: ...


@dataclass(frozen=True)
class IndexSettings:
    """Where and how the vector index is kept.

    ``directory``: the index files' folder (None: ``<database>.vectors``
    beside an SQLite file; on PostgreSQL, none unless given: each node
    then builds its copy from the view when it starts). ``exact_up_to``:
    an agent's part of a tenant is searched exactly up to this many vectors
    (20,000: there an exact search of 384 dimensions takes about a
    millisecond, as long as the graph's; past it, the graph's time grows
    with the logarithm), and a filtered search compares exactly the
    vectors holding the filter up to as many.
    """

    directory: Path | None = None
    persist: bool = True
    exact_up_to: int = 20_000
    save_after: int = 1000  # changes to a tenant's index before the follower saves it
    # a saved file more changes behind the log than this is not caught up
    # but read again from the view (exact at once, its graph built beside):
    # catching up inserts each change into a graph, about 5,000 a second on
    # two cores, so opening takes seconds, not minutes, however far behind
    catch_up_most: int = 20_000
    poll: float = 0.5  # the follower's pause when the log is ahead of the view, or the store unreachable


class VectorIndex:
    """Every tenant's vector index in this process, caught up with the view it is searched in."""

    def __init__(self, store: Followed, settings: IndexSettings | None = None, directory: Path | None = None) -> None:
        self.settings = settings or IndexSettings()
        self._store = store
        folder = self.settings.directory or directory
        self.files = IndexFiles(folder) if folder is not None and self.settings.persist else None
        self._tenants: dict[tuple[str, int], TenantIndex] = {}
        self._lock = threading.RLock()  # after the store's read (``reading``), whose connection reads under it
        self._stop = threading.Event()
        self._follower: threading.Thread | None = None
        # vectors compared by searches in this process (exact rows scored,
        # distances the graph computed): what a search's work is measured in
        self.examined = 0
        self._builds = Builds(
            self._lock,
            self._stop,
            lambda t: self._tenants.get((t.tenant, t.dims)) is t,
            self.settings.exact_up_to,
            self.settings.save_after,
        )

    # -- searching ------------------------------------------------------------

    def nearest(
        self,
        view: VectorView,
        tenant: str,
        query: Any,
        k: int,
        *,
        access: Access,
        wanted: Wanted | None = None,
        floor: float = float("-inf"),
    ) -> list[tuple[str, float]]:
        """The ``k`` memories of ``tenant`` whose vectors are closest to
        ``query`` (cosine above ``floor``, best first, each memory once at
        its closest vector), in the state ``view`` reads, among those
        ``access`` may see and ``wanted`` asks for: confined and filtered
        before any vector is compared."""
        import numpy as np

        wanted = wanted or Wanted()
        if not access.allows_tenant(tenant):
            return []
        if access.agent is not None:
            if wanted.agent not in (None, access.agent):
                return []
            wanted = replace(wanted, agent=access.agent)
        q = np.asarray(query, dtype=np.float64)  # the norm in 64 bits, as ``normalised``
        norm = float(np.linalg.norm(q))
        if norm == 0.0:
            return []
        q = (q / norm).astype(np.float32)
        with self._lock:
            t = self._caught_up(view, tenant, len(q))
            found, examined = t.nearest(q, k, floor, wanted, self.settings.exact_up_to)
            self.examined += examined
            return found

    def held(self, tenant: str, dims: int, memory_id: str) -> np.ndarray | None:
        """The vectors (rows) ``tenant``'s index of ``dims`` holds for
        ``memory_id`` in this process (None: none, or that index is not open here)."""
        with self._lock:
            t = self._tenants.get((tenant, dims))
            return None if t is None else t.held(memory_id)

    def holding(self, view: VectorView, tenant: str, dims: int, memory_ids: Iterable[str]) -> list[str]:
        """Which of ``memory_ids`` ``tenant``'s index of ``dims`` holds once
        caught up with ``view`` (a read-back's question: none it covered)."""
        with self._lock:
            t = self._caught_up(view, tenant, dims)
            return [m for m in memory_ids if m in t.where]

    def dims_of(self, tenant: str) -> list[int]:
        """The vector lengths of ``tenant``'s indexes this process has opened."""
        with self._lock:
            return sorted(d for t, d in self._tenants if t == tenant)

    def _caught_up(self, view: VectorView, tenant: str, dims: int) -> TenantIndex:
        position = view.position()
        key = (tenant, dims)
        t = self._tenants.get(key)
        if t is None or position < t.position:
            # new here, or the store went back (a restore): from its file, or the view
            t = self._tenants[key] = self._opened(view, tenant, dims, position)
            self._follow()
        if t.position < position:
            self._catch_up([t], view, position)
        self._builds.start(t)
        return t

    def _opened(self, view: VectorView, tenant: str, dims: int, position: int) -> TenantIndex:
        from ._vector_parts import TenantIndex, changes_of

        saved = self.files.read(tenant, dims) if self.files is not None else None
        if saved is not None:
            at = saved.meta.get("position")
            if isinstance(at, int) and 0 <= at <= position and saved.meta.get("position_hash") == self._hash_at(at):
                try:
                    t = TenantIndex.load(tenant, dims, at, saved.meta, saved.payload)
                except (KeyError, IndexError, ValueError, TypeError, RuntimeError) as exc:
                    log.warning("vector_index_unreadable", tenant=tenant, problem=str(exc))
                else:
                    if self._catch_up([t], view, position, most=self.settings.catch_up_most):
                        return t
                    log.warning("vector_index_far_behind", tenant=tenant, position=at, view=position)
            else:
                log.warning("vector_index_stale", tenant=tenant, position=at, view=position)
        t = TenantIndex(tenant, dims, position)
        t.apply(changes_of(view.vectors().vector_rows(tenant, dims), (), dims))
        return t

    def _hash_at(self, position: int) -> str:
        """The hash of the event at ``position``: a file is this log's only if it names it."""
        if position == 0:
            return ""
        event = self._store.log.get(position)
        return event.hash if event is not None else "?"

    def _catch_up(self, tenants: list[TenantIndex], view: VectorView, position: int, most: int | None = None) -> bool:
        """Apply to each of ``tenants`` the memory events and revocations
        after its position, up to ``position``: the memories they changed
        take their current vectors and scope from the view (or leave).
        False, and nothing applied, when more than ``most`` memories of one
        tenant changed (each a graph insertion: a file that far behind is
        opened faster from the view)."""
        from ._vector_parts import changes_of

        names = {t.tenant for t in tenants}
        changed: dict[str, dict[str, int]] = {name: {} for name in names}
        erased: dict[str, int] = {}  # tenant -> the last erasure's seq
        revocations: list[tuple[int, dict[str, Any]]] = []
        start = min(t.position for t in tenants)
        for event in self._store.log.read(after_seq=start, until_seq=position, types=_followed()):
            if event.type == "revocation.issued":
                revocations.append((event.seq, event.payload))
                continue
            tenant = event.payload.get("tenant")
            seen = changed.get(tenant)  # type: ignore[arg-type]
            if seen is not None:
                seen[event.payload["memory_id"]] = event.seq
                if event.type == "memory.erased":
                    erased[tenant] = event.seq  # type: ignore[index]
        for t in tenants:
            destroyed = erased.get(t.tenant, 0) > t.position
            ids = [m for m, seq in changed[t.tenant].items() if seq > t.position]
            if most is not None and len(ids) > most:
                return False
            gone: set[str] = set()
            for seq, payload in revocations:
                if seq > t.position and could_cover(payload["selector"], t.tenant):
                    taken = TakenAt(payload["revocation_id"], seq, payload["selector"], tenant=t.tenant)
                    gone.update(c.memory_id for c in view.covered(taken) if c.memory_id in t.where)
            for at in range(0, len(ids), _CHUNK):
                chunk = ids[at : at + _CHUNK]
                t.apply(changes_of(view.vectors().vector_rows(t.tenant, t.dims, chunk), chunk, t.dims), scrub=destroyed)
            t.apply(((m, None, None) for m in gone), scrub=destroyed)
            t.position = position
            if destroyed:  # its file holds the erased vectors: saved again (overwriting it) at the next pass
                t.changes = max(t.changes, self.settings.save_after)
        return True

    # -- the graph past the threshold (``_vector_build``) ---------------------------

    @property
    def on_built(self) -> Callable[[str, str | None], None] | None:
        """Called on a builder's thread when a graph is built, before it is
        brought up to its part and swapped in (tests hold a build there)."""
        return self._builds.on_built

    @on_built.setter
    def on_built(self, hook: Callable[[str, str | None], None] | None) -> None:
        self._builds.on_built = hook

    def settle(self, timeout: float = 600.0) -> None:
        """Wait for the graphs being built (tests and benchmarks measure after them)."""
        self._builds.settle(timeout)

    # -- following the log -----------------------------------------------------

    def _follow(self) -> None:
        if self._follower is None and not self._stop.is_set():
            self._follower = threading.Thread(target=self._run, name="memwarden-vectors", daemon=True)
            self._follower.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                after = min((t.position for t in self._tenants.values()), default=0)
            try:
                # short waits, so that a close is not kept waiting for news
                if self._store.wait_for_events(after, _STOP_CHECK) <= after or self._stop.is_set():
                    continue
                if not self.follow_once():
                    self._stop.wait(self.settings.poll)  # the log is ahead of the view: no busy loop
            except Exception as exc:  # a closed or unreachable store: try again after a poll
                if self._stop.is_set():
                    return
                log.warning("vector_follow_failed", problem=str(exc).splitlines()[0] if str(exc) else repr(exc))
                self._stop.wait(self.settings.poll)

    def follow_once(self) -> bool:
        """Bring every index here up to the view, and save those due;
        whether any was behind."""
        with self._store.reading() as view, self._lock:
            position = view.position()
            behind = [t for t in self._tenants.values() if t.position < position]
            if behind:
                self._catch_up(behind, view, position)
            for t in behind:
                self._builds.start(t)
            due = [t for t in self._tenants.values() if t.changes >= self.settings.save_after]
        for t in due:
            self._save(t)
        return bool(behind)

    def committed(self, tenants: set[str] | None, erased: set[str]) -> None:
        """After a commit that took memories out (a revocation of
        ``tenants``, None: it names none, so any; an erasure in ``erased``):
        the indexes here follow it before the commit returns, and every file
        of an erased tenant is overwritten and deleted (the next save writes
        it again without the erased vectors)."""
        with self._store.reading() as view, self._lock:
            loaded = [t for t in self._tenants.values() if tenants is None or t.tenant in tenants | erased]
            if loaded:
                self._catch_up(loaded, view, max(view.position(), *(t.position for t in loaded)))
        if self.files is not None and erased:
            with self.files.locked():
                for tenant in erased:
                    self.files.remove(tenant)

    # -- files --------------------------------------------------------------------

    def _save(self, t: TenantIndex) -> None:
        if self.files is None:
            return
        with self.files.locked():
            with self._store.reading() as view, self._lock:
                if self._tenants.get((t.tenant, t.dims)) is not t:
                    return
                # caught up under the lock: never behind an erasure that deleted the file before it
                if t.position < view.position():
                    self._catch_up([t], view, view.position())
                meta, payload = t.dump()
                meta.update(position=t.position, position_hash=self._hash_at(t.position))
                t.changes = 0
            self.files.write(t.tenant, t.dims, meta, payload)

    def save(self) -> None:
        """Save every index with changes not yet on disk."""
        with self._lock:
            dirty = [t for t in self._tenants.values() if t.changes]
        for t in dirty:
            self._save(t)

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        follower = self._follower
        if follower is not None:
            follower.join(self.settings.poll + 1)
        self.settle(timeout=0.0)
        try:
            self.save()
        except Exception:  # the files are a cache: the next open catches up or rebuilds
            log.exception("vector_index_save_failed")

    # -- reporting ----------------------------------------------------------------

    def nbytes(self) -> int:
        with self._lock:
            return sum(t.nbytes() for t in self._tenants.values())

    def describe(self) -> list[dict[str, Any]]:
        """Each part held here: tenant, agent, vector length, kind, memories,
        vectors, position and where it was found."""
        with self._lock:
            return [d for t in self._tenants.values() for d in t.describe()]

    def tenants(self) -> Iterator[str]:
        with self._lock:
            yield from sorted({t.tenant for t in self._tenants.values()})
