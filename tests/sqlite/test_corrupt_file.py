"""Garbled pages in a copy of the database: `audit verify` and start-up say
so clearly, and nothing corrupted is ever served as usable."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from memwarden.engine import OPERATOR, StoreDamaged, StoreUnavailable, Warden
from memwarden.events import content_checksum

from .._sizes import larger
from ..conftest import Cli, memwarden_subprocess, save_memory

PAGE = 4096


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    db = tmp_path_factory.mktemp("corrupt") / "good.db"
    w = Warden(db)
    texts = {}
    for i in range(150):
        texts[f"m{i}"] = f"내용 {i} " * 30
        save_memory(w, f"m{i}", content=texts[f"m{i}"], ttl=None, kind="permission")
    w.store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    w.close()
    return db, texts


def pages(db: Path) -> int:
    return db.stat().st_size // PAGE


def test_garbled_pages(original: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    source, texts = original
    detected = 0
    trials = larger(10, 16)
    for seed in range(trials):
        db = tmp_path / f"bad{seed}.db"
        shutil.copy(source, db)
        rng = random.Random(seed)
        data = bytearray(db.read_bytes())
        for page in rng.sample(range(1, pages(db)), 3):  # page 0 is the header; garble three others
            start = page * PAGE + rng.randrange(0, PAGE - 64)
            data[start : start + 64] = rng.randbytes(64)
        db.write_bytes(bytes(data))
        # the first copy through the installed command (its exit codes as a
        # user's shell sees them), the rest in process: the same click
        # command, without an interpreter's start-up three times a copy
        detected += check_one(db, texts, in_process=seed > 0)
    # garbage in free space or slack is harmless and can go unseen; the rest is reported
    assert detected >= trials * 3 // 4, detected


def run(db: Path, *args: str, in_process: bool) -> tuple[int, str, str]:
    """The command's exit code, stdout and stderr."""
    if in_process:
        result = Cli(db)(*args)
        return result.exit_code, result.stdout, result.stderr
    done = memwarden_subprocess(db, *args)
    return done.returncode, done.stdout, done.stderr


def check_one(db: Path, texts: dict[str, str], *, in_process: bool) -> bool:
    audit, audit_out, audit_err = run(db, "audit", "verify", "--json", in_process=in_process)
    assert audit in (0, 1, 2), audit_err
    if audit == 2:
        assert "database" in audit_err  # cannot even be read: said clearly
    started, _, started_err = run(db, "scheduler", "--once", in_process=in_process)
    if audit != 0:  # what audit verify finds, start-up refuses on
        assert started == 2 and ("damaged" in started_err or "database" in started_err)
    projections, _, _ = run(db, "projections", "check", "--json", in_process=in_process)
    texts_bad = audit == 0 and '"texts_damaged":0' not in audit_out
    detected = audit != 0 or projections != 0 or texts_bad

    # whatever can still be read is never corrupted text served as usable
    try:
        w = Warden(db)
    except (StoreDamaged, StoreUnavailable):
        return detected
    try:
        for memory_id, text in texts.items():
            try:
                view = w.get(memory_id, caller=OPERATOR)
            except (StoreDamaged, LookupError, OSError):
                continue
            if view.usable:
                assert view.content == text and view.checksum == content_checksum(text)
            else:
                assert view.content is None
    finally:
        w.close()
    return detected


def test_cli_open_of_a_non_database(tmp_path: Path) -> None:
    db = tmp_path / "junk.db"
    db.write_bytes(b"this is not a database" * 500)
    result = Cli(db)("audit", "verify")
    assert result.exit_code == 2 and "database" in result.stderr
