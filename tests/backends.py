"""The backends the contract suite runs on, and what a test may do to one
behind the engine's back.

The behaviour tests (every ``tests/test_*.py`` and ``tests/reliability``)
speak only to memwarden's public API. Some must damage what is stored, as
a failing disk or an attacker with database access would: flip a stored
text, roll a view row back, rewrite a logged payload. Those go through a
``Backend`` here, each backend in its own SQL; ``tests/test_boundary.py``
holds the behaviour tests to it. What only one backend has (SQLite's
triggers, FTS5 structure records, tampering with the file) is tested in
``tests/sqlite``.
"""

from __future__ import annotations

import shutil
import sqlite3
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from memwarden.events import content_checksum


class Backend(ABC):
    """One store behind the port, with the hooks a contract test needs."""

    name: str

    @abstractmethod
    def db(self, tmp_path: Path, name: str = "memwarden.db") -> Path:
        """What ``--db`` names for a fresh store of this backend."""

    @abstractmethod
    def stored_text(self, db: Path, checksum: str) -> bytes | None:
        """The stored content whose bytes hash to ``checksum``."""

    @abstractmethod
    def text_versions(self, db: Path) -> int:
        """How many memory versions have texts stored."""

    @abstractmethod
    def replace_text(self, db: Path, checksum: str, stored: Any) -> None:
        """Overwrite the stored content that hashes to ``checksum`` (bytes,
        text, None, or a value of another type where the backend allows)."""

    def flip_text(self, db: Path, checksum: str) -> None:
        """Flip one bit of the stored content that hashes to ``checksum``."""
        data = bytearray(self.stored_text(db, checksum) or b"")
        data[0] ^= 0x01
        self.replace_text(db, checksum, bytes(data))

    @abstractmethod
    def set_view(self, db: Path, memory_id: str, **columns: Any) -> None:
        """Rewrite columns of a memory's view row: a view gone stale or edited."""

    @abstractmethod
    def rewrite_payload(self, db: Path, seq: int, payload: bytes) -> None:
        """Replace a logged event's payload bytes (its hash left as it was)."""

    @abstractmethod
    def count_events(self, db: Path, event_type: str) -> int:
        """Committed events of ``event_type``, read by a separate connection."""

    @abstractmethod
    def copy_store(self, db: Path, to: Path) -> None:
        """Copy the whole store as it stands to a new one at ``to`` (an
        operator's backup, restored later as it was)."""

    @abstractmethod
    def bytes_at_rest(self, db: Path) -> bytes:
        """Every byte the store keeps on disk for ``db``, after making it
        write out what it buffers (where erased words must not remain)."""


class SQLiteBackend(Backend):
    name = "sqlite"

    def db(self, tmp_path: Path, name: str = "memwarden.db") -> Path:
        return tmp_path / name

    def _connect(self, db: Path) -> sqlite3.Connection:
        return sqlite3.connect(db, isolation_level=None)

    def _text_rowid(self, conn: sqlite3.Connection, checksum: str) -> int:
        for rowid, content in conn.execute("SELECT rowid, CAST(content AS BLOB) FROM texts"):
            if content is not None and content_checksum(bytes(content)) == checksum:
                return int(rowid)
        raise LookupError(checksum)

    def stored_text(self, db: Path, checksum: str) -> bytes | None:
        conn = self._connect(db)
        try:
            rowid = self._text_rowid(conn, checksum)
            (content,) = conn.execute("SELECT CAST(content AS BLOB) FROM texts WHERE rowid = ?", (rowid,)).fetchone()
            return None if content is None else bytes(content)
        finally:
            conn.close()

    def text_versions(self, db: Path) -> int:
        conn = self._connect(db)
        try:
            return int(conn.execute("SELECT count(*) FROM texts").fetchone()[0])
        finally:
            conn.close()

    def replace_text(self, db: Path, checksum: str, stored: Any) -> None:
        conn = self._connect(db)
        try:
            conn.execute("UPDATE texts SET content = ? WHERE rowid = ?", (stored, self._text_rowid(conn, checksum)))
        finally:
            conn.close()

    def set_view(self, db: Path, memory_id: str, **columns: Any) -> None:
        conn = self._connect(db)
        try:
            assignments = ", ".join(f'"{c}" = ?' for c in columns)
            conn.execute(f"UPDATE memories SET {assignments} WHERE memory_id = ?", [*columns.values(), memory_id])
        finally:
            conn.close()

    def rewrite_payload(self, db: Path, seq: int, payload: bytes) -> None:
        conn = self._connect(db)
        try:
            conn.execute("DROP TRIGGER IF EXISTS events_refuse_update")  # what an attacker with the file does
            conn.execute("UPDATE events SET payload = ? WHERE seq = ?", (payload, seq))
        finally:
            conn.close()

    def count_events(self, db: Path, event_type: str) -> int:
        conn = sqlite3.connect(db)
        try:
            return int(conn.execute("SELECT count(*) FROM events WHERE type = ?", (event_type,)).fetchone()[0])
        finally:
            conn.close()

    def _checkpoint(self, db: Path) -> None:
        conn = self._connect(db)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()

    def copy_store(self, db: Path, to: Path) -> None:
        self._checkpoint(db)
        shutil.copy(db, to)

    def bytes_at_rest(self, db: Path) -> bytes:
        self._checkpoint(db)
        return b"".join(
            p.read_bytes() for p in sorted(db.parent.glob(db.name + "*")) if p.is_file() and p.suffix != ".log"
        )


BACKENDS: list[Backend] = [SQLiteBackend()]
