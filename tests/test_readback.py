"""The read-back names what leaks, and only that: a version the revocation
covers, served by any read path, is reported with its id; a version saved
afresh after the revocation (from a later fetch) is no leak, even when it
lands while the read-back is reading."""

from __future__ import annotations

from memwarden.engine import OPERATOR, Warden
from memwarden.engine._readback import read_back
from memwarden.events import FrozenClock

from .conftest import agent_key, save_memory

TA = agent_key("ta")


def test_a_fresh_save_during_the_read_back_is_no_leak(warden: Warden, clock: FrozenClock) -> None:
    save_memory(warden, "rb1", tenant="ta", scope={"project": "rbp"}, caller=TA)
    rev = warden.revoke({"tenant": "ta", "project": "rbp"}, reason="rotated", caller=OPERATOR)
    clock.advance("1s")

    def racing(tenant: str, ids: list[str]) -> list[tuple[str, int]]:
        # the agent saves afresh between the read-back's list of covered ids and its reads
        saved = save_memory(warden, "rb1", tenant="ta", scope={"project": "rbp"}, content="fresh", caller=TA)
        return [("rb1", saved.version)]

    result = read_back(warden, rev.revocation_id, caller=OPERATOR, http=racing)
    assert result["readback_status"] == "confirmed" and result["leaked_ids"] == []
    assert warden.get("rb1", caller=TA).usable


def test_a_path_that_serves_a_covered_version_is_reported_with_its_id(warden: Warden) -> None:
    for memory_id in ("a", "b"):
        save_memory(warden, memory_id, tenant="ta", scope={"project": "p"}, caller=TA)
    rev = warden.revoke({"tenant": "ta", "project": "p"}, reason="leak", caller=OPERATOR)

    def stale_cache(tenant: str, ids: list[str]) -> list[tuple[str, int]]:
        return [("b", 1)]  # a copy kept of what was revoked

    result = read_back(warden, rev.revocation_id, caller=OPERATOR, http=stale_cache)
    assert result["readback_status"] == "failed" and result["leaked_ids"] == ["b"]
    assert result["still_visible"] == 1
