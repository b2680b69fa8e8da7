"""Real OS processes appending to one SQLite log at once, and a writer killed with SIGKILL."""

from __future__ import annotations

from pathlib import Path

import pytest
from memwarden.events import SQLiteEventLog

from ..log_processes import four_writers_at_once, writers_killed_at_random


def test_four_processes_appending_at_once(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    four_writers_at_once(tmp_path, str(db), "SQLiteEventLog", lambda: SQLiteEventLog(db))


# twenty writer processes started, killed and checked one after another: past the suite's 120 s
# a test on a loaded machine
@pytest.mark.timeout(300)
def test_sigkill_at_random_points_loses_nothing_acknowledged(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    writers_killed_at_random(tmp_path, str(db), "SQLiteEventLog", lambda: SQLiteEventLog(db))
