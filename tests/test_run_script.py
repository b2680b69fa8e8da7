"""``scripts/run``, the README's first command: a taken port said in one
line, and a start that installs nothing when nothing changed."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).parent.parent
SCRIPT = ROOT / "scripts" / "run"
STAMP = ROOT / ".venv" / ".memwarden-installed"


def stamp(target: str = ".") -> str:
    """What scripts/run writes once it has installed ``target`` (the project, or with its postgres extra)."""
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + f"{target}\n".encode()).hexdigest() + "\n"


def run_script(tmp_path: Path, port: int, **env_extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PORT": str(port), "MEMWARDEN_DB": str(tmp_path / "run.db"), **env_extra}
    return subprocess.Popen(
        ["bash", str(SCRIPT)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_a_taken_port_is_said_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_script(tmp_path, port)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert err.strip().splitlines() == [
        f"port {port} on 127.0.0.1 is taken (another memwarden?): run PORT={port + 1} scripts/run"
    ]
    assert out == "" and not (tmp_path / "run.db").exists()


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "memwarden").exists(), reason="needs the project's .venv")
def test_a_second_start_installs_nothing_and_keeps_its_demo_key(tmp_path: Path) -> None:
    # as scripts/run leaves it after an install of this very pyproject.toml
    STAMP.write_text(stamp())
    stamped = STAMP.stat().st_mtime_ns
    keys = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = run_script(tmp_path, port)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.1)
            key = (tmp_path / "run.db.demo-key").read_text().strip()
            keys.append(key)
            loaded = httpx.get(
                f"http://127.0.0.1:{port}/memory/load", params={"agent": "demo-agent"}, headers={"x-api-key": key}
            )
            assert loaded.status_code == 200 and loaded.json() == {"memories": [], "hidden": []}
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            out, _ = proc.communicate(timeout=30)
        assert f"memwarden on http://127.0.0.1:{port}" in out and key in out
    assert keys[0] == keys[1], "the demo key is kept while it is active"
    assert STAMP.stat().st_mtime_ns == stamped, "nothing was installed"
    assert (tmp_path / "run.db.demo-key").stat().st_mode & 0o777 == 0o600, "a credential: its owner's only"


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "memwarden").exists(), reason="needs the project's .venv")
def test_a_revoked_demo_key_is_replaced(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from memwarden.engine.faces.cli import cli

    db, key_file = tmp_path / "run.db", tmp_path / "run.db.demo-key"
    made = CliRunner().invoke(cli, ["--db", str(db), "keys", "create", "--role", "agent", "--tenant", "demo"])
    old = made.output.strip()
    key_file.write_text(old + "\n")
    assert CliRunner().invoke(cli, ["--db", str(db), "keys", "revoke", old.split("_")[1]]).exit_code == 0
    from memwarden.engine import KeyStore, Warden
    from memwarden.engine.faces.cli._serve import _kept_demo_key

    warden = Warden(str(db))
    try:
        new = _kept_demo_key(warden, str(key_file))
        principal = KeyStore(warden).authenticate(new)
    finally:
        warden.close()
    assert new != old and key_file.read_text() == new + "\n"
    assert principal is not None and principal.tenants == ("demo",) and principal.agent == "demo-agent"


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "memwarden").exists(), reason="needs the project's .venv")
def test_postgres_from_the_quick_start(tmp_path: Path) -> None:
    from .backends import PostgresBackend

    pg = PostgresBackend()
    why = pg.available()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    url = pg.new_database(f"mw_run_{os.getpid()}")
    key_file = tmp_path / "pg.demo-key"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    STAMP.write_text(stamp(".[postgres]"))  # the test extras hold the driver already
    proc = run_script(tmp_path, port, MEMWARDEN_DB=url, MEMWARDEN_DEMO_KEY=str(key_file))
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if key_file.exists() and httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.2)
        key = key_file.read_text().strip()
        headers = {"x-api-key": key}
        saved = httpx.post(
            f"http://127.0.0.1:{port}/memory/save",
            json={"agent": "demo-agent", "key": "k", "content": "c"},
            headers=headers,
        )
        assert saved.status_code in (200, 201), saved.text
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        pg.close()
    assert f"memwarden on http://127.0.0.1:{port}" in out and "store PostgreSQL postgresql://" in out and key in out
    assert "Traceback" not in err
