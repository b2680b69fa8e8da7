"""Sinks behind every door: the command line (``memwarden sinks ...``), the
HTTP API (``/v1/sinks``, ``"wait": true``), the console's revocation page
and the Prometheus families."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from memwarden.engine import OPERATOR, KeyStore, Warden, metrics, read_back
from memwarden.engine.faces.http import create_app

from ._sinks import (
    notice_of,
    open_warden,
    policy_file,
    prefix,
    receiver,
    redis_server,
    save_args,
    save_n,
    sink_table,
)
from .conftest import Cli
from .sink_receiver import Receiver

__all__ = ["prefix", "receiver", "redis_server"]  # the fixtures, shared


@pytest.fixture
def policy(tmp_path: Path, prefix: str, receiver: Receiver) -> str:
    return str(policy_file(tmp_path, prefix, receiver))


def test_sinks_list_test_readback_and_redeliver_on_the_command_line(
    run_cli: Cli, policy: str, receiver: Receiver
) -> None:
    listed = run_cli.json("--policy-file", policy, "sinks", "list")["sinks"]
    assert [(s["name"], s["kind"], s["pending"]) for s in listed] == [("cache", "redis", 0), ("index", "webhook", 0)]
    assert run_cli.json("--policy-file", policy, "sinks", "test", "index")["ok"] is True
    assert run_cli("--policy-file", policy, "sinks", "test", "cache").exit_code == 0
    missing = run_cli("--policy-file", policy, "sinks", "test", "nope")
    assert missing.exit_code == 1 and "nope" in missing.stderr
    run_cli.json("--policy-file", policy, "save", *save_args("a"))
    revoked = run_cli.json("--policy-file", policy, "revoke", "--tenant", "acme", "--reason", "r")
    pending = run_cli("--policy-file", policy, "sinks", "readback", revoked["revocation_id"])
    assert pending.exit_code == 1 and "sink index: pending" in pending.stdout
    notices = run_cli.json("--policy-file", policy, "sinks", "notices", "--sink", "index")["notices"]
    assert [n["state"] for n in notices] == ["pending"]
    run_cli.json("--policy-file", policy, "scheduler", "--once")
    done = run_cli.json("--policy-file", policy, "sinks", "readback", revoked["revocation_id"])
    assert {s["sink"]: s["status"] for s in done["sinks"]} == {"cache": "confirmed", "index": "confirmed"}
    again = run_cli.json("--policy-file", policy, "sinks", "redeliver", notices[0]["notice_id"], "--sink", "index")
    assert again == {"notice_id": notices[0]["notice_id"], "sink": "index", "requeued": 1}
    run_cli.json("--policy-file", policy, "scheduler", "--once")
    assert receiver.duplicates == 1  # delivered again, under the same id: the receiver applies it once


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("sinks", "redeliver", "nope"), "notice_id"),
        (("sinks", "notices", "--state", "lost"), "--state"),
        (("sinks", "notices", "--limit", "0"), "--limit"),
        (("sinks", "fill", "index", "--tenant", "acme"), "sink"),
    ],
)
def test_bad_input_exits_2_naming_the_field(run_cli: Cli, policy: str, args: tuple[str, ...], field: str) -> None:
    result = run_cli("--policy-file", policy, *args)
    assert result.exit_code == 2 and field in result.stderr, result.stderr


def test_a_bad_sink_table_exits_2_naming_it(run_cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[sinks.x]\nkind = "redis"\nurl = "http://nope"\n', encoding="utf-8")
    result = run_cli("--policy-file", str(path), "sinks", "list")
    assert result.exit_code == 2 and "sinks.x.url" in result.stderr


@pytest.fixture
def app(db_path: Path, prefix: str, receiver: Receiver) -> Iterator[tuple[TestClient, Warden, dict[str, str]]]:
    w = open_warden(db_path, sink_table(prefix, receiver))
    keys = KeyStore(w)
    made = {
        role: keys.create(role, caller=OPERATOR, **({"tenants": ["acme"]} if role == "agent" else {}))[0]
        for role in ("security", "auditor", "agent")
    }
    with TestClient(create_app(w, scheduler=False, mcp=False)) as client:
        yield client, w, made
    w.close()


def test_the_http_api_lists_tests_and_redelivers_for_security_keys(app: Any) -> None:
    client, w, keys = app
    security = {"x-api-key": keys["security"]}
    listed = client.get("/v1/sinks", headers=security).json()["sinks"]
    assert [s["name"] for s in listed] == ["cache", "index"]
    assert client.get("/v1/sinks", headers={"x-api-key": keys["agent"]}).status_code == 403
    assert client.post("/v1/sinks/index/test", headers=security).json()["ok"] is True
    assert client.post("/v1/sinks/index/test", headers={"x-api-key": keys["auditor"]}).status_code == 403
    assert client.post("/v1/sinks/nope/test", headers=security).status_code == 404
    save_n(w, 10)
    head = w.head_seq()
    for loose in ("yes", 1):  # a flag is true or false, no word or number read as one
        refused = client.post(
            "/v1/revocations", json={"selector": {"tenant": "acme"}, "reason": "r", "wait": loose}, headers=security
        )
        assert refused.status_code == 422 and refused.json()["field"] == "wait", refused.text
    assert w.head_seq() == head
    body = {"selector": {"tenant": "acme"}, "reason": "contractor left", "wait": True}
    answer = client.post("/v1/revocations", json=body, headers=security).json()
    assert answer["readback"]["readback_status"] == "confirmed"
    assert {s["sink"]: (s["status"], s["covered"]) for s in answer["sinks"]} == {
        "cache": ("confirmed", 10),
        "index": ("confirmed", 10),
    }
    notice = notice_of(w, answer["seq"])
    redelivered = client.post("/v1/sinks/redeliver", json={"notice_id": notice}, headers=security).json()
    assert redelivered["requeued"] == 2
    refused = client.post("/v1/sinks/redeliver", json={"notice_id": "x"}, headers=security)
    assert refused.status_code == 422 and refused.json()["field"] == "notice_id"
    assert client.post("/v1/sinks/redeliver", json={"notice_id": "ntc_9"}, headers=security).status_code == 404
    without = client.post("/v1/revocations", json={**body, "wait": False}, headers=security).json()
    assert "sinks" not in without and "readback" not in without  # the answer's shape as it was


def test_the_console_shows_each_sinks_line_and_the_metrics_count(app: Any) -> None:
    client, w, keys = app
    save_n(w, 3)
    revoked = w.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
    w.settle_sinks(revoked.revocation_id, caller=OPERATOR)
    form = client.get("/console/login").text
    token = re.search(r'name="login_token" value="([^"]+)"', form)
    assert token
    signed = client.post(
        "/console/login",
        data={"login_token": token[1], "key": keys["security"], "next": "/console/revocations"},
        headers={"origin": "http://testserver"},
        follow_redirects=False,
    )
    assert signed.status_code == 303
    page = client.get(f"/console/revocations/{revoked.revocation_id}").text
    assert "Sinks" in page and re.search(
        r"<th scope=\"row\">index</th><td><span class=\"status status-confirmed\">", page
    )
    assert "As recorded in the log" in page  # each sink's outcome as the log holds it (sink.readback_recorded)
    weekly = client.get("/console/weekly").text
    assert "Dead letters" in weekly
    text = metrics.REGISTRY.get_sample_value("memwarden_sink_readbacks_total", {"sink": "index", "status": "confirmed"})
    assert text is not None and text >= 1
    assert metrics.REGISTRY.get_sample_value(
        "memwarden_sink_deliveries_total", {"sink": "cache", "outcome": "delivered"}
    )


def test_the_revocation_page_says_what_each_count_counts_and_whole_seconds(app: Any) -> None:
    client, w, keys = app
    save_n(w, 3)  # project p1
    w.save(
        memory_id="digest",
        kind="external_fact",
        summary="drawn from m00000",
        content="digest",
        source_url="https://example.org/digest",
        scope={"tenant": "acme", "project": "p2"},
        derived_from=["m00000"],
        caller=OPERATOR,
    )
    revoked = w.revoke({"tenant": "acme", "project": "p1"}, reason="r", caller=OPERATOR)
    assert (revoked.covered, revoked.cascaded) == (3, 1)
    read_back(w, revoked.revocation_id, caller=OPERATOR)
    lines = w.settle_sinks(revoked.revocation_id, caller=OPERATOR)
    assert {x["covered"] for x in lines} == {4} and all(x["checked_at"] for x in lines)
    signed_in(client, keys["security"])
    page = client.get(f"/console/revocations/{revoked.revocation_id}").text
    text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    # the page's 3 and the sinks' 4, each saying what it counts
    assert "3 memories taken out directly at commit" in text, text
    assert "What was drawn from them is invalidated with them" in text
    assert re.search(r"Checked \(covered and drawn from them\)", text)
    assert "Ids named" in text and "every memory drawn from them" in text
    assert re.search(r'<th scope="row">index</th><td>.*?</td><td>4</td>', page), page
    # every time a person reads is to the second (the exact value stays in the title)
    fraction = re.search(r".{0,40}\d{2}:\d{2}:\d{2}\.\d.{0,20}", text)
    assert fraction is None, fraction.group()


def signed_in(client: TestClient, key: str) -> None:
    form = client.get("/console/login").text
    token = re.search(r'name="login_token" value="([^"]+)"', form)
    assert token
    signed = client.post(
        "/console/login",
        data={"login_token": token[1], "key": key, "next": "/console/revocations"},
        headers={"origin": "http://testserver"},
        follow_redirects=False,
    )
    assert signed.status_code == 303
