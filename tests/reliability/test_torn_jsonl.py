"""A JSONL export cut at every byte offset of its last lines: the import
refuses it naming the line, or takes only whole, chained lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from memwarden.engine import OPERATOR, Warden
from memwarden.events import LogDamaged, verify_file

from ..backends import Backend
from ..conftest import save_memory


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, backend: Backend) -> Path:
    tmp = tmp_path_factory.mktemp("torn")
    w = Warden(backend.db(tmp, "src.db"))
    for i in range(8):
        save_memory(w, f"m{i}", summary=f"한국어 요약 {i} ✓")
    w.revoke({"ids": ["m3"]}, reason="r", caller=OPERATOR)
    path = tmp / "log.jsonl"
    w.export(path, caller=OPERATOR)
    w.close()
    return path


def test_every_cut_of_the_last_lines(exported: Path, tmp_path: Path, backend: Backend) -> None:
    data = exported.read_bytes()
    # the torn lines of interest are events: an export's text lines come after them
    data = b"".join(line for line in data.splitlines(keepends=True) if not line.startswith(b'{"texts":'))
    lines = data.splitlines(keepends=True)
    start = len(data) - sum(len(line) for line in lines[-3:])
    boundaries = {sum(len(line) for line in lines[:k]) for k in range(len(lines) + 1)}
    outcomes = {"refused": 0, "whole": 0}
    for cut in range(start, len(data) + 1):
        path = tmp_path / "cut.jsonl"
        path.write_bytes(data[:cut])
        try:
            count = verify_file(path)
        except LogDamaged as exc:
            assert exc.line is not None and exc.line == data[:cut].count(b"\n") + 1, (cut, exc)
            assert cut not in boundaries
            outcomes["refused"] += 1
            continue
        assert cut in boundaries and count == data[:cut].count(b"\n")
        outcomes["whole"] += 1
    print("torn offsets:", outcomes)
    assert outcomes["whole"] == 4 and outcomes["refused"] == len(data) - start + 1 - 4
    # and the import itself: a torn file writes nothing; a whole prefix imports
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(data[: len(data) - 7])
    w = Warden(backend.db(tmp_path, "into.db"))
    with pytest.raises(LogDamaged, match=f"line {len(lines)}"):
        w.import_log(torn, caller=OPERATOR)
    assert w.log.head().seq == 0
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(b"".join(lines[:-1]))
    assert w.import_log(whole, caller=OPERATOR) == len(lines) - 1
    assert w.log.verify_chain().ok
    w.close()
