"""The engine's own vector index as a sink (``kind = "index"``, issue 42):
after a revocation, each covered memory's own vector is searched for
through the recall path, and no covered id is among the candidates it
yields; confirmed (and recorded in the log) like the other sinks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from memwarden.engine import OPERATOR, HashEmbedder, InvalidInput, Warden, sinks_from_table
from memwarden.engine.sinks import _index as index_sink
from memwarden.events._sqlite_readers import ReaderPool
from memwarden.projections import SQLView, TakenAt

from ._sinks import save_n


@pytest.fixture
def w(db_path: Path) -> Iterator[Warden]:
    warden = Warden(db_path, embedder=HashEmbedder(), sinks=sinks_from_table({"vectors": {"kind": "index"}}))
    yield warden
    warden.close()


def test_a_revocation_read_back_in_the_vector_index_is_confirmed_and_logged(w: Warden) -> None:
    ids = save_n(w, 30)
    before = w.search(tenant="acme", query_text="about m00003", mode="vector", limit=5, caller=OPERATOR)
    assert ids[3] in [f.view.memory_id for f in before]  # the index finds it while it is usable
    result = w.revoke({"tenant": "acme", "ids": ids[:10]}, reason="r", caller=OPERATOR)
    assert [m for m in ids[:10] if w.vector_index.held("acme", 384, m) is not None] == [], "gone at commit"
    [line] = w.settle_sinks(result.revocation_id, caller=OPERATOR)
    assert (line["sink"], line["status"], line["covered"]) == ("vectors", "confirmed", 10)
    assert line["latency_ms"] >= 0 and line["final_seq"]
    [event] = list(w.log.read(types=("sink.readback_recorded",)))
    assert event.payload["sink_kind"] == "index" and event.payload["outcome"] == "confirmed"
    assert [s["readback"] for s in w.sinks_status(caller=OPERATOR)] == ["index"]
    assert w.test_sink("vectors", caller=OPERATOR)["ok"] is True


def test_a_covered_id_the_index_still_yields_is_a_leak(w: Warden, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = save_n(w, 12)
    w.search(tenant="acme", query_text="about m00003", mode="vector", caller=OPERATOR)  # the index opened here
    real = index_sink.search

    def gate_broken(core: Any, **kwargs: Any) -> Any:  # the recall path answering what the gate refuses
        return real(core, include_hidden=True, **kwargs)

    monkeypatch.setattr(index_sink, "search", gate_broken)
    # and an index that is never told what a revocation took out: it keeps their vectors
    covered = SQLView.covered
    monkeypatch.setattr(
        SQLView,
        "covered",
        lambda self, query: [] if isinstance(query, TakenAt) and query.tenant else covered(self, query),
    )
    result = w.revoke({"tenant": "acme", "ids": ids[:4]}, reason="r", caller=OPERATOR)
    assert all(w.vector_index.held("acme", 384, m) is not None for m in ids[:4])
    [line] = w.settle_sinks(result.revocation_id, caller=OPERATOR)
    assert line["status"] == "leaked" and line["leaked_ids"] == ids[:4]
    [event] = list(w.log.read(types=("sink.readback_recorded",)))
    assert event.payload["outcome"] == "leaked" and event.payload["leaked_ids"] == ids[:4]


def test_an_index_sink_takes_no_url() -> None:
    with pytest.raises(InvalidInput) as refused:
        sinks_from_table({"x": {"kind": "index", "url": "http://h"}})
    assert refused.value.field == "sinks.x.url"
    with pytest.raises(InvalidInput) as refused:
        sinks_from_table({"x": {"kind": "index", "prefix": "p"}})
    assert refused.value.field == "sinks.x.prefix"


def every_reader_taken(w: Warden) -> bool:
    """Whether every connection of the store's read pool is out (SQLite's
    ``ReaderPool``, PostgreSQL's psycopg pool): nothing public tells it."""
    readers = w.log._readers  # type: ignore[attr-defined]
    if isinstance(readers, ReaderPool):
        with readers._free:
            return readers._open == readers._size and not readers._idle
    stats = readers.get_stats()
    return bool(stats.get("pool_size") == stats["pool_max"] and not stats.get("pool_available"))


def test_read_backs_revocations_and_the_follower_never_wedge_the_readers(w: Warden) -> None:
    """A server with an index sink, saving and revoking with ``wait``, hung
    for good on SQLite: every pooled reader was held by a search (the
    read-back's), a revocation's commit or the follower's pass, each
    waiting for the index's lock, and the lock's holder waited for one more
    reader to read the log it had to catch up from. Here the lock is held
    until every reader is taken by such calls, the index behind the view."""
    ids = save_n(w, 40)
    first = w.revoke({"tenant": "acme", "ids": ids[:2]}, reason="r", caller=OPERATOR)
    w.search(tenant="acme", query_text="about m00003", mode="vector", caller=OPERATOR)  # the index opened
    # its follower stopped: its passes are the follow_once calls below, and its
    # polls of the head would take and give back readers while they are counted
    w.vector_index.close()
    sink = index_sink.IndexSink(w.sinks[0], w)
    calls: list[Callable[[], Any]] = [
        *[lambda: w.search(tenant="acme", query_text="about m00007", mode="vector", caller=OPERATOR)] * 5,
        *[w.vector_index.follow_once] * 3,
        lambda: w.revoke({"tenant": "acme", "ids": ids[2:4]}, reason="r", caller=OPERATOR),
    ]
    failed: list[BaseException] = []

    def run(call: Callable[[], Any]) -> None:
        try:
            call()
        except BaseException as exc:  # told by the assertion below, not lost in a thread
            failed.append(exc)

    threads = [threading.Thread(target=run, args=(call,), daemon=True) for call in calls]
    with w.vector_index._lock:
        save_n(w, 10, start=40)  # the index is now behind the view: its next holder catches up from the log
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60  # bounds the test only
        while not every_reader_taken(w):
            assert time.monotonic() < deadline, "the calls never took every reader"
            time.sleep(0.01)
        # the read-back itself (its first look at the index waits for the lock holding no reader)
        held = threading.Thread(target=run, args=(lambda: sink.held("n", {"acme": ids[:2]}),), daemon=True)
        held.start()
        threads.append(held)
    for t in threads:
        t.join(timeout=max(deadline - time.monotonic(), 0.1))
    assert [t for t in threads if t.is_alive()] == [], "wedged: readers held by threads waiting for the index"
    assert failed == []
    assert sink.held("n", {"acme": ids[:4]}) == {}
    [line] = w.settle_sinks(first.revocation_id, caller=OPERATOR)
    assert line["status"] == "confirmed"
