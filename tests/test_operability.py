"""An operator's tools on a live server: each Prometheus family moving at
/metrics, /readyz beside /healthz, a request id in and out and in the log,
and a backup taken under a write load that restores and verifies."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from memwarden.engine import OPERATOR, Warden

from ._http_server import server_log, start_server
from ._wait import wait_for
from .conftest import Cli

FAMILIES = (
    "memwarden_saves_total",
    "memwarden_events_appended_total",
    'memwarden_gate_decisions_total{reason="usable"}',
    "memwarden_revocations_total",
    "memwarden_readback_latency_seconds_count",
    "memwarden_scheduler_last_run_timestamp_seconds",
    "memwarden_fetch_failures_total",
    "memwarden_view_position",
)


def scrape(text: str) -> dict[str, float]:
    """family (with labels) -> the sum of its samples, fetch failures summed over categories."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        if name.startswith("memwarden_fetch_failures_total"):
            name = "memwarden_fetch_failures_total"
        out[name] = out.get(name, 0.0) + float(value)
    return out


def test_metrics_readiness_and_request_ids(tmp_path: Path) -> None:
    server = start_server(tmp_path / "ops.db", "--scheduler-interval", "0.5")
    try:
        with server.client("security") as c:
            # ready once the scheduler has run and the view caught up: waited for, not slept on
            ready = wait_for(lambda: (r := c.get("/readyz")).status_code == 200 and r, what="/readyz")
            assert ready.json()["ready"] is True, ready.text
            assert ready.json()["scheduler_alive"] and ready.json()["view_caught_up"]
            before = scrape(c.get("/metrics").text)
        with server.client("agent") as c:
            body = {"memory_id": "ops-1", "kind": "external_fact", "summary": "s", "content": "내용"}
            body |= {"source_url": "https://no-such-host.invalid/ops-1", "scope": {"tenant": "acme"}}
            saved = c.post("/v1/memories", json=body, headers={"x-request-id": "req-ops-42"})
            assert saved.status_code == 201 and saved.headers["x-request-id"] == "req-ops-42"
            assert re.fullmatch(r"[0-9a-f]{16}", c.get("/healthz").headers["x-request-id"])
            assert c.get("/v1/memories/ops-1").status_code == 200
            c.post("/v1/memories/ops-1/verify")  # the host does not resolve: a fetch failure
        with server.client("security") as c:
            revoked = c.post(
                "/v1/revocations",
                json={"selector": {"ids": ["ops-1"]}, "reason": "ops", "wait": True},
                headers={"x-request-id": "req-ops-revoke"},
            )
            assert revoked.status_code in (200, 201), revoked.text

            def moved() -> list[str]:  # the families still to move (the scheduler's within a tick or two)
                after = scrape(c.get("/metrics").text)
                return [family for family in FAMILIES if after.get(family, 0) <= before.get(family, 0)]

            still = moved()
            if still:
                wait_for(lambda: not moved(), what=f"{still} to move")
            assert not {"/metrics", "/readyz"} & set(c.get("/openapi.json").json()["paths"])
        log = server_log(server.db).read_text(encoding="utf-8")
        assert "req-ops-revoke" in log, "the request id is in the request's log lines"
    finally:
        server.proc.terminate()
        server.proc.wait(timeout=30)


def test_backup_under_a_write_load_restores_and_verifies(tmp_path: Path, run_cli: Cli, db_path: Path) -> None:
    if "://" in str(db_path):
        refused = run_cli("backup", str(tmp_path / "b.db"))
        assert refused.exit_code == 2 and "pg_dump" in refused.stderr
        return
    warden = Warden(db_path)
    warden.save(
        memory_id="seed", kind="external_fact", summary="s", content="c", source_url="https://x.example/s",
        scope={"tenant": "acme"}, caller=OPERATOR,
    )  # fmt: skip
    point = warden.audit_head(caller=OPERATOR)
    stop = threading.Event()
    written: list[int] = []

    def write() -> None:
        w = Warden(db_path)
        n = 0
        while not stop.is_set():
            w.save(
                memory_id=f"load-{n}", kind="external_fact", summary="부하", content=f"내용 {n}",
                source_url=f"https://x.example/{n}", scope={"tenant": "acme"}, caller=OPERATOR,
            )  # fmt: skip
            n += 1
            written.append(n)
        w.close()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        wait_for(lambda: len(written) >= 3, what="the write load under way")  # the backup is taken under it
        target = tmp_path / "backup.db"
        taken = run_cli.json("backup", str(target))
    finally:
        stop.set()
        writer.join(timeout=30)
        warden.close()
    assert taken["head_seq"] >= point["seq"]
    restored = Cli(target)
    verified = restored.json("audit", "verify", "--against", f"{point['seq']}:{point['hash']}")
    assert verified["ok"] and verified["head_seq"] == taken["head_seq"]
    assert restored.json("projections", "check")["ok"]
    assert run_cli("backup", str(target)).exit_code == 2, "an existing file is never overwritten"
