"""An erased memory's vector leaves every file of the store by the engine's
own doing (issue 40): the database file, its write-ahead log and the
vector index's files, read raw as a disk image would be, with no
checkpoint by the test (``tests/test_recall.py`` checks the contract on
every backend after one; this checks that the erasure itself made it)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from memwarden.engine import OPERATOR, IndexSettings, Warden
from memwarden.events import FrozenClock

from ..conftest import save_memory

DIMS = 32


def marks(vector: list[float]) -> list[bytes]:
    """What the vector could be kept as: float32 as given, and unit length (the index's)."""
    given = np.asarray(vector, dtype=np.float32)
    unit = given / np.linalg.norm(given)
    wide = given.astype(np.float64)
    normed = (wide / np.linalg.norm(wide)).astype(np.float32)  # as the index norms it
    return [given[:8].tobytes(), unit[:8].astype(np.float32).tobytes(), normed[:8].tobytes()] + [
        struct.pack("<8f", *vector[:8])
    ]


def raw(db: Path) -> dict[str, bytes]:
    """Every file beside the database that starts with its name (the file,
    ``-wal``, ``-shm``, the index folder's files), as the disk holds them now."""
    found = {p.name: p.read_bytes() for p in db.parent.glob(db.name + "*") if p.is_file()}
    folder = Path(f"{db}.vectors")
    if folder.is_dir():
        found.update({f"vectors/{p.name}": p.read_bytes() for p in folder.iterdir() if p.is_file()})
    return found


@pytest.fixture
def warden(db_path: Path, clock: FrozenClock) -> Iterator[Warden]:
    # a graph past a small threshold, saved after every change: the index files hold the vector too
    w = Warden(db_path, clock=clock, vector_index=IndexSettings(exact_up_to=10, save_after=1))
    yield w
    w.close()


def test_no_vector_bytes_in_the_file_the_wal_or_the_index(warden: Warden, db_path: Path) -> None:
    secret = [0.987654321 - i * 1e-3 for i in range(DIMS)]
    save_memory(warden, "pii", embedding=secret, scope={"user": "kim"})
    for i in range(40):  # pages of the file and of the WAL, and a graph
        save_memory(warden, f"filler{i}", embedding=[float(i + 1)] + [0.5] * (DIMS - 1))
    found = warden.search(tenant="acme", vector=secret, limit=1, mode="vector", caller=OPERATOR)
    assert [f.view.memory_id for f in found] == ["pii"]
    warden.vector_index.settle()
    warden.vector_index.follow_once()  # its file written
    before = raw(db_path)
    assert any(m in data for data in before.values() for m in marks(secret))
    assert any(name.startswith("vectors/") and name.endswith(".vec") for name in before)

    result = warden.erase(memory_id="pii", reason="GDPR art. 17", caller=OPERATOR)
    assert result.erased == 1 and result.cleared
    after = raw(db_path)
    for name, data in after.items():
        for mark in marks(secret):
            assert mark not in data, name
    warden.close()  # and what closing writes holds none of it either
    for name, data in raw(db_path).items():
        for mark in marks(secret):
            assert mark not in data, name
