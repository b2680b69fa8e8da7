"""A large batch builds its events before it takes the write lock, and
judges them again under it: whatever commits between the two (a save of
the same id, a revocation, a policy change, another agent taking the id)
is what the batch is decided against, on both backends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from memwarden.engine import OPERATOR, BatchRefused, Warden, _batch

from .conftest import agent_key, save_memory

SIZE = 150  # past the write turns' large (100): a batch this size is prepared


def memory(i: int | str, **extra: Any) -> dict[str, Any]:
    return {
        "memory_id": f"m{i}",
        "kind": "external_fact",
        "summary": f"서울 요약 {i}",
        "content": f"내용 {i}",
        "source_url": f"https://example.org/{i}",
        "scope": {"tenant": "acme", "project": "p1"},
        "ttl": "6h",
        **extra,
    }


@pytest.fixture
def between(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Callable[[], None]]]:
    """Writes to run after the batch is prepared and before it takes the lock."""
    writes: list[Callable[[], None]] = []
    prepared: list[int] = []
    original = _batch._prepared

    def racing(core: Any, checked: Any, caller: Any, pace: Any) -> Any:
        ready = original(core, checked, caller, pace)
        prepared.append(len(ready.ready))
        for write in writes:
            write()
        return ready

    monkeypatch.setattr(_batch, "_prepared", racing)
    yield writes
    assert prepared and prepared[0] > 0, "the batch was not prepared before the lock"


def test_a_version_saved_between_is_followed_not_repeated(warden: Warden, between: list[Any]) -> None:
    save_memory(warden, "m0")
    between.append(lambda: save_memory(warden, "m0", content="saved between"))
    results = warden.save_many([memory(i) for i in range(SIZE)], caller=OPERATOR)
    assert (results[0].memory_id, results[0].version) == ("m0", 3)
    assert warden.get("m0", caller=OPERATOR).content == "내용 0"
    assert warden.check_projections(caller=OPERATOR).ok and warden.audit_verify(caller=OPERATOR)["ok"]


def test_a_revocation_issued_between_refuses_the_batch(warden: Warden, between: list[Any]) -> None:
    between.append(lambda: warden.revoke({"tenant": "acme", "project": "p1"}, reason="withdrawn", caller=OPERATOR))
    with pytest.raises(BatchRefused) as refused:
        warden.save_many(
            [memory(i, fetched_at="2020-01-01T00:00:00Z") for i in range(SIZE)],
            caller=OPERATOR,
        )
    assert len(refused.value.problems) == SIZE
    assert {p["error"] for p in refused.value.problems} == {"RevokedScope"}
    assert [e.type for e in warden.log.read()] == ["revocation.issued"], "nothing of the batch was written"


def test_a_policy_version_made_current_between_is_the_one_recorded(warden: Warden, between: list[Any]) -> None:
    save_memory(warden, "first", policy="billing")
    between.append(lambda: warden.set_policy("billing", 2, caller=OPERATOR))
    results = warden.save_many([memory(i, policy="billing") for i in range(SIZE)], caller=OPERATOR)
    seqs = {r.seq for r in results}
    recorded = [e for e in warden.log.read(types=("memory.saved",)) if e.seq in seqs]
    assert {e.payload["revocation_version"] for e in recorded} == {2}
    assert warden.get("m5", caller=OPERATOR).usable


def test_an_id_taken_by_another_agent_between_is_refused(warden: Warden, between: list[Any]) -> None:
    mine, theirs = agent_key("acme", agent="a1"), agent_key("acme", agent="a2", key_id="other")
    between.append(lambda: save_memory(warden, "m7", caller=theirs, scope={"tenant": "acme", "agent": "a2"}))
    batch = [memory(i, scope={"tenant": "acme", "agent": "a1"}) for i in range(SIZE)]
    with pytest.raises(BatchRefused) as refused:
        warden.save_many(batch, caller=mine)
    assert [(p["index"], p["error"]) for p in refused.value.problems] == [(7, "MemoryIdTaken")]
    assert warden.log.head().seq == 1, "only the other agent's save"
