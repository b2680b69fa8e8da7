"""The SQLite forms of `--db`: a bare path, or an `sqlite:` URL in SQLAlchemy's spelling, from the flag
or the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from memwarden.engine import OPERATOR, Warden
from memwarden.events import FrozenClock
from memwarden.projections import (
    sqlite_path,
)

from ..conftest import Cli, memwarden_subprocess, save_memory


@pytest.mark.parametrize(
    ("given", "path"),
    [
        ("memwarden.db", "memwarden.db"),
        ("/var/lib/memwarden/m.db", "/var/lib/memwarden/m.db"),
        ("sqlite:///relative.db", "relative.db"),
        ("sqlite:////var/lib/memwarden/m.db", "/var/lib/memwarden/m.db"),
        ("sqlite:///%EC%84%9C%EC%9A%B8.db", "서울.db"),
        ("sqlite:///:memory:", ":memory:"),
    ],
)
def test_an_sqlite_url_names_a_file(given: str, path: str) -> None:
    assert sqlite_path(given) == path


def test_a_bare_path_and_its_url_open_the_same_store(tmp_path: Path, clock: FrozenClock) -> None:
    path = tmp_path / "m.db"
    with Warden(path, clock=clock) as w:
        save_memory(w, "m1", content="서울 본사")
    with Warden(f"sqlite:///{path}", clock=clock) as w:  # an absolute path after the third slash
        assert w.store.backend == "sqlite" and w.path == str(path)
        assert w.get("m1", caller=OPERATOR).content == "서울 본사"


def test_the_cli_takes_the_url_from_the_flag_or_the_environment(tmp_path: Path) -> None:
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert Cli("sqlite:///cli.db").json("audit", "head")["seq"] == 0
    finally:
        os.chdir(cwd)
    assert (tmp_path / "cli.db").exists()
    done = memwarden_subprocess("postgresql://app:s3cret@127.0.0.1:1/none", "audit", "head", "--json")
    assert done.returncode == 2 and "--db" in done.stderr and "cannot connect to PostgreSQL" in done.stderr
    assert "s3cret" not in done.stderr and "app:***@" in done.stderr, done.stderr
    exe = Path(sys.executable).with_name("memwarden")
    env = {**os.environ, "MEMWARDEN_DB": f"sqlite:///{tmp_path / 'env.db'}"}
    out = subprocess.run([str(exe), "audit", "head", "--json"], capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0 and json.loads(out.stdout)["seq"] == 0
    assert (tmp_path / "env.db").exists()
