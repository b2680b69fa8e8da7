"""Group commit: single saves from many threads at once share one durable
commit, each answered with its own result or its own refusal, and a group
that fails once writing began is run again save by save."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from memwarden.engine import OPERATOR, RevokedScope, SaveResult, Warden
from memwarden.events import EventIdReused

THREADS = 16


def fields(i: int, **extra: Any) -> dict[str, Any]:
    return {
        "memory_id": f"g{i}",
        "kind": "external_fact",
        "summary": f"요약 {i}",
        "content": f"내용 {i} 🙂",
        "source_url": f"https://example.org/{i}",
        "scope": {"tenant": "acme", "project": "p1"},
        **extra,
    }


class Commits:
    """Counts the store's write transactions that commit; the first holds
    its transaction open until ``waiting`` saves are queued behind it, so
    the group is decided by the queue, not by timing."""

    def __init__(self, warden: Warden, waiting: int) -> None:
        self.count = 0
        self.first = True
        self.queued_all = True
        real = warden.store.writing
        group = warden.group_commit

        @contextmanager
        def writing(*args: Any, **kwargs: Any) -> Iterator[Any]:
            with real(*args, **kwargs) as tx:
                if self.first:
                    self.first = False
                    self.queued_all = _until(lambda: len(group._queue) >= waiting)
                yield tx
            self.count += 1

        warden.store.writing = writing  # type: ignore[method-assign]


def _until(done: Callable[[], bool], timeout: float = 60.0) -> bool:
    event = threading.Event()
    while not done():
        if event.wait(0.005) or timeout <= 0:
            return False
        timeout -= 0.005
    return True


def concurrently(warden: Warden, saves: list[dict[str, Any]]) -> list[SaveResult | BaseException]:
    out: list[SaveResult | BaseException] = [RuntimeError("not run")] * len(saves)
    start = threading.Barrier(len(saves))

    def one(i: int) -> None:
        start.wait()
        try:
            out[i] = warden.save(**saves[i], caller=OPERATOR)
        except Exception as exc:
            out[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(saves))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return out


def test_concurrent_saves_share_commits_and_each_gets_its_own_result(warden: Warden) -> None:
    commits = Commits(warden, THREADS)
    results = concurrently(warden, [fields(i) for i in range(THREADS)])
    assert commits.queued_all
    assert commits.count < THREADS  # one commit here: the first held until all had queued
    assert all(isinstance(r, SaveResult) for r in results), results
    saved = [r for r in results if isinstance(r, SaveResult)]
    assert [r.memory_id for r in saved] == [f"g{i}" for i in range(THREADS)]
    assert len({r.seq for r in saved}) == THREADS and all(r.version == 1 for r in saved)
    for i, r in enumerate(saved):
        got = warden.get(f"g{i}", caller=OPERATOR)
        assert got.usable and got.content == f"내용 {i} 🙂" and got.checksum == r.checksum
    assert warden.log.head().seq == max(r.seq for r in saved)


def test_a_save_refused_under_the_lock_is_refused_alone(warden: Warden) -> None:
    warden.revoke({"tenant": "acme", "project": "bad"}, reason="leaked", caller=OPERATOR)
    saves = [fields(i) for i in range(8)]
    saves[3] = fields(3, scope={"tenant": "acme", "project": "bad"}, fetched_at="2020-01-01T00:00:00Z")
    head = warden.log.head().seq
    commits = Commits(warden, len(saves))
    results = concurrently(warden, saves)
    assert commits.count < len(saves)
    assert isinstance(results[3], RevokedScope)
    assert all(isinstance(r, SaveResult) for i, r in enumerate(results) if i != 3), results
    assert warden.log.head().seq == head + 7
    with pytest.raises(LookupError):
        warden.get("g3", caller=OPERATOR)


def test_a_group_that_fails_while_writing_runs_again_save_by_save(warden: Warden) -> None:
    """Three saves under one event id, one of them with other content, in
    one group: in its transaction the log refuses the event id's second
    use, so the group is rolled back and each runs alone, in the order they
    queued. The first of the three to run is saved, one of the same
    content answers as it did, one of other content is refused, and every
    other save of the group is saved."""
    saves = [fields(i) for i in range(6)]
    saves[1] = fields(1, event_id="same")
    saves[2] = fields(1, event_id="same")  # a client's retry: the same save
    saves[4] = fields(1, event_id="same", content="다른 내용")
    commits = Commits(warden, len(saves))
    results = concurrently(warden, saves)
    assert commits.queued_all
    won = [r for i, r in enumerate(results) if i in (1, 2, 4) and isinstance(r, SaveResult)]
    assert won and all(r == won[0] for r in won) and won[0].memory_id == "g1"
    content = warden.get("g1", caller=OPERATOR).content
    for i in (1, 2, 4):
        same = saves[i]["content"] == content
        assert isinstance(results[i], SaveResult) if same else isinstance(results[i], EventIdReused), (i, results)
    for i in (0, 3, 5):
        assert isinstance(results[i], SaveResult) and results[i].memory_id == f"g{i}"  # type: ignore[union-attr]
    assert warden.get("g1", caller=OPERATOR).version == 1
