"""The engine's own vector index as a sink (``kind = "index"``, issue 42):
after a revocation, each covered memory's own vector is searched for
through the recall path, and no covered id is among the candidates it
yields; confirmed (and recorded in the log) like the other sinks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from memwarden.engine import OPERATOR, HashEmbedder, InvalidInput, Warden, sinks_from_table
from memwarden.engine import _sink_index as index_sink
from memwarden.projections._vector_reads import VectorReads

from .test_sinks import save_n


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
    monkeypatch.setattr(VectorReads, "revoked_at", lambda self, tenant, seq, selector: [])
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
