"""A revocation's dry run: what it would cover, per tenant, with nothing
written; and the list of revocations with their read-back."""

from __future__ import annotations

import pytest
from memwarden.engine import OPERATOR, InvalidInput, Warden
from memwarden.events import FrozenClock

from ._http_server import Server, server  # noqa: F401  (the live server fixture)
from .conftest import Cli, save_memory
from .test_revoke import populated  # noqa: F401  (four memories in two tenants)

SELECTORS = [
    {"tenant": "acme"},
    {"tenant": "acme", "project": "p2"},
    {"user": "kim"},
    {"kind": "project_rule"},
    {"source_prefix": "https://wiki.acme/"},
    {"ids": ["a1", "g1"]},
    {"everything": True},
    {"kind": "no-such-kind"},
]


@pytest.mark.parametrize("selector", SELECTORS, ids=lambda s: ",".join(s))
def test_the_dry_run_counts_what_the_revocation_then_covers(populated: Warden, selector: dict) -> None:  # noqa: F811
    head = populated.head_seq()
    preview = populated.preview_revocation(selector, caller=OPERATOR)
    assert populated.head_seq() == head, "a dry run writes nothing"
    assert preview["dry_run"] is True
    assert preview["everything"] is bool(selector.get("everything"))
    result = populated.revoke(selector, reason="incident", caller=OPERATOR)
    assert preview["covered"] == result.covered
    assert preview["covered"] == sum(t["covered"] for t in preview["tenants"])
    assert [t["tenant"] for t in preview["tenants"]] == sorted(t["tenant"] for t in preview["tenants"])
    # the same selector again covers nothing more: what it took out stays out
    assert populated.preview_revocation(selector, caller=OPERATOR)["covered"] == 0


def test_the_dry_run_counts_every_version_recorded_before_it(populated: Warden, clock: FrozenClock) -> None:  # noqa: F811
    preview = populated.preview_revocation({"user": "kim"}, caller=OPERATOR)
    assert preview["tenants"] == [{"tenant": "acme", "covered": 1}, {"tenant": "globex", "covered": 1}]
    # coverage is by position: every version recorded before the revocation,
    # whatever its effective time says against the fetch times
    now = populated.preview_revocation({"tenant": "acme"}, caller=OPERATOR)
    past = populated.preview_revocation({"tenant": "acme"}, effective_at="2020-01-01T00:00:00Z", caller=OPERATOR)
    assert past["covered"] == now["covered"] > 0


def test_the_dry_run_refuses_what_the_revocation_refuses(populated: Warden) -> None:  # noqa: F811
    with pytest.raises(InvalidInput, match="empty selector"):
        populated.preview_revocation({}, caller=OPERATOR)
    with pytest.raises(InvalidInput, match="everything"):
        populated.preview_revocation({"everything": True, "tenant": "acme"}, caller=OPERATOR)


def test_revocations_newest_first_with_their_read_back(populated: Warden) -> None:  # noqa: F811
    first = populated.revoke({"tenant": "globex"}, reason="one", caller=OPERATOR)
    second = populated.revoke({"kind": "project_rule"}, reason="two", by="sec-lee", caller=OPERATOR)
    listed = populated.revocations(caller=OPERATOR)
    assert [r["revocation_id"] for r in listed] == [second.revocation_id, first.revocation_id]
    assert listed[0]["selector"]["kind"] == "project_rule" and listed[0]["issued_by"] == "sec-lee"
    assert listed[0]["covered"] == 1 and listed[0]["readback_status"] is None
    assert [r["revocation_id"] for r in populated.revocations(limit=1, offset=1, caller=OPERATOR)] == [
        first.revocation_id
    ]
    with pytest.raises(InvalidInput, match="limit"):
        populated.revocations(limit=0, caller=OPERATOR)


def test_cli_dry_run(populated: Warden, run_cli: Cli) -> None:  # noqa: F811
    head = populated.head_seq()
    data = run_cli.json("revoke", "--user", "kim", "--reason", "x", "--dry-run")
    assert data["covered"] == 2 and data["dry_run"] is True
    text = run_cli("revoke", "--id", "a1", "--tenant", "acme", "--reason", "x", "--dry-run").stdout
    assert "would take out 1 memory now" in text and "nothing was written" in text
    assert "acme\t1 memory" in text
    everything = run_cli("revoke", "--everything", "--reason", "x", "--dry-run").stdout
    assert "EVERY memory of every tenant, 4 memories now" in everything
    nothing = run_cli("revoke", "--kind", "none", "--reason", "x", "--dry-run").stdout
    assert "0 memories" in nothing and "covers nothing today" in nothing
    assert populated.head_seq() == head


def test_http_dry_run_and_list(server: Server) -> None:  # noqa: F811
    with server.client("agent") as c:
        body = {"memory_id": "dry-1", "kind": "external_fact", "summary": "s", "content": "c"}
        body |= {"source_url": "https://src.example/dry-1", "scope": {"tenant": "acme", "project": "dry"}}
        assert c.post("/v1/memories", json=body).status_code == 201
        refused = c.post("/v1/revocations/dry-run", json={"selector": {"project": "dry"}, "reason": "r"})
        assert refused.status_code == 403
    head = server.head()
    with server.client("security") as c:
        preview = c.post("/v1/revocations/dry-run", json={"selector": {"project": "dry"}, "reason": "r"})
        assert preview.status_code == 200, preview.text
        assert preview.json()["covered"] == 1 and preview.json()["tenants"] == [{"tenant": "acme", "covered": 1}]
        assert server.head() == head
        empty = c.post("/v1/revocations/dry-run", json={"selector": {}, "reason": "r"})
        assert empty.status_code == 422 and empty.json()["field"].startswith("selector")
        issued = c.post("/v1/revocations", json={"selector": {"project": "dry"}, "reason": "r", "wait": True}).json()
    with server.client("auditor") as c:
        listed = c.get("/v1/revocations", params={"limit": 1}).json()["revocations"]
        assert listed[0]["revocation_id"] == issued["revocation_id"]
        assert listed[0]["readback_status"] == "confirmed"
        assert c.get("/v1/revocations", params={"limit": 0}).status_code == 422


def test_a_memory_saved_after_a_dry_run_is_not_blocked_by_it(warden: Warden, clock: FrozenClock) -> None:
    save_memory(warden, "m1")
    warden.preview_revocation({"tenant": "acme"}, caller=OPERATOR)
    clock.advance("1s")
    save_memory(warden, "m1")
    assert warden.get("m1", caller=OPERATOR).usable
