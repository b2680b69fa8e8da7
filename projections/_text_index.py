"""Purging erased text from the FTS5 index of the ``usable`` projection.

A deleted FTS5 row leaves its terms in the older segments until a merge
rewrites them; ``optimize`` merges every segment into one, so after it the
erased words are nowhere in the index. But FTS5 in SQLite 3.40 (what
Python 3.11 ships with on Debian 12) adds two empty levels to the index's
structure record on every ``optimize`` of an index past a few pages, and
never removes them: near 2,000 levels the structure no longer decodes and
every read and write of the table fails with "database disk image is
malformed" (about 1,000 erasures in; our mixed run found it). Newer SQLite
(3.51 here) stops at 65 levels. We keep the same bound from outside: when
the structure holds more than ``MAX_LEVELS``, ``rebuild`` rewrites the index
from its own content table with a fresh structure. An ``optimize`` already
rewrites the whole index and a rebuild costs about three of them, so a
rebuild every few dozen erasures adds little to erasure time.
"""

from __future__ import annotations

import sqlite3

from ._fts_documents import external_index
from ._fts_keys import keying
from ._rows import Connection

__all__ = ["MAX_LEVELS", "drop_text_index", "purge_text_index", "text_index_levels"]

# about what newer SQLite allows itself (FTS5_MAX_LEVEL)
MAX_LEVELS = 64

# the structure record of an FTS5 index is the row with id 10 of its %_data
_STRUCTURE_ROWID = 10
# a structure of no levels, no segments, no writes: what FTS5 writes at creation
_EMPTY_STRUCTURE = bytes(7)
# newer FTS5 may mark the structure record's version after the cookie
_STRUCTURE_V2 = b"\xff\x00\x00\x01"


def text_index_levels(conn: Connection, table: str = "memories_fts") -> int | None:
    """The number of levels in an FTS5 index's structure (None if unreadable)."""
    row = conn.execute(f'SELECT block FROM "{table}_data" WHERE id = ?', (_STRUCTURE_ROWID,)).fetchone()
    if row is None or not isinstance(row[0], bytes):
        return None
    block: bytes = row[0]
    at = 8 if block[4:8] == _STRUCTURE_V2 else 4  # after the 4-byte cookie
    levels = 0
    # an SQLite varint: 7 bits a byte, big-endian, high bit set on all but the last
    for i in range(at, min(at + 8, len(block))):
        levels = (levels << 7) | (block[i] & 0x7F)
        if not block[i] & 0x80:
            return levels
    return None


def purge_text_index(conn: Connection, table: str = "memories_fts") -> bool:
    """Merge the index so no deleted row's terms remain; True if it was rebuilt.

    Runs inside the caller's transaction (the erasure's), so the purge
    commits or rolls back with it.
    """
    conn.execute(f'INSERT INTO "{table}" ("{table}") VALUES (\'optimize\')')
    levels = text_index_levels(conn, table)
    if levels is not None and levels <= MAX_LEVELS:
        return False
    if external_index(conn):
        keying(conn)  # it reads its documents through the keying function
    conn.execute(f'INSERT INTO "{table}" ("{table}") VALUES (\'rebuild\')')
    return True


def drop_text_index(conn: Connection, table: str = "memories_fts") -> None:
    """Drop an FTS5 table, even one whose structure no longer decodes.

    SQLite must open a virtual table to drop it, and an index broken by the
    level growth above cannot be opened; a rebuild of the projection is how
    an operator recovers from it. An empty structure record (and no segments)
    makes it open again, and then it drops.
    """
    try:
        conn.execute(f'DROP TABLE IF EXISTS "{table}"')
    except sqlite3.DatabaseError:
        conn.execute(f'DELETE FROM "{table}_data"')
        conn.execute(f'DELETE FROM "{table}_idx"')
        conn.execute(f'INSERT INTO "{table}_data" (id, block) VALUES (?, ?)', (_STRUCTURE_ROWID, _EMPTY_STRUCTURE))
        conn.execute(f'DROP TABLE "{table}"')
