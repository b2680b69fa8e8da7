"""Write transactions take turns: a small write waits only for the one
running now, a large one lets the small ones waiting go first, for a
bounded time (``engine/_write_turns.py``)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from memwarden.engine import OPERATOR, Warden
from memwarden.engine._write_turns import WriteTurns

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


def test_a_small_write_goes_before_a_large_one_waiting() -> None:
    turns = WriteTurns(patience=10)
    order: list[str] = []
    first_in, done = threading.Event(), threading.Event()
    holder = _hold(turns, 1, first_in, done, order, "holder")
    holder.start()
    assert first_in.wait(5)

    def write(size: int, name: str) -> None:
        with turns.turn(size):
            order.append(name)

    large = threading.Thread(target=write, args=(5000, "batch"))
    large.start()
    time.sleep(0.1)  # the batch is waiting before the save arrives
    small = threading.Thread(target=write, args=(1, "save"))
    small.start()
    time.sleep(0.1)
    done.set()
    for t in (holder, large, small):
        t.join(10)
    assert order == ["holder", "save", "batch"]


def test_a_large_write_is_not_starved_past_its_patience() -> None:
    turns = WriteTurns(patience=0.2)
    stop = time.monotonic() + 3
    order: list[str] = []

    def steady() -> None:  # small writes, always one waiting
        while time.monotonic() < stop and "batch" not in order:
            with turns.turn(1):
                time.sleep(0.005)

    writers = [threading.Thread(target=steady) for _ in range(3)]
    for t in writers:
        t.start()
    time.sleep(0.05)
    began = time.monotonic()
    with turns.turn(5000):
        order.append("batch")
    waited = time.monotonic() - began
    for t in writers:
        t.join(10)
    assert waited < 2.5  # its patience (0.2 s) and the write running then, not the whole stream


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
        assert inside.wait(5)
        try:
            answered: list[list[str]] = []
            reader = threading.Thread(
                target=lambda: answered.append([v.memory_id for v in w.query(tenant="ta", caller=OPERATOR)])
            )
            reader.start()
            reader.join(5)
            assert answered == [["seen"]], "the query waited for the write transaction"
        finally:
            release.set()
            writer.join(10)
    finally:
        w.close()
