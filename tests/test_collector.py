"""The server's own process pauses its garbage collector while the engine
writes, and only then; a library user's collector is never touched
(``tests/test_guest.py``)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from memwarden.engine import OPERATOR, Warden
from memwarden.engine.faces._own_process import collector_paused, trim_heap


@pytest.fixture
def served(warden: Warden) -> Warden:
    """A warden as ``memwarden serve`` sets it up for its own process."""
    warden.holding_store = collector_paused
    return warden


def test_serve_sets_up_its_own_process(run_cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``memwarden serve`` owns its process: the collector paused under the
    store, and the heap the page cache gave back returned to the OS."""
    from memwarden.engine.faces import http
    from memwarden.engine.faces.http import _server as _http_server

    served: list[Warden] = []
    monkeypatch.setattr(http, "create_app", lambda w, **_: w)
    monkeypatch.setattr(_http_server, "serve", lambda app, **_: served.append(app))
    run_cli("serve", "--no-scheduler")
    (warden,) = served
    assert warden.holding_store is collector_paused
    log = warden.store.log  # type: ignore[attr-defined]
    if hasattr(log, "after_release"):  # SQLite's: PostgreSQL's page cache is its server's
        assert log.after_release == [trim_heap]


def test_a_library_warden_leaves_the_collector_alone(warden: Warden) -> None:
    with warden.transaction():
        assert gc.isenabled()


def test_a_write_transaction_pauses_the_collector_and_restores_it(served: Warden) -> None:
    warden = served
    assert gc.isenabled()
    seen: list[bool] = []
    with warden.transaction():
        seen.append(gc.isenabled())
        with collector_paused():  # nested: still paused after the inner one ends
            pass
        seen.append(gc.isenabled())
    assert seen == [False, False]
    assert gc.isenabled()


def test_a_failed_write_restores_the_collector(served: Warden) -> None:
    warden = served
    with pytest.raises(RuntimeError), warden.transaction():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_disabled_by_the_caller_stays_disabled() -> None:
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_concurrent_writers_reenable_it_only_when_the_last_leaves() -> None:
    first_in, second_out, release = threading.Event(), threading.Event(), threading.Event()
    states: list[bool] = []

    def long_writer() -> None:
        with collector_paused():
            first_in.set()
            release.wait(5)

    def short_writer() -> None:
        first_in.wait(5)
        with collector_paused():
            pass
        states.append(gc.isenabled())  # the long writer is still inside
        second_out.set()

    threads = [threading.Thread(target=long_writer), threading.Thread(target=short_writer)]
    for t in threads:
        t.start()
    assert second_out.wait(5)
    release.set()
    for t in threads:
        t.join(5)
    assert states == [False]
    assert gc.isenabled()


def test_a_writer_waits_for_the_store_with_the_collector_on(served: Warden, monkeypatch: pytest.MonkeyPatch) -> None:
    warden = served
    # waiting for the database's lock (another process's transaction, another
    # node's) must not keep the collector off: it is paused only once held
    store = warden.store
    real = type(store).writing
    seen: list[bool] = []

    @contextmanager
    def writing(self: Any) -> Iterator[Any]:
        seen.append(gc.isenabled())  # while it waits for the lock
        with real(self) as tx:
            yield tx

    monkeypatch.setattr(type(store), "writing", writing)
    with warden.transaction():
        seen.append(gc.isenabled())
    assert seen == [True, False]
    assert gc.isenabled()


def test_saves_still_work_and_the_view_sees_them(served: Warden) -> None:
    warden = served
    warden.save(
        memory_id="m1",
        kind="external_fact",
        summary="서울 지사",
        content="본문",
        source_url="https://example.org/a",
        scope={"tenant": "acme"},
        caller=OPERATOR,
    )
    assert warden.get("m1", caller=OPERATOR).usable
    assert gc.isenabled()
