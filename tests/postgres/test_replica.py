"""Reads from a real streaming replica (``pg_basebackup -R``): ``min_seq``
is honoured there, and no revocation committed on the primary is bypassed
by reading a replica that has not replayed it.

The rule: every read's floor is the larger of its ``min_seq`` and the seq
of the last revocation the primary has committed (read from the primary as
the read starts). The replica serves a read only once its view has
applied that floor; after ``replica_wait`` it goes to the primary."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from memwarden.engine import OPERATOR, Warden

from ..conftest import save_memory

BIN = Path("/usr/lib/postgresql/15/bin")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres(*command: str) -> None:
    """Run a server tool as the postgres user (the tools refuse root)."""
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run([*prefix, *command], check=True, capture_output=True, timeout=120)


def _wait_ready(port: int) -> None:
    deadline = time.monotonic() + 60
    while subprocess.run([str(BIN / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)]).returncode != 0:
        assert time.monotonic() < deadline, f"no server on {port}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[str, str]]:
    """A primary of its own and a streaming replica of it, on free ports."""
    if not (BIN / "pg_basebackup").exists():
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true needs PostgreSQL's server tools in /usr/lib/postgresql/15/bin")
        pytest.skip("PostgreSQL's server tools are not installed")
    root = Path(tempfile.mkdtemp(prefix="memwarden-replica-"))
    shutil.chown(root, "postgres") if os.geteuid() == 0 else None
    primary, replica = root / "primary", root / "replica"
    p_port, r_port = _free_port(), _free_port()
    _as_postgres(str(BIN / "initdb"), "-D", str(primary), "-A", "trust", "-U", "postgres", "--locale=C.UTF-8", "-N")
    options = f"-p {p_port} -k {root} -c listen_addresses=127.0.0.1 -c wal_level=replica -c max_wal_senders=4"
    _as_postgres(str(BIN / "pg_ctl"), "-D", str(primary), "-o", options, "-l", str(root / "primary.log"), "start")
    try:
        _wait_ready(p_port)
        _as_postgres(
            str(BIN / "psql"), "-h", "127.0.0.1", "-p", str(p_port), "-U", "postgres", "-c", "CREATE DATABASE mw"
        )
        _as_postgres(
            str(BIN / "pg_basebackup"),
            "-h",
            "127.0.0.1",
            "-p",
            str(p_port),
            "-U",
            "postgres",
            "-D",
            str(replica),
            "-R",
            "--checkpoint=fast",
        )
        replica_options = f"-p {r_port} -k {root} -c listen_addresses=127.0.0.1 -c hot_standby=on"
        _as_postgres(
            str(BIN / "pg_ctl"), "-D", str(replica), "-o", replica_options, "-l", str(root / "replica.log"), "start"
        )
        _wait_ready(r_port)
        yield f"postgresql://postgres@127.0.0.1:{p_port}/mw", f"postgresql://postgres@127.0.0.1:{r_port}/mw"
    finally:
        for data in (replica, primary):
            if data.exists():
                subprocess.run(
                    [
                        "runuser",
                        "-u",
                        "postgres",
                        "--",
                        str(BIN / "pg_ctl"),
                        "-D",
                        str(data),
                        "-m",
                        "immediate",
                        "stop",
                    ],
                    capture_output=True,
                )
        shutil.rmtree(root, ignore_errors=True)


def _replay(replica_url: str, running: bool) -> None:
    with psycopg.connect(replica_url, autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_resume()" if running else "SELECT pg_wal_replay_pause()")


def test_reads_go_to_the_replica_and_honour_min_seq_and_revocations(pair: tuple[str, str]) -> None:
    primary, replica = pair
    w = Warden(primary, read_url=replica)
    try:
        for i in range(20):
            save_memory(w, f"m{i}", tenant="acme" if i % 2 else "globex", ttl=None)
        head = w.head_seq()
        # min_seq: the replica is waited for, and then it answers
        assert len(w.query(tenant="acme", min_seq=head, caller=OPERATOR)) == 10

        _replay(replica, running=False)  # the replica stops where it is
        try:
            save_memory(w, "late", tenant="acme", ttl=None)
            # no floor asks for it: the replica serves, without the late save
            assert "late" not in {v.memory_id for v in w.query(tenant="acme", caller=OPERATOR)}
            # a min_seq the replica has not reached: after the wait, the primary answers
            assert "late" in {v.memory_id for v in w.query(tenant="acme", min_seq=w.head_seq(), caller=OPERATOR)}
            # a revocation the replica has not replayed: no read may miss it
            w.revoke({"tenant": "acme"}, reason="leak", by="sec", caller=OPERATOR)
            assert w.query(tenant="acme", caller=OPERATOR) == []
            assert not w.get("m1", tenant="acme", caller=OPERATOR).usable
            assert len(w.query(tenant="globex", caller=OPERATOR)) == 10
        finally:
            _replay(replica, running=True)
        # replayed: the replica serves again, revocation included (the sleep paces only: with
        # min_seq the answer holds whichever of the two serves it)
        time.sleep(0.5)
        assert w.query(tenant="acme", min_seq=w.head_seq(), caller=OPERATOR) == []
    finally:
        w.close()


def test_a_replica_that_cannot_be_reached_sends_reads_to_the_primary(pair: tuple[str, str]) -> None:
    primary, _ = pair
    w = Warden(primary, read_url=f"postgresql://postgres@127.0.0.1:{_free_port()}/mw")
    try:
        save_memory(w, "x1", tenant="solo", ttl=None)
        assert [v.memory_id for v in w.query(tenant="solo", caller=OPERATOR)] == ["x1"]
    finally:
        w.close()
