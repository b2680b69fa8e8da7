"""Every answer has a size and a cost bound (#38): explain's tree in a
derivation DAG, search words, a min_seq beyond the head, chain
verifications joined, and batches repeating one id."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
from memwarden.engine import MAX_BATCH, OPERATOR, InvalidInput, StaleView, Warden, _batch, _core, _history
from memwarden.engine._derivation import TREE_NODES
from memwarden.engine._joined import Joined

from ._http_server import Server, save_body, server  # noqa: F401  (the live server fixture)
from .conftest import Cli, save_memory


def _nodes(node: dict[str, Any]) -> int:
    return 1 + sum(_nodes(p) for p in node["parents"])


def test_a_diamond_dag_explains_in_bounded_nodes(warden: Warden) -> None:
    """42 memories in 21 layers, each drawn from both of the layer before:
    one node a path was 2^21 nodes; each memory is now shown once."""
    for layer in range(21):
        for side in "ab":
            below = [f"d{layer - 1}-a", f"d{layer - 1}-b"] if layer else []
            save_memory(warden, f"d{layer}-{side}", kind="permission", derived_from=below, ttl=None)
    explained = warden.explain("d20-a", caller=OPERATOR)
    tree = explained["derivation"]
    assert explained["usable"] is True
    assert _nodes(tree) <= TREE_NODES + 1
    whole: list[str] = []
    refs: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        (refs if node.get("ref") else whole).append(node["memory_id"])
        assert not (node.get("ref") and node["parents"])  # a reference carries no subtree
        for parent in node["parents"]:
            walk(parent)

    walk(tree)
    # every memory shown whole once (the root and the 40 below it: d20-b is
    # not evidence of d20-a), every other meeting a reference
    assert len(whole) == len(set(whole)) == 41 and refs


def test_the_command_line_shows_a_reference_as_one(warden: Warden, run_cli: Cli) -> None:
    save_memory(warden, "base", kind="permission", ttl=None)
    for side in "ab":
        save_memory(warden, side, kind="permission", ttl=None, derived_from=["base"])
    save_memory(warden, "top", kind="permission", ttl=None, derived_from=["a", "b"])
    out = run_cli("explain", "top").stdout
    assert out.count("base v1") == 2 and out.count("(shown above)") == 1


def test_the_node_cap_holds_for_a_wide_fan(warden: Warden) -> None:
    for n in range(TREE_NODES + 50):
        save_memory(warden, f"w{n}", kind="permission", ttl=None)
    save_memory(warden, "fan", kind="permission", ttl=None, derived_from=[f"w{n}" for n in range(TREE_NODES + 50)])
    tree = warden.explain("fan", caller=OPERATOR)["derivation"]
    assert len(tree["parents"]) == TREE_NODES and tree["truncated"] is True


def test_search_words_are_deduplicated_and_capped(warden: Warden) -> None:
    save_memory(warden, "x1", summary="x marks the spot")
    assert [v.memory_id for v in warden.query(tenant="acme", text=" ".join(["x"] * 499), caller=OPERATOR)] == ["x1"]
    with pytest.raises(InvalidInput) as refused:
        warden.query(tenant="acme", text=" ".join(f"w{n}" for n in range(33)), caller=OPERATOR)
    assert refused.value.field == "text" and "32" in str(refused.value)


def test_a_min_seq_beyond_the_head_is_refused_at_once(warden: Warden, monkeypatch: pytest.MonkeyPatch) -> None:
    save_memory(warden, "m")

    def no_waiting(_: float) -> None:
        raise AssertionError("waited for a seq no event holds")

    monkeypatch.setattr(_core.time, "sleep", no_waiting)
    head = warden.head_seq()
    with pytest.raises(StaleView):
        warden.get("m", min_seq=head + 1000, caller=OPERATOR)
    with pytest.raises(StaleView):
        warden.query(tenant="acme", min_seq=2**62, caller=OPERATOR)
    assert warden.get("m", min_seq=head, caller=OPERATOR).usable


def test_a_second_verification_joins_the_running_one(warden: Warden, monkeypatch: pytest.MonkeyPatch) -> None:
    save_memory(warden, "v")
    real = _history._verify_in_stretches
    started, release, calls = threading.Event(), threading.Event(), []

    def slow(core: Any, progress: Any) -> Any:
        calls.append(1)
        started.set()
        release.wait(10)
        return real(core, progress)

    monkeypatch.setattr(_history, "_verify_in_stretches", slow)
    answers: list[dict[str, Any]] = []
    first = threading.Thread(target=lambda: answers.append(warden.audit_verify(caller=OPERATOR)))
    first.start()
    assert started.wait(10)
    heard: list[int] = []
    second = threading.Thread(
        target=lambda: answers.append(warden.audit_verify(progress=heard.append, caller=OPERATOR))
    )
    second.start()
    while warden.chain_check._listeners == []:  # the second has joined
        threading.Event().wait(0.01)
    release.set()
    first.join(10)
    second.join(10)
    assert len(calls) == 1 and len(answers) == 2 and all(a["ok"] for a in answers)
    assert sum(heard) == warden.head_seq()
    assert warden.audit_verify(caller=OPERATOR)["ok"] and len(calls) == 2  # the next runs afresh


def test_joined_failure_reaches_every_caller() -> None:
    joined: Joined[int] = Joined()
    with pytest.raises(RuntimeError):
        joined.run(lambda advance: (_ for _ in ()).throw(RuntimeError("x")))
    assert joined.run(lambda advance: 7) == 7


def test_a_batch_repeating_one_id(warden: Warden, monkeypatch: pytest.MonkeyPatch) -> None:
    """Linear: each repeat re-reads only the memory it wrote, in a batch of
    the most a batch holds; the speed itself is
    scripts/bench/batch_same_id.py's."""
    count = MAX_BATCH
    inside = [False]
    real_transaction = warden.transaction

    def transaction(size: int = 1) -> Any:
        inside[0] = True
        return real_transaction(size)

    checks_inside: list[bool] = []
    original = _batch.check_input

    def check_input(*args: Any, **kwargs: Any) -> Any:
        checks_inside.append(inside[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(_batch, "check_input", check_input)
    monkeypatch.setattr(warden, "transaction", transaction)
    items = [
        {
            "memory_id": "same",
            "kind": "external_fact",
            "summary": f"판 {n}",
            "content": f"내용 {n}",
            "source_url": "https://example.org/same",
            "scope": {"tenant": "acme"},
        }
        for n in range(count)
    ]
    results = warden.save_many(items, caller=OPERATOR)
    assert [r.version for r in results] == list(range(1, count + 1))
    # every item was checked before the write lock was taken
    assert len(checks_inside) == count and not any(checks_inside)
    got = warden.get("same", caller=OPERATOR)
    assert got.version == count and got.content == f"내용 {count - 1}"
    # the repeats went to the log together: the view is what a replay builds
    assert warden.check_projections(caller=OPERATOR).ok
    assert [v.memory_id for v in warden.query(tenant="acme", text="판", caller=OPERATOR)] == ["same"]
    assert [v.memory_id for v in warden.query(tenant="acme", text=str(count - 1), caller=OPERATOR)] == ["same"]
    assert warden.query(tenant="acme", text=str(count - 2), caller=OPERATOR) == []  # an older version's words


def test_repeats_beside_evidence_and_event_ids(warden: Warden) -> None:
    """A repeat that names evidence saved in the batch, or carries an event
    id, still sees the batch so far."""

    def item(memory_id: str, n: int, **extra: Any) -> dict[str, Any]:
        return {
            "memory_id": memory_id,
            "kind": "permission",
            "summary": f"s {n}",
            "content": f"c {n}",
            "source_url": f"https://example.org/{memory_id}",
            "scope": {"tenant": "acme"},
            **extra,
        }

    results = warden.save_many(
        [
            item("e", 0),
            item("e", 1),
            item("d", 2, derived_from=["e"]),
            item("d", 3, derived_from=["e"], event_id="k1"),
            item("d", 3, derived_from=["e"], event_id="k1"),  # a retry inside the batch: its first answer
            item("e", 4),
        ],
        caller=OPERATOR,
    )
    assert [(r.memory_id, r.version) for r in results] == [("e", 1), ("e", 2), ("d", 1), ("d", 2), ("d", 2), ("e", 3)]
    assert warden.get("d", caller=OPERATOR).derived_from == [{"memory_id": "e", "version": 2}]
    assert warden.check_projections(caller=OPERATOR).ok


def test_the_attacks_over_http_are_bounded(server: Server) -> None:  # noqa: F811
    with server.client("agent") as c:
        for layer in range(21):
            for side in "ab":
                below = [f"h{layer - 1}-a", f"h{layer - 1}-b"] if layer else []
                body = save_body(f"h{layer}-{side}", kind="permission", derived_from=below, scope={"project": "dag"})
                assert c.post("/v1/memories", json=body).status_code == 201
        explained = c.get("/v1/memories/h20-a/explain")
        assert explained.status_code == 200 and _nodes(explained.json()["derivation"]) <= TREE_NODES + 1
        found = c.get("/v1/memories", params={"tenant": "acme", "text": " ".join(["h"] * 499)})
        assert found.status_code == 200, found.text
        refused = c.get("/v1/memories", params={"tenant": "acme", "text": " ".join(f"w{n}" for n in range(33))})
        assert refused.status_code == 422 and refused.json()["field"] == "text"
        # an agent key gives tokens, never a seq to probe the head with (#58)
        refused = c.get("/v1/memories", params={"tenant": "acme", "min_seq": 2**62})
        assert refused.status_code == 422 and refused.json()["field"] == "min_seq"
    with server.client("auditor") as c:
        # a staff key's seq beyond the head is answered at once
        stale = c.get("/v1/memories", params={"tenant": "acme", "min_seq": 2**62})
        assert stale.status_code == 409 and stale.json()["field"] == "min_seq"
        answers: list[httpx.Response] = []
        threads = [threading.Thread(target=lambda: answers.append(c.get("/v1/audit/verify"))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert [a.status_code for a in answers] == [200] * 4 and all(a.json()["ok"] for a in answers)
