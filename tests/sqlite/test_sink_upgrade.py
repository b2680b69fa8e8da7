"""A store made before a sink's final outcomes were recorded gains the
column that points at them (``sink_readbacks.final_seq``) when opened."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memwarden.engine import Warden


def test_a_store_made_before_final_outcomes_gains_the_column(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    Warden(path).close()
    with sqlite3.connect(path) as conn:  # the table as the version before this one made it
        conn.execute("ALTER TABLE sink_readbacks DROP COLUMN final_seq")
    Warden(path).close()
    with sqlite3.connect(path) as conn:
        assert "final_seq" in {r[1] for r in conn.execute("PRAGMA table_info(sink_readbacks)")}
