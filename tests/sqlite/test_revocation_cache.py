"""The revocation cache against a table changed under it in every way a
store's can be (added to, rolled back, rebuilt, rewritten)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memwarden.projections._revocation_cache import RevocationCache


def test_the_cache_answers_what_the_table_holds_through_every_change(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "r.db", isolation_level=None)
    conn.execute(
        "CREATE TABLE revocations (revocation_id TEXT PRIMARY KEY, seq INTEGER, selector TEXT, effective_at TEXT)"
    )
    cache = RevocationCache()

    def add(rid: str, seq: int, tenant: str | None) -> None:
        selector = '{"everything":true}' if tenant is None else f'{{"tenant":"{tenant}"}}'
        conn.execute("INSERT INTO revocations VALUES (?,?,?,?)", (rid, seq, selector, "2026-01-01T00:00:00Z"))

    def ids(tenant: str | None = None) -> list[str]:
        return [r.revocation_id for r in cache.load(conn, tenant)]

    assert ids() == []
    add("rev_a", 3, "acme")
    add("rev_b", 5, "beta")
    assert ids() == ["rev_a", "rev_b"] and ids("acme") == ["rev_a"]
    add("rev_c", 9, None)  # read on from the cached state
    assert ids() == ["rev_a", "rev_b", "rev_c"] and ids("acme") == ["rev_a", "rev_c"]
    conn.execute("DELETE FROM revocations WHERE revocation_id = 'rev_c'")  # back to a kept state
    assert ids() == ["rev_a", "rev_b"]
    # the same count and last seq, another last revocation: read whole
    conn.execute("DELETE FROM revocations WHERE revocation_id = 'rev_b'")
    add("rev_x", 5, "acme")
    assert ids("acme") == ["rev_a", "rev_x"]
    # a table rewritten under the kept last row: read whole, not extended
    conn.execute("DELETE FROM revocations")
    add("rev_a", 3, "acme")
    add("rev_q", 4, "acme")
    add("rev_x", 5, "acme")
    add("rev_z", 6, "acme")
    assert ids() == ["rev_a", "rev_q", "rev_x", "rev_z"]
    conn.execute("DELETE FROM revocations")
    assert ids() == [] and ids("acme") == []
    # the caller's list is its own
    add("rev_a", 3, "acme")
    mine = cache.load(conn)
    mine.append({"revocation_id": "mine"})
    assert ids() == ["rev_a"]
