"""A real uvicorn server on 127.0.0.1, driven by httpx: the harness every face's
live tests start (`start_server`, the module's `server` fixture, `save_body`)."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from memwarden.engine import OPERATOR, Warden
from memwarden.engine._keys import KeyStore

from .backends import Backend


@dataclass
class Server:
    url: str
    db: Path
    keys: dict[str, str]
    proc: subprocess.Popen

    def client(self, who: str | None = None) -> httpx.Client:
        headers = {"x-api-key": self.keys[who]} if who else {}
        return plain_client(base_url=self.url, headers=headers, timeout=30)

    def head(self) -> int:
        return self.client("auditor").get("/v1/audit/head").json()["seq"]


def plain_client(**options: Any) -> httpx.Client:
    """A client for the test servers' plain http:// (never TLS): without
    the CA bundle httpx otherwise loads for every client it makes, most of
    the making's cost (the suites make thousands)."""
    return httpx.Client(verify=False, **options)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, backend: Backend) -> Iterator[Server]:
    running = start_server(backend.db(tmp_path_factory.mktemp("http"), "server.db"), "--scheduler-interval", "0.5")
    yield running
    running.proc.terminate()
    running.proc.wait(timeout=30)


def server_log(db: Path | str) -> Path:
    """Where a server's output goes: beside its database file, or in a
    folder of its own for a database on a server."""
    if "://" not in str(db):
        return Path(db).with_suffix(".log")
    return Path(tempfile.mkdtemp(prefix="memwarden-server-")) / "server.log"


def start_server(db: Path | str, *extra: str, policy_file: Path | None = None) -> Server:
    w = Warden(db)
    store = KeyStore(w)
    keys = {
        "agent": store.create("agent", tenants=["acme"], agent="bot", caller=OPERATOR)[0],
        "agent2": store.create("agent", tenants=["globex"], caller=OPERATOR)[0],
        "multi": store.create("agent", tenants=["acme", "globex"], caller=OPERATOR)[0],
        "security": store.create("security", caller=OPERATOR)[0],
        "auditor": store.create("auditor", caller=OPERATOR)[0],
    }
    revoked, principal = store.create("agent", tenants=["acme"], caller=OPERATOR)
    store.revoke(principal.key_id, caller=OPERATOR)
    keys["revoked"] = revoked
    keys["bogus"] = "mw_000000000000_notakey"
    w.close()
    port = free_port()
    # the server's output goes to a file beside its database: a pipe nobody
    # reads fills up after some thousands of log lines and blocks every
    # thread that logs (found by a long fuzz run)
    log_file = server_log(db)
    output = open(log_file, "w", encoding="utf-8")
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("memwarden")),
            "--db",
            str(db),
            *(["--policy-file", str(policy_file)] if policy_file else []),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--max-content",
            "200000",
            *extra,
        ],
        stdout=output,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output.close()  # the child has its own descriptor
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    with plain_client(timeout=1) as polling:
        while True:
            try:
                if polling.get(f"{url}/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start: {log_file.read_text(encoding='utf-8')}")
            time.sleep(0.1)
    return Server(url, db, keys, proc)


def save_body(memory_id: str, tenant: str = "acme", **extra: object) -> dict:
    return {
        "memory_id": memory_id,
        "kind": "external_fact",
        "summary": f"{memory_id} 요약",
        "content": f"{memory_id}의 내용",
        "source_url": f"https://src.example/{memory_id}",
        "scope": {"tenant": tenant, **extra.pop("scope", {})},
        **extra,
    }
