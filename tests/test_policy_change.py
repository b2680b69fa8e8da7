"""A policy change like a revocation: a dry run per tenant (Memory API
entries among them), an answer that says how many it retired, the version
already current as a no-op, and the Memory API's load naming what it hides."""

from __future__ import annotations

from memwarden.engine import OPERATOR, Warden

from ._http_server import Server, server  # noqa: F401  (the live server fixture)
from .conftest import Cli, save_memory


def _populate(w: Warden) -> None:
    save_memory(w, "a1")
    save_memory(w, "a2", project="p2")
    save_memory(w, "g1", tenant="globex")
    w.memory_save(tenant="acme", agent="bot", key="notes", content="메모 내용", caller=OPERATOR)


def test_dry_run_counts_what_the_change_retires(warden: Warden) -> None:
    _populate(warden)
    head = warden.head_seq()
    preview = warden.preview_policy("default", 2, caller=OPERATOR)
    assert warden.head_seq() == head, "a dry run writes nothing"
    assert preview["dry_run"] and not preview["unchanged"] and preview["current"] == 1
    assert preview["retired"] == 4 and preview["memory_api"] == 1
    assert preview["tenants"] == [
        {"tenant": "acme", "retired": 3, "memory_api": 1},
        {"tenant": "globex", "retired": 1, "memory_api": 0},
    ]
    done = warden.change_policy("default", 2, caller=OPERATOR)
    assert (done["retired"], done["memory_api"], done["unchanged"]) == (4, 1, False)
    assert warden.head_seq() == done["seq"] == head + 1
    # the version already current: a no-op, and the dry run says so
    again = warden.change_policy("default", 2, caller=OPERATOR)
    assert again["unchanged"] and again["seq"] == done["seq"] and again["retired"] == 0
    assert warden.head_seq() == done["seq"]
    assert warden.preview_policy("default", 2, caller=OPERATOR)["unchanged"]


def test_memory_load_lists_what_it_hides(warden: Warden) -> None:
    _populate(warden)
    warden.memory_save(tenant="acme", agent="bot", key="rules", content="keep", caller=OPERATOR)
    loaded = warden.memory_load(tenant="acme", agent="bot", caller=OPERATOR)
    assert loaded["hidden"] == [] and len(loaded["memories"]) == 2
    warden.change_policy("default", 2, caller=OPERATOR)
    loaded = warden.memory_load(tenant="acme", agent="bot", caller=OPERATOR)
    assert [m["key_name"] for m in loaded["memories"]] == ["notes", "rules"]
    assert loaded["hidden"] == [
        {"key_name": "notes", "reason": "policy_changed", "action": "reverify"},
        {"key_name": "rules", "reason": "policy_changed", "action": "reverify"},
    ]


def test_cli_dry_run_answer_and_no_op(warden: Warden, run_cli: Cli) -> None:
    _populate(warden)
    head = warden.head_seq()
    text = run_cli("policy", "set", "default", "2", "--dry-run").stdout
    assert "would retire 4 memories, 1 of them Memory API entries" in text and "acme\t3 memories" in text
    assert run_cli.json("policy", "set", "default", "2", "--dry-run")["retired"] == 4
    assert warden.head_seq() == head
    done = run_cli("policy", "set", "default", "2", "--yes")
    assert done.exit_code == 0 and "4 memories retired (1 Memory API entries)" in done.stdout
    again = run_cli("policy", "set", "default", "2")
    assert again.exit_code == 0 and "already at version 2: nothing changed" in again.stdout
    assert run_cli.json("policy", "set", "default", "2")["unchanged"] is True
    assert warden.head_seq() == head + 1
    refused = run_cli("policy", "set", "default", "1", "--dry-run")
    assert refused.exit_code == 2 and "retired" in refused.stderr


def test_http_dry_run_and_change(server: Server) -> None:  # noqa: F811
    with server.client("agent") as c:
        assert c.post("/memory/save", json={"agent": "bot", "key": "k", "content": "c"}).status_code in (200, 201)
        assert c.post("/v1/policies/pol-http/dry-run", json={"version": 2}).status_code == 403
    head = server.head()
    with server.client("security") as c:
        preview = c.post("/v1/policies/default/dry-run", json={"version": 5})
        assert preview.status_code == 200, preview.text
        assert preview.json()["memory_api"] >= 1 and server.head() == head
        done = c.post("/v1/policies/default", json={"version": 5}).json()
        assert done["retired"] == preview.json()["retired"] and not done["unchanged"]
        same = c.post("/v1/policies/default", json={"version": 5})
        assert same.status_code == 200 and same.json()["unchanged"] and same.json()["seq"] == done["seq"]
        bad = c.post("/v1/policies/default/dry-run", json={"version": 4})
        assert bad.status_code == 422 and bad.json()["field"] == "version"
    with server.client("agent") as c:
        loaded = c.get("/memory/load", params={"agent": "bot"}).json()
        assert {"key_name": "k", "reason": "policy_changed", "action": "reverify"} in loaded["hidden"]
