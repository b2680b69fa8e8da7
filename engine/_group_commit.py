"""Group commit: concurrent single saves in one process share one durable
commit.

A durable commit is a sync to disk, and a save waits for its own: sixteen
agents saving at once would each wait for fifteen syncs. Here a save
queues what it has checked; the first to find no commit under way leads:
it takes the write transaction, then writes every save queued by then (up
to ``GROUP``), one after another in that transaction, exactly as each
would write alone, and commits once. Each waiter is answered only once that
commit has returned (durable), with its own result or its own refusal: a
save refused under the lock (a revocation, an erased memory) is refused
alone, before it writes anything, and the others go on. Should anything
fail once writing began (the log refusing an event id, the commit
itself), the transaction rolls back and every save of the group runs
again alone, so one bad save never fails another. The next leader is the
first save still queued, so a leader answers its own caller after one
commit, not after every save that kept arriving.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from memwarden.projections import Write

R = TypeVar("R")

# saves one commit writes at most: well under a large write (``_write_turns``)
GROUP = 64

# a member's work under the lock: checks (raising a refusal before any
# write), then writes; returns a callable that writes and returns the answer
Prepare = Callable[[Write], Callable[[], R]]

REFUSALS = (ValueError, PermissionError, LookupError)


@dataclass(eq=False)
class _Member(Generic[R]):
    prepare: Prepare[R]
    alone: Callable[[], R]  # the save run by itself, in its own transaction
    done: threading.Event = field(default_factory=threading.Event)
    lead: bool = False
    settled: bool = False
    result: Any = None
    error: BaseException | None = None

    def answer(self) -> R:
        if self.error is not None:
            raise self.error
        return self.result


class GroupCommit:
    """The queue in front of the write lock for single saves (one a Core);
    ``transaction`` opens a write transaction of ``size`` saves."""

    def __init__(self, transaction: Callable[[int], AbstractContextManager[Write]], *, group: int = GROUP) -> None:
        self._transaction = transaction
        self._group = group
        self._lock = threading.Lock()
        self._queue: list[_Member[Any]] = []
        self._leading = False

    def run(self, prepare: Prepare[R], alone: Callable[[], R]) -> R:
        me: _Member[R] = _Member(prepare, alone)
        with self._lock:
            self._queue.append(me)
            lead = not self._leading
            self._leading = True
        if not lead:
            me.done.wait()
            if not me.lead:
                return me.answer()
        self._lead()
        return me.answer()

    def _lead(self) -> None:
        """Commit one group (this thread's save among it), then hand the
        lead to the first save still queued, or give it up."""
        group: list[_Member[Any]] = []
        try:
            try:
                with self._transaction(1) as tx:
                    # taken once the lock is held: the saves that queued
                    # while this one waited for it commit with it
                    group = self._take()
                    answers = [_written(member, tx) for member in group]
            except Exception as exc:
                group = group or self._take()
                if len(group) == 1:
                    group[0].error, group[0].settled = exc, True
                else:  # rolled back: nothing of the group was written; each runs alone
                    for member in group:
                        _settle(member, member.alone)
            else:
                for member, (result, error) in zip(group, answers, strict=True):  # answered once durable
                    member.result, member.error, member.settled = result, error, True
        finally:
            for member in group:
                if not member.settled:
                    member.error = RuntimeError("the group commit this save was in did not finish")
            with self._lock:
                if self._queue:
                    self._queue[0].lead = True
                    self._queue[0].done.set()
                else:
                    self._leading = False
            for member in group:
                member.done.set()

    def _take(self) -> list[_Member[Any]]:
        with self._lock:
            group, self._queue = self._queue[: self._group], self._queue[self._group :]
        return group


def _written(member: _Member[Any], tx: Write) -> tuple[Any, BaseException | None]:
    """A member checked and written in the group's transaction: a refusal
    is its own, raised before it wrote anything; the next member's checks
    read the view this one leaves."""
    try:
        write = member.prepare(tx)
    except REFUSALS as exc:
        return None, exc
    return write(), None


def _settle(member: _Member[Any], run: Callable[[], Any]) -> None:
    try:
        member.result = run()
    except Exception as exc:  # the caller's own error, raised in its thread
        member.error = exc
    member.settled = True
