"""What the Warden owns: the store, the clock, the rules it applies, and
consistent reads. Every operation (saving, reading, revoking, verifying,
history) is a function of this in a module of its own."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from memwarden.events import (
    Clock,
    EventLog,
    SQLiteOptions,
    Synchronous,
    SystemClock,
    check_storable,
    format_ts,
    get_logger,
    private_folder,
    unstorable,
)
from memwarden.projections import IndexSettings, MemoryRow, VectorIndex, open_store

from . import _metrics
from ._derivation import cascade
from ._errors import AmbiguousMemory, InvalidInput, MemoryNotFound, StaleView, StoreDamaged
from ._fetchers import Fetchers
from ._group_commit import GroupCommit
from ._joined import Joined
from ._limits import Limits
from ._policy import TtlPolicy
from ._write_turns import WriteTurns
from .recall._embedders import Embedder
from .sinks._config import SinkSpec
from .sinks._outbox import outbox_writer

if TYPE_CHECKING:
    from memwarden.projections import Access, AgentPage, AgentQuery, Evidence, Store, Texts, ViewReader, Write

log = get_logger("memwarden")


class Core:
    """The store behind a ``--db`` URL (a bare path is an SQLite file), the
    clock every decision reads, the TTL policy, the fetchers and limits."""

    def __init__(
        self,
        path: str | Path = "memwarden.db",
        *,
        clock: Clock | None = None,
        policy: TtlPolicy | None = None,
        fetchers: Fetchers | None = None,
        limits: Limits | None = None,
        synchronous: Synchronous = "FULL",
        mmap_mb: int = 1024,
        cache_mb: int = 64,
        read_url: str | None = None,
        sinks: Sequence[SinkSpec] = (),
        embedder: Embedder | None = None,
        vector_index: IndexSettings | None = None,
        schedule: Mapping[str, float] | None = None,
    ) -> None:
        self.clock: Clock = clock or SystemClock()
        # what computes a save's vector when it brings none (None: only given vectors are kept)
        self.embedder = embedder
        self.policy = policy or TtlPolicy()
        self.fetchers = fetchers or Fetchers()
        self.limits = limits or Limits()
        self.chain_check: Joined[Any] = Joined()  # one chain verification at a time (``audit_verify``)
        self.write_turns = WriteTurns()  # small writes before queued batches (``_write_turns``)
        # concurrent single saves share one durable commit (``_group_commit``)
        self.group_commit = GroupCommit(lambda size: self.transaction(size=size))
        # what each write transaction runs inside once it holds the store:
        # nothing here, a guest in its application's process; a server entry
        # point that owns its process may set its own (``faces/cli/_serve``)
        self.holding_store: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext
        # of the interpreter a large write's preparation may hold (``_pace``):
        # all of it alone in a process; a server gives half to the requests beside it
        self.large_write_share = 1.0
        # called with each revocation id after it commits (the scheduler's
        # immediate read-back hooks in here)
        self.revocation_listeners: list[Callable[[str], None]] = []
        # the knobs are the SQLite backend's (a PostgreSQL store has its
        # server's settings): kept here as keywords for the callers that set them
        sqlite = SQLiteOptions(synchronous=synchronous, mmap_mb=mmap_mb, cache_mb=cache_mb)
        self.store: Store = open_store(path, clock=self.clock, read_url=read_url, sqlite=sqlite)
        self.vector_index = VectorIndex(self.store, vector_index, _vector_folder(self.store, vector_index))
        # the copies outside memwarden a revocation must reach (``sinks``)
        self.sinks: tuple[SinkSpec, ...] = tuple(sinks)
        # seconds between runs of the scheduler's jobs the policy file names ([scheduler])
        self.schedule: dict[str, float] = dict(schedule or {})
        # before the cascade: a revocation's notice names what the cascade
        # below it invalidates, so those are not announced twice
        self.store.react(outbox_writer(lambda: self.sinks, self._stamp))
        self.store.react(cascade)

    @property
    def path(self) -> str:
        return self.store.path

    @property
    def log(self) -> EventLog:
        return self.store.log

    @property
    def texts(self) -> Texts:
        return self.store.texts

    def close(self) -> None:
        self.vector_index.close()
        self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def file_problems(self) -> list[str]:
        """What the backend's own check finds wrong with its files (the hash
        chain cannot see damage to the projections or the texts): a file
        that cannot even be checked is one problem; a store that cannot be
        reached is ``StoreUnavailable``, raised, since nothing was checked."""
        try:
            problems = self.store.file_problems()
        except StoreDamaged as exc:
            return [exc.detail]
        if problems:
            log.error("database_damaged", path=self.path, problems=problems[:10])
        return problems

    # -- time and freshness ---------------------------------------------------

    def now(self) -> str:
        return format_ts(self.clock.now())

    def _stamp(self) -> tuple[str, float]:
        now = self.clock.now()
        return format_ts(now), now.timestamp()

    @contextmanager
    def reading(self, min_seq: int | None = None, wait: float = 2.0) -> Iterator[ViewReader]:
        """A consistent read of a view that has applied at least ``min_seq``."""
        _check_seq(min_seq)
        deadline = time.monotonic() + wait
        while True:
            with self.store.reading(min_seq or 0) as view:
                # asked even without a token: a damaged tracking row is named
                # here, on every read, with the way out (memwarden rebuild)
                have = view.position()
                if min_seq is None or have >= min_seq:
                    yield view
                    return
            self._wait_until(deadline, have, min_seq)

    def agent_page(self, min_seq: int | None, query: AgentQuery, evidence: Evidence, wait: float = 2.0) -> AgentPage:
        """A page of the agent query read in one state of a view that has
        applied at least ``min_seq`` (the store's ``agent_page``)."""
        _check_seq(min_seq)
        deadline = time.monotonic() + wait
        while True:
            page = self.store.agent_page(min_seq or 0, query, evidence)
            if min_seq is None or page.position >= min_seq:
                return page
            self._wait_until(deadline, page.position, min_seq)

    def wait_for_events(self, after_seq: int, timeout: float) -> int:
        """Wait until the log holds an event after ``after_seq`` (appended by
        any process on the store) or ``timeout`` seconds pass; the head seq."""
        return self.store.wait_for_events(after_seq, timeout)

    @contextmanager
    def transaction(self, size: int = 1) -> Iterator[Write]:
        """A write transaction: appends and the view's changes commit
        together. ``size``: how many memories it writes, so that a large one
        lets the small ones waiting go first (``_write_turns``)."""
        with self.write_turns.turn(size), self.store.writing() as tx, self.holding_store():
            yield tx
        _metrics.EVENTS.inc(len(tx.recorded))
        revoked = [r.payload["selector"].get("tenant") for r in tx.recorded if r.type == "revocation.issued"]
        if tx.erased or revoked:
            # what a revocation or an erasure takes out leaves the index here
            # before the commit returns (and an erasure's, its files)
            self.vector_index.committed(
                None if None in revoked else set(revoked),
                {r.payload["tenant"] for r in tx.recorded if r.type == "memory.erased"},
            )

    def find_row(self, view: ViewReader, memory_id: str, *, tenant: str | None = None, access: Access) -> MemoryRow:
        """The row of the memory a caller names: by id, in ``tenant`` when
        given, and only among the memories ``access`` allows (in the query
        itself). One the caller may not see is ``MemoryNotFound``, word for
        word as one that does not exist; an id held in more than one of the
        caller's tenants needs the tenant named."""
        if not isinstance(memory_id, str) or not memory_id or unstorable(memory_id) is not None:
            raise MemoryNotFound(str(memory_id))  # no store holds such an id: none to find
        if tenant is not None:
            check_storable("tenant", tenant)  # refused naming it, as the query and get refuse it
        found = view.memories(access, memory_id=memory_id, tenant=tenant, limit=2)
        if not found:
            raise MemoryNotFound(memory_id)
        if len(found) > 1:
            raise AmbiguousMemory(memory_id)
        return found[0]

    def _wait_until(self, deadline: float, have: int, min_seq: int) -> None:
        """A moment's wait for a view behind ``min_seq``; past ``deadline``,
        ``StaleView``. A ``min_seq`` beyond the log's head is refused at
        once: no view will reach a seq no event holds yet, and a caller
        could otherwise hold a thread for the whole wait at will."""
        if min_seq > self.log.head().seq:
            raise StaleView(have, min_seq, ahead=True)
        if time.monotonic() >= deadline:
            raise StaleView(have, min_seq)
        time.sleep(0.02)


def _beside(store: Store) -> Path | None:
    """The vector index's folder beside an SQLite file (none for one in
    memory; on PostgreSQL each node's is its own to configure)."""
    if store.backend != "sqlite" or store.path == ":memory:":
        return None
    return Path(f"{store.path}.vectors")


def _vector_folder(store: Store, settings: IndexSettings | None) -> Path | None:
    """The folder beside the store, made now, private, where the index will
    keep its files (the one the settings name, or the one beside an SQLite
    file): its files hold vectors that can be inverted back into texts.
    One that cannot be made now is left to the index, which names why."""
    settings = settings or IndexSettings()
    beside = _beside(store)
    folder = settings.directory or beside
    if folder is not None and settings.persist:
        with contextlib.suppress(OSError):
            private_folder(folder)
    return beside


def _check_seq(min_seq: object) -> None:
    """Every read's ``min_seq``: the one check, whichever face passed it."""
    if min_seq is not None and (not isinstance(min_seq, int) or isinstance(min_seq, bool) or min_seq < 0):
        raise InvalidInput("min_seq", "must be a whole number, 0 or more")
