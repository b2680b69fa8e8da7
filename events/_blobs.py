"""Content-addressed text, kept beside the log but outside the hash chain.

The chain covers each memory's checksum, not its text, so an erasure can
destroy the text while the log still verifies.
"""

from __future__ import annotations

import hashlib
import sqlite3

BLOB_SCHEMA = "CREATE TABLE IF NOT EXISTS blobs (checksum TEXT PRIMARY KEY, content BLOB NOT NULL) WITHOUT ROWID"
# How every read takes a blob's content: SQLite does not hold a column to
# its declared type, so a file edited by hand may hold TEXT or a number
# there; as bytes it is hashed (and found damaged), never a TypeError.
CONTENT_BYTES = "CAST(content AS BLOB)"


class BlobStore:
    """Stores UTF-8 text under ``sha256:<hex>`` of its bytes."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        conn.execute(BLOB_SCHEMA)

    def put(self, text: str) -> str:
        data = text.encode("utf-8")
        checksum = "sha256:" + hashlib.sha256(data).hexdigest()
        self.conn.execute("INSERT OR IGNORE INTO blobs (checksum, content) VALUES (?, ?)", (checksum, data))
        return checksum

    def get_bytes(self, checksum: str) -> bytes | None:
        row = self.conn.execute(f"SELECT {CONTENT_BYTES} FROM blobs WHERE checksum = ?", (checksum,)).fetchone()
        return row[0] if row else None

    def get_text(self, checksum: str) -> str | None:
        """The text only if its bytes still hash to ``checksum``."""
        data = self.get_bytes(checksum)
        if data is None or "sha256:" + hashlib.sha256(data).hexdigest() != checksum:
            return None
        return data.decode("utf-8")

    def replace(self, checksum: str, text: str) -> None:
        """Restore a blob's text (a resync) after checking it."""
        data = text.encode("utf-8")
        if "sha256:" + hashlib.sha256(data).hexdigest() != checksum:
            raise ValueError(f"content does not match {checksum}")
        self.conn.execute("INSERT OR REPLACE INTO blobs (checksum, content) VALUES (?, ?)", (checksum, data))

    def delete(self, checksum: str) -> bool:
        return self.conn.execute("DELETE FROM blobs WHERE checksum = ?", (checksum,)).rowcount > 0


def actual_checksum(data: bytes | None) -> str | None:
    return None if data is None else "sha256:" + hashlib.sha256(data).hexdigest()
