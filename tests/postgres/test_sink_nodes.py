"""Sinks on PostgreSQL with many nodes: each notice is delivered by one
node (taken with ``FOR UPDATE SKIP LOCKED`` and a lease), and a node
killed mid-delivery is taken over once its lease runs out."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from memwarden.engine import OPERATOR, SinkWorker, Warden

from .._sinks import LOOPBACK, open_warden, receiver, save_n
from .._wait import wait_for
from ..sink_receiver import Receiver

__all__ = ["receiver"]  # the fixture, shared


def webhook_only(rcv: Receiver, **extra: Any) -> dict[str, Any]:
    return {
        "index": {
            "kind": "webhook",
            "url": rcv.url,
            "probe_url": rcv.probe_url,
            "secret_env": rcv.env,  # type: ignore[attr-defined]
            "retry_base": 0.05,
            "retry_ceiling": 0.2,
            **extra,
        }
    }


@pytest.fixture
def two_nodes(pg_url: str, receiver: Receiver) -> Iterator[list[Warden]]:
    nodes = [open_warden(pg_url, webhook_only(receiver)) for _ in range(2)]
    yield nodes
    for node in nodes:
        node.close()


def test_two_nodes_deliver_each_notice_once_in_order(two_nodes: list[Warden], receiver: Receiver) -> None:
    a = two_nodes[0]
    ids = save_n(a, 40)
    revocations = [
        a.revoke({"ids": ids[i : i + 2], "tenant": "acme"}, reason=f"r{i}", caller=OPERATOR).revocation_id
        for i in range(0, 40, 2)
    ]
    receiver.slow = 0.01  # long enough that both nodes are at the line at once
    workers = [SinkWorker(node, owner=f"node-{n}") for n, node in enumerate(two_nodes)]
    spec = a.sinks[0]

    def run(worker: SinkWorker) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            worker.deliver(spec)
            if not a.sink_notices(state="pending", caller=OPERATOR):
                return

    threads = [threading.Thread(target=run, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert receiver.duplicates == 0 and receiver.refused == 0
    assert [n["revocation_id"] for n in receiver.applied] == revocations  # once each, in log order
    for worker in workers:
        worker.close()


NODE = """
import json, sys
from memwarden.engine import AddressPolicy, Fetchers, SinkWorker, Warden, sinks_from_table
w = Warden(sys.argv[1], sinks=sinks_from_table(json.loads(sys.argv[2])),
           fetchers=Fetchers(addresses=AddressPolicy.of(["127.0.0.1/32"])))
print("ready", flush=True)
SinkWorker(w, owner="doomed").deliver(w.sinks[0])
"""


def test_a_node_killed_mid_delivery_is_taken_over_within_its_lease(pg_url: str, receiver: Receiver) -> None:
    table = webhook_only(receiver, lease=2)
    survivor = open_warden(pg_url, table, fetchers=LOOPBACK)
    try:
        save_n(survivor, 5)
        revoked = survivor.revoke({"tenant": "acme"}, reason="r", caller=OPERATOR)
        receiver.slow = 30  # the doomed node's request hangs at the receiver
        env = {**os.environ, receiver.env: receiver.secret}  # type: ignore[attr-defined]
        doomed = subprocess.Popen(
            [sys.executable, "-c", NODE, pg_url, json.dumps(table)], env=env, stdout=subprocess.PIPE, text=True
        )
        assert doomed.stdout is not None and doomed.stdout.readline().strip() == "ready"
        wait_for(
            lambda: any(n["lease_owner"] == "doomed" for n in survivor.sink_notices(caller=OPERATOR)),
            what="the doomed node taking the notice",
        )
        worker = SinkWorker(survivor, owner="survivor")
        assert worker.deliver(survivor.sinks[0])["delivered"] == 0  # leased: not taken from a live holder
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=10)
        receiver.slow = 0
        # taken over once the dead holder's lease (2 s) runs out; the wait's bound only ends a failing test
        wait_for(lambda: worker.deliver(survivor.sinks[0])["delivered"], every=0.05, what="the notice taken over")
        states = worker.settle(revoked.revocation_id)
        assert [s["status"] for s in states] == ["confirmed"]
        worker.close()
    finally:
        survivor.close()
