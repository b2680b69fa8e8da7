"""Signed acknowledgement read-back (``ack = true``, issue 42): a webhook
sink acknowledges a notice, in its answer to the delivery or by a later
callback, signed with its own secret, naming the covered ids it removed;
memwarden verifies it and records confirmed or leaked from it, and refuses
a forged, stale or replayed acknowledgement."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from memwarden.engine import (
    OPERATOR,
    AckRefused,
    InvalidInput,
    SinkNotFound,
    SinkWorker,
    Warden,
    sinks_from_table,
)
from memwarden.engine.faces.http import create_app
from standardwebhooks import Webhook

from ._sinks import LOOPBACK, notice_of, receiver, save_n
from .sink_receiver import Receiver, new_secret

__all__ = ["receiver"]  # the fixture, shared


def ack_table(rcv: Receiver, **extra: Any) -> dict[str, Any]:
    return {
        "index": {
            "kind": "webhook",
            "url": rcv.url,
            "ack": True,
            "secret_env": rcv.env,  # type: ignore[attr-defined]
            "retry_base": 0.05,
            "retry_ceiling": 0.2,
            **extra,
        }
    }


@pytest.fixture
def w(db_path: Path, receiver: Receiver) -> Iterator[Warden]:
    warden = Warden(db_path, sinks=sinks_from_table(ack_table(receiver)), fetchers=LOOPBACK)
    yield warden
    warden.close()


def states(w: Warden, revocation_id: str) -> dict[str, Any]:
    return {s["sink"]: s for s in w.settle_sinks(revocation_id, caller=OPERATOR)}


def recorded(w: Warden) -> list[tuple[str, bool, list[str]]]:
    return [
        (e.payload["outcome"], e.payload["final"], e.payload["leaked_ids"])
        for e in w.log.read(types=("sink.readback_recorded",))
    ]


def test_an_ack_in_the_deliverys_answer_confirms_the_sink(w: Warden, receiver: Receiver) -> None:
    ids = save_n(w, 6)
    receiver.hold("acme", ids)
    receiver.ack_mode = "response"
    result = w.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
    line = states(w, result.revocation_id)["index"]
    assert line["status"] == "confirmed" and line["covered"] == 6 and line["latency_ms"] >= 0
    assert recorded(w) == [("confirmed", True, [])]
    assert receiver.requests and all(path == "/notices" for path, _, _ in receiver.requests)  # no probe at all


def test_an_ack_that_leaves_ids_out_is_a_leak_of_exactly_those(w: Warden, receiver: Receiver) -> None:
    ids = save_n(w, 6)
    receiver.hold("acme", ids)
    receiver.ack_mode = "response"
    receiver.keep = {ids[1], ids[4]}
    result = w.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
    line = states(w, result.revocation_id)["index"]
    assert line["status"] == "leaked" and line["leaked_ids"] == [ids[1], ids[4]]
    assert recorded(w) == [("leaked", False, [ids[1], ids[4]])]
    # a later acknowledgement (a callback) of the rest: confirmed
    body, headers = receiver.ack(notice_of(w, result.seq), {"acme": [ids[1], ids[4]]})
    assert w.sink_ack("index", body, headers, caller=OPERATOR)["removed"] == {"acme": [ids[1], ids[4]]}
    assert states(w, result.revocation_id)["index"]["status"] == "confirmed"
    assert recorded(w)[-1] == ("confirmed", True, [])


def test_a_callback_ack_over_http_needs_no_key_and_a_forged_or_replayed_one_is_refused(
    w: Warden, receiver: Receiver
) -> None:
    ids = save_n(w, 3)
    receiver.hold("acme", ids)
    receiver.ack_mode = "callback"
    result = w.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
    line = states(w, result.revocation_id)["index"]
    assert line["status"] == "unreachable" and "acknowledgement" in line["detail"]  # none yet
    [(body, headers)] = receiver.acks
    with TestClient(create_app(w, scheduler=False, mcp=False)) as client:
        url = "/v1/sinks/index/ack"
        forged = body.replace(b'"acme": [', b'"acme": ["m99999", ')
        refused = client.post(url, content=forged, headers=headers)
        assert refused.status_code == 401 and refused.json()["error"] == "ack_refused"
        assert refused.json()["field"] == "webhook-signature"
        stranger = Receiver(new_secret())  # signed with another secret
        try:
            other_body, other_headers = stranger.ack(notice_of(w, result.seq), {"acme": ids})
        finally:
            stranger.stop()
        assert client.post(url, content=other_body, headers=other_headers).status_code == 401
        stale = {**headers, "webhook-timestamp": str(int(time.time()) - 600)}  # the timestamp is signed too
        assert client.post(url, content=body, headers=stale).status_code == 401
        assert states(w, result.revocation_id)["index"]["status"] == "unreachable"  # nothing accepted
        accepted = client.post(url, content=body, headers=headers)
        assert accepted.status_code == 200, accepted.text
        assert accepted.json()["notice_id"] == notice_of(w, result.seq)
        replayed = client.post(url, content=body, headers=headers)
        assert replayed.status_code == 401 and replayed.json()["field"] == "webhook-id"
        missing = client.post(url, content=body, headers={"content-type": "application/json"})
        assert missing.status_code == 401
        # a name that is no ack sink answers as a wrong signature does: the route tells no sink's name or kind
        stranger = client.post("/v1/sinks/nope/ack", content=body, headers=headers)
        assert stranger.status_code == 401 and stranger.json()["field"] == "webhook-signature", stranger.text
        assert set(stranger.json()) == set(client.post(url, content=body + b" ", headers=headers).json())
    assert states(w, result.revocation_id)["index"]["status"] == "confirmed"
    assert recorded(w) == [("confirmed", True, [])]


def test_a_forged_ack_in_the_deliverys_answer_is_refused(w: Warden, receiver: Receiver) -> None:
    ids = save_n(w, 3)
    receiver.hold("acme", ids)
    receiver.ack_mode = "response"
    receiver.signer = Webhook(new_secret())  # its answers signed with a secret memwarden does not hold
    result = w.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
    line = states(w, result.revocation_id)["index"]
    assert line["status"] == "unreachable" and len(receiver.applied) == 1  # delivered; the ack refused
    assert recorded(w) == []


def test_an_ack_naming_an_unknown_notice_or_a_bad_body_is_refused_naming_the_field(
    w: Warden, receiver: Receiver
) -> None:
    with pytest.raises(SinkNotFound):
        w.sink_ack("index", *receiver.ack("ntc_000000000777", {}), caller=OPERATOR)
    body, headers = receiver.ack("not-a-notice", {})
    with pytest.raises(InvalidInput) as bad:
        w.sink_ack("index", body, headers, caller=OPERATOR)
    assert bad.value.field == "notice_id"
    with pytest.raises(AckRefused) as unsigned:
        w.sink_ack("index", body, {}, caller=OPERATOR)
    assert unsigned.value.field == "webhook-id"


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"ack": "yes"}, "sinks.x.ack"),
        ({"ack": True, "probe_url": "http://h/p"}, "sinks.x.probe_url"),
        ({}, "sinks.x.probe_url"),
    ],
)
def test_a_bad_ack_setting_is_refused_naming_its_field(extra: dict[str, Any], field: str) -> None:
    table = {"x": {"kind": "webhook", "url": "http://h", "secret_env": "S", **extra}}
    with pytest.raises(InvalidInput) as refused:
        sinks_from_table(table)
    assert refused.value.field == field


def test_an_ack_sink_answers_the_test_and_a_redis_sink_takes_no_ack(w: Warden, receiver: Receiver) -> None:
    assert w.test_sink("index", caller=OPERATOR)["ok"] is True
    assert receiver.applied == []  # the ping is not a notice
    assert [s["readback"] for s in w.sinks_status(caller=OPERATOR)] == ["ack"]
    with pytest.raises(AckRefused):
        w.sink_ack("nope", b"{}", {}, caller=OPERATOR)
    SinkWorker(w).close()


def test_the_revocation_page_shows_a_leak_an_ack_reported(w: Warden, receiver: Receiver) -> None:
    """A leak is recorded with no latency (nothing was confirmed): the
    console's revocation page shows it, the sink's line and the log's record."""
    import re

    from memwarden.engine import KeyStore

    ids = save_n(w, 4)
    receiver.hold("acme", ids)
    receiver.ack_mode = "response"
    receiver.keep = {ids[2]}
    result = w.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
    assert states(w, result.revocation_id)["index"]["status"] == "leaked"
    key = KeyStore(w).create("security", caller=OPERATOR)[0]
    with TestClient(create_app(w, scheduler=False, mcp=False)) as client:
        token = re.search(r'name="login_token" value="([^"]+)"', client.get("/console/login").text)
        assert token
        signed = client.post(
            "/console/login",
            data={"login_token": token[1], "key": key, "next": "/console/revocations"},
            headers={"origin": "http://testserver"},
            follow_redirects=False,
        )
        assert signed.status_code == 303
        page = client.get(f"/console/revocations/{result.revocation_id}")
        assert page.status_code == 200, page.text[-2000:]
        assert page.text.count(ids[2]) >= 2 and "status-leaked" in page.text  # the line and the log's record
