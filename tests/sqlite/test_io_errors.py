"""I/O errors: the JSONL log's writes and fsyncs fail at the Nth call, for
every N; nothing acknowledged is lost and no partial event appears."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from memwarden.events import FrozenClock, JsonlEventLog, verify_file

from ..conftest import saved


class Faults:
    """Counts write/flush/fsync calls and fails the Nth (a write fails after
    writing half its bytes, as a full disk or a dying device would)."""

    def __init__(self, fail_at: int) -> None:
        self.fail_at = fail_at
        self.calls = 0

    def tick(self) -> bool:
        self.calls += 1
        return self.calls == self.fail_at

    def opener(self, path: Any, mode: str) -> Any:
        return _File(open(path, mode), self)

    def fsync(self, fd: int) -> None:
        if self.tick():
            raise OSError(5, "Input/output error (injected at fsync)")
        os.fsync(fd)


class _File:
    def __init__(self, fh: Any, faults: Faults) -> None:
        self.fh = fh
        self.faults = faults

    def write(self, data: bytes) -> int:
        if self.faults.tick():
            self.fh.write(data[: len(data) // 2])
            self.fh.flush()
            raise OSError(28, "No space left on device (injected at write)")
        return self.fh.write(data)

    def flush(self) -> None:
        if self.faults.tick():
            raise OSError(5, "Input/output error (injected at flush)")
        self.fh.flush()

    def fileno(self) -> int:
        return self.fh.fileno()

    def __enter__(self) -> _File:
        return self

    def __exit__(self, *exc: object) -> None:
        self.fh.close()


@pytest.mark.parametrize("fail_at", range(1, 31))
def test_the_nth_io_call_fails(tmp_path: Path, fail_at: int) -> None:
    path = tmp_path / "log.jsonl"
    clock = FrozenClock()
    healthy = JsonlEventLog(path, clock=clock)
    acked = set(healthy.append([saved(i) for i in range(5)]))
    faults = Faults(fail_at)
    log = JsonlEventLog(path, clock=clock, opener=faults.opener, syncer=faults.fsync)
    failed = 0
    for batch in range(10):  # 10 batches x 3 calls each: every N in range fails one of them
        events = [saved(100 + batch * 10 + k) for k in range(3)]
        try:
            acked.update(log.append(events))
        except OSError:
            failed += 1
    assert failed == 1
    assert verify_file(path) == len(acked)  # every line whole and chained
    reopened = JsonlEventLog(path, clock=clock)
    assert {e.seq for e in reopened.read()} == acked
    assert reopened.verify_chain().ok
    reopened.append([saved(999)])  # and the log goes on
    assert verify_file(path) == len(acked) + 1
