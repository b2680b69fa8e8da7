"""A change of embedder is detected and re-embedding converges (issue 40),
on every backend: the stale vectors are reported, made again in bounded
batches until none is left, search then uses the new model, and no erased
(or revoked) memory is re-embedded."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from memwarden.engine import OPERATOR, HashEmbedder, InvalidInput, Warden
from memwarden.engine._saving import embedding_text
from memwarden.events import FrozenClock

from .conftest import Cli, agent_key, save_memory

OLD, NEW = HashEmbedder(384), HashEmbedder(64)  # another model: another name and length
TOPICS = ["deploy approvals", "cafeteria lunch menu", "서울 분기 회의", "배포 승인 검토", "vault launch codes"]


def corpus(w: Warden, n: int = 25) -> dict[str, str]:
    texts = {f"m{i:02}": f"{TOPICS[i % len(TOPICS)]} note {i}" for i in range(n)}
    for memory_id, text in texts.items():
        save_memory(w, memory_id, summary=text, content=text)
    save_memory(w, "given", summary="given vector", content="given vector", embedding=[1.0] + [0.0] * 383)
    save_memory(w, "other", tenant="globex", summary="deploy approvals", content="deploy approvals elsewhere")
    return texts


def reembedded_ids(w: Warden) -> list[str]:
    return [e.payload["memory_id"] for e in w.log.read(types=("memory.reembedded",))]


def test_a_change_of_embedder_is_reported_and_reembedding_converges(db_path: Path, clock: FrozenClock) -> None:
    w = Warden(db_path, clock=clock, embedder=OLD)
    corpus(w)
    w.erase(memory_id="m03", reason="asked", caller=OPERATOR)
    w.revoke({"ids": ["m04"]}, reason="leaked", caller=OPERATOR)
    before = w.embedding_status(caller=OPERATOR)
    assert before["stale"] == 0 and before["embedder"] == OLD.name
    w.close()

    w = Warden(db_path, clock=clock, embedder=NEW)
    try:
        status = w.embedding_status(caller=OPERATOR)
        # 25 + given + other, less the erased and the revoked: all made by the old model (given: another length)
        assert status["stale"] == status["versions"] == 25
        assert {(e["embedder"], e["dims"]) for e in status["by_embedder"]} == {(OLD.name, 384), ("caller", 384)}
        assert w.embedding_status(tenant="globex", caller=OPERATOR)["stale"] == 1
        # before: the new model's queries find nothing to compare with
        assert w.search(tenant="acme", query_text="deploy approvals", mode="vector", caller=OPERATOR) == []

        first = w.reembed(batch=4, max_batches=2, caller=OPERATOR)  # bounded: it stops where told
        assert (first.reembedded, first.batches, first.remaining) == (8, 2, 17)
        assert w.embedding_status(caller=OPERATOR)["stale"] == 17
        rest = w.reembed(batch=4, caller=OPERATOR)
        assert rest.remaining == 0 and rest.reembedded == 17 and rest.skipped == 0
        assert w.embedding_status(caller=OPERATOR)["stale"] == 0
        assert w.reembed(caller=OPERATOR).reembedded == 0  # converged: a second run has nothing to do

        ids = reembedded_ids(w)
        assert len(ids) == len(set(ids)) == 25
        assert "m03" not in ids and "m04" not in ids  # neither the erased nor the revoked

        # search uses the new model: its own cosine, the nearest by meaning first
        found = w.search(tenant="acme", query_text="deploy approvals", mode="vector", limit=5, caller=OPERATOR)
        top = found[0].view.memory_id
        assert int(top[1:]) % len(TOPICS) == 0, top  # a note about deploy approvals
        text = f"deploy approvals note {int(top[1:])}"
        q, v = NEW.embed(["deploy approvals", embedding_text(text, text)])
        assert found[0].similarity == pytest.approx(float(np.dot(q, v)), abs=1e-5)
        hidden = w.search(tenant="acme", query_text="서울 회의", mode="vector", include_hidden=True, caller=OPERATOR)
        assert "m03" not in {f.view.memory_id for f in hidden}  # the erased has no vector at all
        [index] = [d for d in w.vector_index.describe() if d["tenant"] == "acme" and d["dims"] == 64]
        assert index["vectors"] == 24  # every acme version but the erased (the revoked keeps its, hidden)
        with pytest.raises(InvalidInput):  # a query of the old length is refused: the model is the new one
            w.search(tenant="acme", vector=[1.0] + [0.0] * 383, caller=OPERATOR)

        event = next(e for e in w.log.read(types=("memory.reembedded",)) if e.payload["memory_id"] == "given")
        assert event.payload["previous_embedder"] == "caller" and event.payload["embedding_dims"] == 64
        notes = [h["note"] for h in w.explain("m00", tenant="acme", caller=OPERATOR)["history"]]
        assert any(n and NEW.name in n for n in notes)
        assert w.audit_verify(caller=OPERATOR)["ok"]
        assert w.check_projections(caller=OPERATOR).ok
    finally:
        w.close()


def test_the_job_is_staff_work_and_needs_an_embedder(db_path: Path, clock: FrozenClock) -> None:
    w = Warden(db_path, clock=clock)
    try:
        save_memory(w, "a")
        with pytest.raises(InvalidInput) as refused:
            w.reembed(caller=OPERATOR)
        assert refused.value.field == "embedder"
        assert w.embedding_status(caller=OPERATOR)["stale"] is None
        with pytest.raises(PermissionError):
            w.reembed(caller=agent_key("acme"))
        with pytest.raises(PermissionError):
            w.embedding_status(caller=agent_key("acme"))
    finally:
        w.close()


def test_the_command_line(db_path: Path, tmp_path: Path, clock: FrozenClock) -> None:
    w = Warden(db_path, clock=clock, embedder=OLD)
    corpus(w, 6)
    w.close()
    policy = tmp_path / "policy.toml"
    policy.write_text('[embedder]\nkind = "hash"\ndims = 64\n', encoding="utf-8")
    cli = Cli(db_path)
    checked = cli.json("--policy-file", str(policy), "reembed", "--check", code=1)
    assert checked["stale"] == 8 and checked["embedder"] == NEW.name
    done = cli.json("--policy-file", str(policy), "reembed", "--batch", "3")
    assert done["reembedded"] == 8 and done["remaining"] == 0 and done["batches"] == math.ceil(8 / 3)
    assert cli.json("--policy-file", str(policy), "reembed", "--check")["stale"] == 0
    assert "0 stale left" in cli("--policy-file", str(policy), "reembed").stdout
