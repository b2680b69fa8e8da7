"""The parsed revocations a save checks against: kept per store, never
trusted further than the table each read sees."""

from __future__ import annotations

from pathlib import Path

import pytest
from memwarden.engine import OPERATOR, BatchRefused, RevokedScope, Warden
from memwarden.events import FrozenClock, RevocationIssued, Selector

from .conftest import save_memory


def test_a_revocation_by_another_warden_is_in_force_at_the_next_save(
    warden: Warden, db_path: Path, clock: FrozenClock
) -> None:
    save_memory(warden, "m1", project="p1")  # the cache holds the table's state now
    other = Warden(db_path, clock=clock)
    try:
        other.revoke({"tenant": "acme", "project": "p1"}, reason="leaked", caller=OPERATOR)
    finally:
        other.close()
    with pytest.raises(RevokedScope):
        save_memory(warden, "m2", project="p1")
    with pytest.raises(BatchRefused) as refused:
        warden.save_many([_item("m3", "p1")], caller=OPERATOR)
    assert refused.value.problems[0]["error"] == "RevokedScope"
    assert [m.memory_id for m in warden.query(tenant="acme", caller=OPERATOR)] == []


def test_a_rolled_back_revocation_does_not_stay_in_force(warden: Warden, clock: FrozenClock) -> None:
    save_memory(warden, "m1", project="p1")
    with pytest.raises(RuntimeError), warden.transaction() as tx:
        tx.append(
            [
                RevocationIssued(
                    revocation_id="rev_rolled_back",
                    selector=Selector(tenant="acme", project="p1"),
                    reason="a mistake",
                    issued_by="security",
                    effective_at=clock.now(),
                )
            ]
        )
        # read inside the transaction: the cache sees the uncommitted row
        assert [r.revocation_id for r in tx.view.revocations(["acme"])["acme"]] == ["rev_rolled_back"]
        raise RuntimeError("rolled back")
    assert warden.save(**_item("m2", "p1"), caller=OPERATOR).version == 1
    assert {m.memory_id for m in warden.query(tenant="acme", caller=OPERATOR)} == {"m1", "m2"}


def test_each_tenant_is_checked_against_its_own_revocations_and_those_naming_none(warden: Warden) -> None:
    warden.revoke({"tenant": "other", "project": "p1"}, reason="theirs", caller=OPERATOR)
    save_memory(warden, "m1", project="p1")  # another tenant's revocation does not touch acme
    warden.revoke({"source_prefix": "https://example.org/bad"}, reason="every tenant", caller=OPERATOR)
    with pytest.raises(RevokedScope):
        save_memory(warden, "m2", project="p1", source_url="https://example.org/bad/1")
    with warden.transaction() as tx:
        shares = tx.view.revocations(["acme", "other"])
        assert [r.selector["source_prefix"] for r in shares["acme"]] == ["https://example.org/bad"]
        assert len(shares["other"]) == 2


def _item(memory_id: str, project: str) -> dict[str, object]:
    return {
        "memory_id": memory_id,
        "kind": "external_fact",
        "summary": f"about {memory_id}",
        "content": f"text of {memory_id} 내용",
        "source_url": f"https://example.org/{memory_id}",
        "scope": {"tenant": "acme", "project": project},
        "ttl": "6h",
    }
