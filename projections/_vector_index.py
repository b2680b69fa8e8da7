"""The vector projection: per tenant, the current version's embedding of
each memory, searched for the closest to a query.

It proposes; the usable view decides. It holds every memory that has a
vector, whatever its status (the gate, asked afterwards, says which may be
used now). The tenant is the wall: each (tenant, vector length) has an
index of its own, and no search reads another tenant's vectors.

A tenant's index is exact (numpy) up to ``exact_up_to`` vectors and HNSW
(usearch, ``_vector_kinds``) past it. An exact index that outgrows the
threshold keeps answering while its HNSW graph is built on another
thread; the graph, built from the vectors at one position, is caught up
from the log and takes over.

Every index has applied the log up to a position. A search first brings
it to the position of the view it is served from (the one ``min_seq``
waited for), so the index answers from at least the state the view does.
Catching up reads the memory events after the index's position from the
log and reads those memories' current vectors from the view: a new
version's vector replaces the old one; an erased memory's leaves. A
follower thread does the same as the log grows (on PostgreSQL woken by
the log's notifications, with a poll behind them; ``wait_for_events``),
so searches seldom wait for it, on every node, each with its own copy.

Persisted (``_vector_files``): each index is saved with its position
after ``save_after`` changes (and at close); opened again, it is caught
up from the log. A file that is missing, damaged or from another history
is rebuilt from the view. An erasure deletes the files of its tenant at
once; the next save writes them again without the erased vectors.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import structlog
from memwarden.events import EVENT_TYPES

from ._named import VectorChange
from ._vector_files import IndexFiles
from ._vector_kinds import KINDS, Exact, Hnsw, normalised

if TYPE_CHECKING:
    from memwarden.events import EventLog

log = structlog.get_logger("memwarden")

MEMORY_EVENTS = tuple(t for t in EVENT_TYPES if t.startswith("memory."))
_CHUNK = 500  # memory ids per lookup of their vectors
_STOP_CHECK = 0.05  # seconds between the follower's looks at its stop


class VectorReads:
    """The view's questions for the vector projection (a mixin of ``SQLView``)."""

    conn: Any

    def vectors_since(self, tenant: str, dims: int, after_seq: int) -> list[VectorChange]:
        """(memory_id, vector bytes or None) of the tenant's memories changed
        after ``after_seq``: None where the current version has no vector of
        ``dims`` (never had one, or it was erased)."""
        return list(
            map(
                VectorChange._make,
                self.conn.execute(
                    "SELECT m.memory_id, v.vector FROM memories m LEFT JOIN vectors v ON v.tenant = m.tenant "
                    "AND v.memory_id = m.memory_id AND v.version = m.version AND v.dims = ? "
                    "WHERE m.tenant = ? AND m.last_seq > ?",
                    (dims, tenant, after_seq),
                ),
            )
        )

    def current_vectors(self, tenant: str, dims: int, memory_ids: list[str]) -> dict[str, Any]:
        """The vector bytes of the current version of each of ``memory_ids``
        that has one of ``dims`` (the others are absent)."""
        if not memory_ids:
            return {}
        marks = ",".join("?" * len(memory_ids))
        return dict(
            self.conn.execute(
                "SELECT m.memory_id, v.vector FROM memories m JOIN vectors v ON v.tenant = m.tenant "
                f"AND v.memory_id = m.memory_id AND v.version = m.version AND v.dims = ? "
                f"WHERE m.tenant = ? AND m.memory_id IN ({marks})",
                (dims, tenant, *memory_ids),
            )
        )


class VectorView(Protocol):
    """What the index reads of a view (``VectorReads`` is how ``SQLView``
    answers it): named here, not as the port's view reader, because the
    backends that implement the port import this module."""

    def position(self) -> int: ...
    def vectors_since(self, tenant: str, dims: int, after_seq: int) -> list[VectorChange]: ...
    def current_vectors(self, tenant: str, dims: int, memory_ids: list[str]) -> dict[str, Any]: ...


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
    a tenant is searched exactly up to this many vectors (20,000: there an
    exact search of 384 dimensions takes about a millisecond, as long as
    the graph's; past it, the graph's time grows with the logarithm).
    """

    directory: Path | None = None
    persist: bool = True
    exact_up_to: int = 20_000
    save_after: int = 1000  # changes to a tenant's index before the follower saves it
    poll: float = 0.5  # the follower's pause when the log is ahead of the view, or the store unreachable


@dataclass
class _Tenant:
    tenant: str
    dims: int
    index: Exact | Hnsw
    position: int
    changes: int = 0  # since it was last saved
    building: bool = False  # its HNSW graph is being built
    opened_from: str = "view"  # or "file": where this process found it


@dataclass
class _Threads:
    follower: threading.Thread | None = None
    builders: list[threading.Thread] = field(default_factory=list)


class VectorIndex:
    """Every tenant's vector index in this process, caught up with the view it is searched in."""

    def __init__(self, store: Followed, settings: IndexSettings | None = None, directory: Path | None = None) -> None:
        self.settings = settings or IndexSettings()
        self._store = store
        folder = self.settings.directory or directory
        self.files = IndexFiles(folder) if folder is not None and self.settings.persist else None
        self._tenants: dict[tuple[str, int], _Tenant] = {}
        self._lock = threading.RLock()  # always taken after the store's own (inside ``reading``)
        self._stop = threading.Event()
        self._threads = _Threads()

    # -- searching ------------------------------------------------------------

    def nearest(self, view: VectorView, tenant: str, query: Any, k: int) -> list[tuple[str, float]]:
        """The ``k`` memories of ``tenant`` whose vectors are closest to
        ``query`` (cosine, best first), in the state ``view`` reads."""
        q = np.asarray(query, dtype=np.float64)  # the norm in 64 bits, as ``normalised``
        norm = float(np.linalg.norm(q))
        if norm == 0.0:
            return []
        q = (q / norm).astype(np.float32)
        with self._lock:
            return self._caught_up(view, tenant, len(q)).index.nearest(q, k)[0]

    def held(self, tenant: str, dims: int, memory_id: str) -> np.ndarray | None:
        """The vectors (rows) ``tenant``'s index of ``dims`` holds for
        ``memory_id`` in this process (None: none, or that index is not open here)."""
        with self._lock:
            t = self._tenants.get((tenant, dims))
            return None if t is None else t.index.held(memory_id)

    def dims_of(self, tenant: str) -> list[int]:
        """The vector lengths of ``tenant``'s indexes this process has opened."""
        with self._lock:
            return sorted(d for t, d in self._tenants if t == tenant)

    def _caught_up(self, view: VectorView, tenant: str, dims: int) -> _Tenant:
        position = view.position()
        key = (tenant, dims)
        t = self._tenants.get(key)
        if t is None or position < t.position:
            # new here, or the store went back (a restore): from its file, or the view
            t = self._tenants[key] = self._opened(view, tenant, dims, position)
            self._follow()
        if t.position < position:
            self._catch_up([t], view, position)
        self._maybe_build(t)
        return t

    def _opened(self, view: VectorView, tenant: str, dims: int, position: int) -> _Tenant:
        saved = self.files.read(tenant, dims) if self.files is not None else None
        if saved is not None:
            at = saved.meta.get("position")
            if isinstance(at, int) and 0 <= at <= position and saved.meta.get("position_hash") == self._hash_at(at):
                try:
                    index = KINDS[saved.meta["kind"]].load(dims, saved.meta, saved.payload)
                except (KeyError, ValueError, TypeError, RuntimeError) as exc:
                    log.warning("vector_index_unreadable", tenant=tenant, problem=str(exc))
                else:
                    t = _Tenant(tenant, dims, index, at, opened_from="file")
                    self._catch_up([t], view, position)
                    return t
            else:
                log.warning("vector_index_stale", tenant=tenant, position=at, view=position)
        exact = Exact(dims)
        for memory_id, data in view.vectors_since(tenant, dims, 0):
            if data is not None:
                exact.put(memory_id, normalised(data, dims))
        return _Tenant(tenant, dims, exact, position, changes=len(exact))

    def _hash_at(self, position: int) -> str:
        """The hash of the event at ``position``: a file is this log's only if it names it."""
        if position == 0:
            return ""
        event = self._store.log.get(position)
        return event.hash if event is not None else "?"

    def _catch_up(self, tenants: list[_Tenant], view: VectorView, position: int) -> None:
        """Apply to each of ``tenants`` the memory events after its position, up to ``position``."""
        by_name: dict[str, list[_Tenant]] = {}
        for t in tenants:
            by_name.setdefault(t.tenant, []).append(t)
        changed: dict[str, dict[str, int]] = {name: {} for name in by_name}
        start = min(t.position for t in tenants)
        for event in self._store.log.read(after_seq=start, until_seq=position, types=MEMORY_EVENTS):
            seen = changed.get(event.payload.get("tenant"))  # type: ignore[arg-type]
            if seen is not None:
                seen[event.payload["memory_id"]] = event.seq
        for name, group in by_name.items():
            for t in group:
                ids = [m for m, seq in changed[name].items() if seq > t.position]
                for at in range(0, len(ids), _CHUNK):
                    chunk = ids[at : at + _CHUNK]
                    vectors = view.current_vectors(name, t.dims, chunk)
                    t.index.put_many(
                        [(m, None if (d := vectors.get(m)) is None else normalised(d, t.dims)) for m in chunk]
                    )
                t.index.scrub()  # a removed vector's bytes leave memory with the catch-up
                t.position = position
                t.changes += len(ids)

    # -- the graph past the threshold ----------------------------------------------

    def _maybe_build(self, t: _Tenant) -> None:
        if t.building or not isinstance(t.index, Exact) or len(t.index) <= self.settings.exact_up_to:
            return
        t.building = True
        ids, rows = t.index.live()
        builder = threading.Thread(
            target=self._build, args=(t, ids, rows, t.position), name="memwarden-hnsw", daemon=True
        )
        self._threads.builders.append(builder)
        builder.start()

    def _build(self, t: _Tenant, ids: list[str], rows: np.ndarray, at: int) -> None:
        started = time.monotonic()
        try:
            graph = _Tenant(t.tenant, t.dims, Hnsw.built(t.dims, ids, rows), at, opened_from=t.opened_from)
            if self._stop.is_set():
                return
            with self._store.reading() as view, self._lock:
                if self._tenants.get((t.tenant, t.dims)) is not t:
                    return  # replaced meanwhile (a restore): that one builds its own
                self._catch_up([graph], view, max(view.position(), t.position))
                graph.changes = max(t.changes, self.settings.save_after)  # saved by the next pass
                self._tenants[(t.tenant, t.dims)] = graph
            log.info(
                "vector_graph_built", tenant=t.tenant, vectors=len(ids), seconds=round(time.monotonic() - started, 2)
            )
        except Exception:  # the exact index goes on answering; the next search tries again
            log.exception("vector_graph_failed", tenant=t.tenant)
            t.building = False

    def settle(self, timeout: float = 600.0) -> None:
        """Wait for the graphs being built (tests and benchmarks measure after them)."""
        deadline = time.monotonic() + timeout
        while self._threads.builders:
            builder = self._threads.builders.pop()
            builder.join(max(0.0, deadline - time.monotonic()))

    # -- following the log -----------------------------------------------------

    def _follow(self) -> None:
        if self._threads.follower is None and not self._stop.is_set():
            self._threads.follower = threading.Thread(target=self._run, name="memwarden-vectors", daemon=True)
            self._threads.follower.start()

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
                self._maybe_build(t)
            due = [t for t in self._tenants.values() if t.changes >= self.settings.save_after]
        for t in due:
            self._save(t)
        return bool(behind)

    # -- files --------------------------------------------------------------------

    def _save(self, t: _Tenant) -> None:
        if self.files is None:
            return
        with self.files.locked():
            with self._store.reading() as view, self._lock:
                if self._tenants.get((t.tenant, t.dims)) is not t:
                    return
                # caught up under the lock: never behind an erasure that deleted the file before it
                if t.position < view.position():
                    self._catch_up([t], view, view.position())
                meta, payload = t.index.dump()
                meta.update(position=t.position, position_hash=self._hash_at(t.position))
                t.changes = 0
            self.files.write(t.tenant, t.dims, meta, payload)

    def save(self) -> None:
        """Save every index with changes not yet on disk."""
        with self._lock:
            dirty = [t for t in self._tenants.values() if t.changes]
        for t in dirty:
            self._save(t)

    def erased(self, tenants: set[str]) -> None:
        """After an erasure committed in ``tenants``: the vectors leave the
        indexes here and every file of those tenants is deleted (the next
        save writes them again without them)."""
        with self._store.reading() as view, self._lock:
            loaded = [t for t in self._tenants.values() if t.tenant in tenants]
            if loaded:
                self._catch_up(loaded, view, max(view.position(), *(t.position for t in loaded)))
            for t in loaded:
                t.changes = max(t.changes, self.settings.save_after)
        if self.files is not None:
            with self.files.locked():
                for tenant in tenants:
                    self.files.remove(tenant)

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        follower = self._threads.follower
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
            return sum(t.index.nbytes() for t in self._tenants.values())

    def describe(self) -> list[dict[str, Any]]:
        """Each index held here: tenant, vector length, kind, vectors, position."""
        with self._lock:
            return [
                {
                    "tenant": t.tenant,
                    "dims": t.dims,
                    "kind": t.index.kind,
                    "vectors": len(t.index),
                    "position": t.position,
                    "opened_from": t.opened_from,
                }
                for t in self._tenants.values()
            ]

    def tenants(self) -> Iterator[str]:
        with self._lock:
            yield from sorted({t.tenant for t in self._tenants.values()})
