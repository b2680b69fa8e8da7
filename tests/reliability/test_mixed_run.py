"""A mixed long run: 8 processes saving, querying, verifying, revoking and
erasing against one database while the scheduler runs; then the chain, the
projections, the read-backs and an independent reference model all agree.
Larger settings: --runslow (a longer run)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from memwarden.engine import OPERATOR, Warden
from memwarden.events import FrozenClock, RecordedEvent

from ..backends import Backend

WORKER = textwrap.dedent(
    """
    import json, random, sys, time
    from collections import Counter
    from pathlib import Path
    from memwarden.engine import (OPERATOR, InvalidInput, MemoryErased, MemoryNotFound, RevokedScope, Warden,
                                  configure_logging)
    from memwarden.events import content_checksum
    configure_logging(level="CRITICAL")
    db, wid, seconds, src = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), Path(sys.argv[4])
    w = Warden(db)
    rng = random.Random(wid)
    ids = [f"w{wid}-m{i}" for i in range(25)]
    tenants, projects = ["acme", "globex", "initech"], ["p1", "p2"]
    ops, refused = Counter(), Counter()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        op = rng.choices(["save", "query", "get", "verify", "revoke", "erase"], weights=[40, 25, 15, 12, 2, 3])[0]
        memory_id = rng.choice(ids)
        try:
            if op == "save":
                path = src / f"{memory_id}.txt"
                text = f"{memory_id} 내용 {rng.random()}"
                path.write_text(text, encoding="utf-8")
                # one tenant per id: the reference model here keys memories by id alone
                tenant = tenants[ids.index(memory_id) % len(tenants)]
                w.save(memory_id=memory_id, kind="external_fact", summary=f"요약 {memory_id}", content=text,
                       source_url=path.as_uri(), scope={"tenant": tenant, "project": rng.choice(projects)},
                       ttl=rng.choice(["2s", "8s", "1h"]), caller=OPERATOR)
            elif op == "verify":
                path = src / f"{memory_id}.txt"
                if rng.random() < 0.2 and path.exists():
                    path.write_text("changed at the source", encoding="utf-8")
                w.verify(memory_id, accept=rng.random() < 0.3, caller=OPERATOR)
            elif op == "revoke":
                w.revoke({"tenant": rng.choice(tenants), "project": rng.choice(projects)}, reason=f"worker {wid}",
                         caller=OPERATOR)
            elif op == "erase":
                # erasure is for good: requests hit a few memories, or a faster
                # machine (more operations in the same seconds) would erase all
                w.erase(memory_id=rng.choice(ids[:5]), reason="asked", caller=OPERATOR)
            elif op == "get":
                view = w.get(memory_id, caller=OPERATOR)
                assert (not view.usable) or content_checksum(view.content) == view.checksum
            else:
                for view in w.query(tenant=rng.choice(tenants), limit=50, caller=OPERATOR):
                    assert view.usable and content_checksum(view.content) == view.checksum
        except (InvalidInput, RevokedScope, MemoryErased, MemoryNotFound):
            refused[op] += 1
        ops[op] += 1
    print(json.dumps({"ops": ops, "refused": refused}))
    """
)


def covers(selector: dict[str, Any], memory: dict[str, Any]) -> bool:
    return all(memory.get(k) == v for k, v in selector.items() if k in ("tenant", "project") and v is not None)


def reference_usable(events: list[RecordedEvent], now: str) -> dict[str, bool]:
    """What must be usable, from the events alone, written without the engine."""
    memories: dict[str, dict[str, Any]] = {}
    revocations: list[tuple[dict[str, Any], str]] = []
    policies: dict[str, int] = {}
    for event in events:
        p, kind = event.payload, event.type
        m = memories.get(p.get("memory_id", ""))
        if kind == "memory.saved":  # after an erasure too: a new version with its own text
            # a revocation that ever covered a version of this id holds every
            # later version fetched by its effective time, whatever its scope
            until = m["until"] if m else None
            m = memories[p["memory_id"]] = {
                "version": p["version"],
                "tenant": p["scope"]["tenant"],
                "project": p["scope"].get("project"),
                "fetched": p["fetched_at"],
                "expires": p.get("expires_at"),
                "pv": p.get("revocation_version", 1),
                "policy": p.get("policy", "default"),
                "status": "ok",
                "until": until,
            }
            blocking = [eff for sel, eff in revocations if m["fetched"] <= eff and covers(sel, m)]
            if blocking:
                # the first that blocks it, in log order, as it names in revoked_by
                m.update(status="revoked", until=blocking[0] if until is None or until <= blocking[0] else until)
            elif until is not None and m["fetched"] <= until:
                m["status"] = "revoked"
        elif kind == "revocation.issued":
            revocations.append((p["selector"], p["effective_at"]))
            for m in memories.values():  # every version recorded before it, whatever its fetch time
                if m["status"] not in ("erased", "revoked") and covers(p["selector"], m):
                    m.update(status="revoked", until=max(e for e in (m["until"], p["effective_at"]) if e is not None))
        elif kind == "policy.version_changed":
            policies[p["policy"]] = p["version"]
        elif m is None:
            continue
        elif kind == "memory.erased":
            m["status"] = "erased"
        elif m["status"] in ("erased", "revoked") or p.get("version") != m["version"]:
            continue
        elif kind == "memory.verified":
            m.update(status="ok", fetched=p["fetched_at"], expires=p.get("expires_at"), pv=p["revocation_version"])
        elif kind == "memory.verification_failed":
            m["status"] = "unknown"
        elif kind == "memory.invalidated":
            m["status"] = "invalidated"
        elif kind == "memory.expired" and m["status"] == "ok" and m["expires"] == p["expires_at"]:
            m["status"] = "expired"
    return {
        memory_id: m["status"] == "ok"
        and m["pv"] == policies.get(m["policy"], 1)
        and (m["expires"] is None or now < m["expires"])
        for memory_id, m in memories.items()
    }


@pytest.mark.parametrize(
    "seconds",
    [
        pytest.param(8.0, id="8s"),
        # two minutes of load, then the checks: past the suite's 120 s a test
        pytest.param(120.0, id="120s", marks=[pytest.mark.slow, pytest.mark.timeout(900)]),
    ],
)
def test_mixed_long_run(tmp_path: Path, seconds: float, backend: Backend) -> None:
    db = backend.db(tmp_path, "mixed.db")
    src = tmp_path / "sources"
    src.mkdir()
    Warden(db).close()
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    exe = str(Path(sys.executable).with_name("memwarden"))
    scheduler = subprocess.Popen(
        [exe, "--db", str(db), "scheduler", "--interval", "0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), str(db), str(n), str(seconds), str(src)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(8)
    ]
    totals: dict[str, int] = {}
    try:
        for proc in workers:
            out, err = proc.communicate(timeout=seconds + 300)
            assert proc.returncode == 0, err[-3000:]
            for op, count in json.loads(out)["ops"].items():
                totals[op] = totals.get(op, 0) + count
        scheduler.send_signal(signal.SIGTERM)
        _, err = scheduler.communicate(timeout=60)
        assert scheduler.returncode == 0, err[-3000:]
    finally:  # a failure leaves no process running against the database
        for proc in (scheduler, *workers):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    print("mixed run operations:", totals)
    assert sum(totals.values()) > 200 and totals.get("revoke", 0) > 0, totals

    # one last scheduler pass (as after any restart), then everything must agree
    done = subprocess.run([exe, "--db", str(db), "scheduler", "--once"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    now = time.time()
    w = Warden(db, clock=FrozenClock(time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(now + 1))))
    assert w.audit_verify(caller=OPERATOR)["ok"]
    assert w.check_projections(caller=OPERATOR).ok
    revocations = [e.payload["revocation_id"] for e in w.log.read(types=("revocation.issued",))]
    assert revocations
    for revocation_id in revocations:
        assert w.revocation(revocation_id, caller=OPERATOR)["readback_status"] == "confirmed", revocation_id
    expected = reference_usable(list(w.log.read()), w.now())
    actual = {memory_id: w.get(memory_id, caller=OPERATOR).usable for memory_id in expected}
    mismatched = {m: (expected[m], actual[m]) for m in expected if expected[m] != actual[m]}
    print(f"usable at the end: {sum(expected.values())} of {len(expected)}")
    assert not mismatched, mismatched
    assert any(expected.values()) and not all(expected.values())
    w.close()
    os.environ.pop("MEMWARDEN_DB", None)
