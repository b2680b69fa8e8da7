"""Write transactions take turns: a small write waits only for the one
running now, a large one lets the small ones waiting go first, for a
bounded time (``engine/_write_turns.py``)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from memwarden.engine import OPERATOR, Warden
from memwarden.engine._write_turns import WriteTurns

from ._wait import wait_for
from .conftest import save_memory


def _hold(
    turns: WriteTurns, size: int, started: threading.Event, release: threading.Event, order: list[str], name: str
) -> threading.Thread:
    def run() -> None:
        with turns.turn(size):
            order.append(name)
            started.set()
            release.wait(10)

    return threading.Thread(target=run)


def waits_of(turns: WriteTurns) -> set[str]:
    """The names of the threads that have waited for their turn (a writer
    that waits has reached the queue: no sleep guesses when)."""
    seen: set[str] = set()
    wait = turns._changed.wait

    def noting(timeout: float | None = None) -> bool:
        seen.add(threading.current_thread().name)
        return wait(timeout)

    turns._changed.wait = noting  # type: ignore[method-assign]
    return seen


def test_a_small_write_goes_before_a_large_one_waiting() -> None:
    turns = WriteTurns(patience=60)
    waited = waits_of(turns)
    order: list[str] = []
    first_in, done = threading.Event(), threading.Event()
    holder = _hold(turns, 1, first_in, done, order, "holder")
    holder.start()
    assert first_in.wait(30)

    def write(size: int, name: str) -> None:
        with turns.turn(size):
            order.append(name)

    large = threading.Thread(target=write, args=(5000, "batch"), name="batch")
    large.start()
    wait_for(lambda: "batch" in waited, what="the batch waiting")  # before the save arrives
    small = threading.Thread(target=write, args=(1, "save"), name="save")
    small.start()
    wait_for(lambda: "save" in waited and turns._small_waiting == 1, what="the save waiting")
    done.set()
    for t in (holder, large, small):
        t.join(30)
    assert order == ["holder", "save", "batch"]


def test_a_large_write_is_not_starved_past_its_patience() -> None:
    turns = WriteTurns(patience=0.2)
    order: list[str] = []
    stop = threading.Event()

    def steady() -> None:  # small writes, always one waiting, until the batch has had its turn
        while "batch" not in order and not stop.is_set():
            with turns.turn(1):
                time.sleep(0.005)  # paces the stream only: each small write holds the turn a moment

    writers = [threading.Thread(target=steady) for _ in range(3)]
    for t in writers:
        t.start()

    def batch() -> None:
        with turns.turn(5000):
            order.append("batch")

    try:
        wait_for(lambda: turns._small_waiting, what="a small write waiting")
        large = threading.Thread(target=batch)
        large.start()
        # the stream never ends before the batch's turn: a starved batch never gets one
        wait_for(lambda: "batch" in order, timeout=60, what="the batch's turn while small writes keep coming")
        large.join(30)
    finally:
        stop.set()
        for t in writers:
            t.join(30)


def test_a_nested_transaction_on_the_same_thread_takes_no_second_turn() -> None:
    turns = WriteTurns()
    with turns.turn(5000), turns.turn(1):
        pass
    with turns.turn(1):  # and the turn is free again after
        pass


def test_a_query_answers_while_a_batch_holds_the_store(tmp_path: Path) -> None:
    """On SQLite an agent's query reads on a connection of its own, beside the
    write transaction, not after it."""
    w = Warden(tmp_path / "w.db")
    try:
        save_memory(w, "seen", tenant="ta", content="있던 기억")
        inside, release = threading.Event(), threading.Event()

        def long_write() -> None:
            with w.transaction(size=5000):
                inside.set()
                release.wait(10)

        writer = threading.Thread(target=long_write)
        writer.start()
        assert inside.wait(30)
        try:
            answered: list[list[str]] = []
            reader = threading.Thread(
                target=lambda: answered.append([v.memory_id for v in w.query(tenant="ta", caller=OPERATOR)])
            )
            reader.start()
            reader.join(60)  # only bounds the wait: a query waiting for the write would never answer
            assert answered == [["seen"]], "the query waited for the write transaction"
        finally:
            release.set()
            writer.join(10)
    finally:
        w.close()
