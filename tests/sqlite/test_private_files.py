"""Every file that holds memories is its owner's alone (issue 58): the
store, its write-ahead files, its vector folder, a backup, an export and a
restored store are created 0600 (folders 0700) whatever the umask of the
process that makes them, and the umask is left as it was."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

# run as a user's program: its own process, its own umask; prints each
# file's mode while the store is open, then after a backup, export and restore
PROGRAM = r"""
import json, os, sys
from pathlib import Path
from memwarden.engine import OPERATOR, IndexSettings, Warden, restore

folder = Path(sys.argv[1])
db = folder / "store.db"
umask_before = os.umask(0); os.umask(umask_before)
modes = {}

def mode(path):
    return oct(os.stat(path).st_mode & 0o777) if os.path.exists(path) else None

w = Warden(db, vector_index=IndexSettings(save_after=1))  # its files written at once
w.save(memory_id="m1", kind="external_fact", summary="a note", content="its text 한국어",
       source_url="https://example.org/1", scope={"tenant": "acme", "project": "p"}, caller=OPERATOR)
w.save(memory_id="m2", kind="external_fact", summary="a vector", content="벡터",
       source_url="https://example.org/2", scope={"tenant": "acme"}, embedding=[0.1, 0.2, 0.3], caller=OPERATOR)
w.search(tenant="acme", vector=[0.1, 0.2, 0.3], caller=OPERATOR)
w.vector_index.settle()
for name in ("store.db", "store.db-wal", "store.db-shm", "store.db.vectors"):
    modes[name] = mode(folder / name)
w.backup(folder / "backup.db", caller=OPERATOR)
w.export(folder / "export.jsonl", caller=OPERATOR)
w.close()
# the vector files and their lock: written by the index as it saves
for inside in sorted((folder / "store.db.vectors").iterdir()):
    modes["store.db.vectors/" + ("*.vec" if inside.suffix == ".vec" else inside.name)] = mode(inside)
modes["backup.db"] = mode(folder / "backup.db")
modes["export.jsonl"] = mode(folder / "export.jsonl")
restore(folder / "restored.db", folder / "backup.db")
modes["restored.db"] = mode(folder / "restored.db")
modes["restored.db.vectors"] = mode(folder / "restored.db.vectors")
umask_after = os.umask(0); os.umask(umask_after)
print(json.dumps({"modes": modes, "umask_kept": umask_before == umask_after}))
"""


@pytest.mark.parametrize("umask", [0o000, 0o022], ids=["umask-000", "umask-022"])
def test_files_holding_memories_are_private_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(tmp_path)],
        capture_output=True,
        text=True,
        umask=umask,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["umask_kept"] is True  # a guest in its users' processes: their umask is theirs
    folders = {"store.db.vectors", "restored.db.vectors"}
    assert found["modes"] == {name: ("0o700" if name in folders else "0o600") for name in found["modes"]}
    assert set(found["modes"]) == {
        "store.db",
        "store.db-wal",
        "store.db-shm",
        "store.db.vectors",
        "store.db.vectors/*.vec",
        "store.db.vectors/.lock",
        "backup.db",
        "export.jsonl",
        "restored.db",
        "restored.db.vectors",
    }


def test_a_file_that_exists_keeps_the_mode_its_owner_gave_it(tmp_path: Path) -> None:
    from memwarden.engine import Warden

    db = tmp_path / "shared.db"
    db.touch()
    db.chmod(0o640)  # a group its owner chose to share the store with
    Warden(db).close()
    assert stat.S_IMODE(db.stat().st_mode) == 0o640
