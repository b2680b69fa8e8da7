"""The SQLite backend of the contract suite: a file per store."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memwarden.events import content_checksum

from ._backend import Backend, Db


class SQLiteBackend(Backend):
    name = "sqlite"

    def db(self, tmp_path: Path, name: str = "memwarden.db") -> Path:
        return tmp_path / name

    def scratch(self, tmp_path: Path, name: str = "scratch") -> str:
        # a database in memory is new at every open and gone at its close
        return ":memory:"

    def _connect(self, db: Db) -> sqlite3.Connection:
        # a warden's path is a string
        return sqlite3.connect(db, isolation_level=None)

    def _text_rowid(self, conn: sqlite3.Connection, checksum: str) -> int:
        for rowid, content in conn.execute("SELECT rowid, CAST(content AS BLOB) FROM texts"):
            if content is not None and content_checksum(bytes(content)) == checksum:
                return int(rowid)
        raise LookupError(checksum)

    def stored_text(self, db: Db, checksum: str) -> bytes | None:
        conn = self._connect(db)
        try:
            rowid = self._text_rowid(conn, checksum)
            (content,) = conn.execute("SELECT CAST(content AS BLOB) FROM texts WHERE rowid = ?", (rowid,)).fetchone()
            return None if content is None else bytes(content)
        finally:
            conn.close()

    def text_versions(self, db: Db) -> int:
        conn = self._connect(db)
        try:
            return int(conn.execute("SELECT count(*) FROM texts").fetchone()[0])
        finally:
            conn.close()

    def replace_text(self, db: Db, checksum: str, stored: Any) -> None:
        conn = self._connect(db)
        try:
            conn.execute("UPDATE texts SET content = ? WHERE rowid = ?", (stored, self._text_rowid(conn, checksum)))
        finally:
            conn.close()

    def replace_summary(self, db: Db, memory_id: str, stored: str) -> None:
        """Write a summary behind the engine's back, as a store written
        before a rule could hold it (SQLite keeps any bytes)."""
        conn = self._connect(db)
        try:
            conn.execute("UPDATE texts SET summary = CAST(? AS BLOB) WHERE memory_id = ?", (stored, memory_id))
        finally:
            conn.close()

    def set_view(self, db: Db, memory_id: str, **columns: Any) -> None:
        conn = self._connect(db)
        try:
            assignments = ", ".join(f'"{c}" = ?' for c in columns)
            conn.execute(f"UPDATE memories SET {assignments} WHERE memory_id = ?", [*columns.values(), memory_id])
        finally:
            conn.close()

    def rewrite_payload(self, db: Db, seq: int, payload: bytes) -> None:
        conn = self._connect(db)
        try:
            conn.execute("DROP TRIGGER IF EXISTS events_refuse_update")  # what an attacker with the file does
            conn.execute("UPDATE events SET payload = ? WHERE seq = ?", (payload, seq))
        finally:
            conn.close()

    def count_events(self, db: Db, event_type: str) -> int:
        conn = sqlite3.connect(db)
        try:
            return int(conn.execute("SELECT count(*) FROM events WHERE type = ?", (event_type,)).fetchone()[0])
        finally:
            conn.close()

    def _checkpoint(self, db: Db) -> None:
        conn = self._connect(db)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()

    def copy_store(self, db: Db, to: Db) -> None:
        self._checkpoint(db)
        shutil.copy(db, to)

    def bytes_at_rest(self, db: Db) -> bytes:
        self._checkpoint(db)
        db = Path(db)
        return b"".join(
            p.read_bytes() for p in sorted(db.parent.glob(db.name + "*")) if p.is_file() and p.suffix != ".log"
        )

    @contextmanager
    def statements(self, warden: Any) -> Iterator[list[str]]:
        seen: list[str] = []
        conn = warden.store.conn
        conn.set_trace_callback(seen.append)
        try:
            yield seen
        finally:
            conn.set_trace_callback(None)

    def driver_failure(self) -> Exception:
        return sqlite3.OperationalError("disk I/O error")

    def sever(self, view: Any) -> None:
        view.conn.close()
