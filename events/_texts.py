"""The texts of memories, kept beside the log but outside the hash chain.

Every version of every memory has its own row, (tenant, memory_id,
version) -> summary and content, even where two memories hold the same
words: an erasure deletes exactly the rows of the memory it names. The
chain covers each text's checksum, so the log still verifies after.

Erasure is final here, in the store itself: a ``memory.erased`` event, on
whatever path it is appended (an erasure, an import, a migration), deletes
the texts of every version it names and leaves a mark (``erased_texts``:
tenant, memory_id, the last version erased); a trigger then refuses any
text written for an erased version, whoever writes it (an import of an
older export, a resync, a records file, a path not written yet).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from . import _errors
from ._bytes import UnstorableText, check_storable
from ._canonical import content_checksum
from ._errors import StoreFailed, TextErased
from ._log import get_logger
from ._recorded import RecordedEvent
from ._sqlite_connect import sqlite_failure
from ._sqlite_schema import has_table
from ._streams import memory_stream
from ._translated import translated
from ._upcasting import LegacyTenants
from ._vectors import PUT_VECTOR, VECTOR_SCHEMA, Vector, vector_rows

_log = get_logger("memwarden.texts")

# what a refused write of an erased version's text says, on either backend
ERASED_TEXT = "memwarden: the text of an erased memory version"

# A rowid table, not WITHOUT ROWID: its rows are texts of any size, which
# SQLite keeps better behind a small rowid b-tree entry.
TEXT_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS texts (
        tenant TEXT NOT NULL, memory_id TEXT NOT NULL, version INTEGER NOT NULL,
        summary BLOB, content BLOB,
        UNIQUE (tenant, memory_id, version)
    )""",
    """CREATE TABLE IF NOT EXISTS erased_texts (
        tenant TEXT NOT NULL, memory_id TEXT NOT NULL, through_version INTEGER NOT NULL,
        PRIMARY KEY (tenant, memory_id)
    ) WITHOUT ROWID""",
    *(
        f"""CREATE TRIGGER IF NOT EXISTS texts_erased_{op.lower()} BEFORE {op} ON texts
        WHEN EXISTS (SELECT 1 FROM erased_texts e WHERE e.tenant = NEW.tenant AND e.memory_id = NEW.memory_id
                     AND NEW.version <= e.through_version)
        BEGIN SELECT RAISE(ABORT, '{ERASED_TEXT}'); END"""
        for op in ("INSERT", "UPDATE")
    ),
]
# How every read takes a text: SQLite does not hold a column to its
# declared type, so a file edited by hand may hold TEXT or a number there;
# as bytes it is hashed (and found damaged), never a TypeError.
CONTENT_BYTES = "CAST(t.content AS BLOB)"
SUMMARY_TEXT = "CAST(t.summary AS TEXT)"
# the join from a memories row (alias m) to its current version's texts (alias t)
TEXT_JOIN = "LEFT JOIN texts t ON t.tenant = m.tenant AND t.memory_id = m.memory_id AND t.version = m.version"
_PUT = (
    "INSERT INTO texts (tenant, memory_id, version, summary, content) VALUES (?,?,?,?,?) "
    "ON CONFLICT (tenant, memory_id, version) DO UPDATE SET summary = excluded.summary, content = excluded.content"
)


class Texts(NamedTuple):
    """One version's texts, as exported and imported."""

    tenant: str
    memory_id: str
    version: int
    summary: str | None
    content: str | None


@translated
class TextStore:
    """Summary and content of each memory version, as UTF-8 bytes, in
    SQLite (a backend's subclass gives its own schema and reads; its
    connection takes ``?`` marks)."""

    SCHEMA = (*TEXT_SCHEMA, *VECTOR_SCHEMA)
    CONTENT = CONTENT_BYTES
    SUMMARY = SUMMARY_TEXT
    SUMMARY_BYTES = "CAST(t.summary AS BLOB)"

    def __init__(self, conn: Any, *, where: str | None = None) -> None:
        self.conn = conn
        self.where = where  # the file or the server, named in its errors
        for statement in self.SCHEMA:
            conn.execute(statement)

    def _driver_error(self, exc: Exception, operation: str) -> StoreFailed | None:
        return sqlite_failure(exc, self.__dict__.get("where"), f"texts.{operation}")

    def put(self, tenant: str, memory_id: str, version: int, summary: str | None, content: str | None) -> None:
        """Keep a version's texts; ``TextErased`` for a version erased,
        ``UnstorableText`` for a text no store keeps (``_bytes``)."""
        _check_texts(tenant, memory_id, version, summary, content)
        with self._refusing_erased([(tenant, memory_id, version)]):
            self.conn.execute(_PUT, (tenant, memory_id, version, _bytes(summary), _bytes(content)))

    def put_many(self, texts: Iterable[Texts]) -> None:
        """``put`` for many versions in one statement (a batch save's)."""
        rows = []
        for t, m, v, summary, content in texts:
            _check_texts(t, m, v, summary, content)
            rows.append((t, m, v, _bytes(summary), _bytes(content)))
        with self._refusing_erased([row[:3] for row in rows]):
            self.conn.executemany(_PUT, rows)

    def put_vectors(self, vectors: Iterable[Vector]) -> None:
        """Keep versions' embeddings (checked by the caller, ``check_vector``);
        ``TextErased`` for a version erased, as for its texts."""
        rows = vector_rows(vectors)
        if rows:
            with self._refusing_erased([row[:3] for row in rows]):
                self.conn.executemany(PUT_VECTOR, rows)

    @contextmanager
    def _refusing_erased(self, versions: list[tuple[str, str, int]]) -> Iterator[None]:
        """The store's refusal of an erased version's text, as ``TextErased``
        naming the first such version written."""
        try:
            yield
        except _errors.DATABASE_ERRORS as exc:  # looked up only when something failed
            if ERASED_TEXT not in str(exc):
                raise
            raise TextErased(*self._first_erased(versions, exc)) from None

    def _first_erased(self, versions: list[tuple[str, str, int]], exc: Exception) -> tuple[str, str, int]:
        # SQLite's statement failed alone: the marks can still be read
        for tenant, memory_id, version in versions:
            if version <= self.erased_through(tenant, memory_id):
                return tenant, memory_id, version
        return versions[0]

    def erased_through(self, tenant: str, memory_id: str) -> int:
        """The last version of a memory whose texts were erased (0: none)."""
        row = self.conn.execute(
            "SELECT through_version FROM erased_texts WHERE tenant = ? AND memory_id = ?", (tenant, memory_id)
        ).fetchone()
        return int(row[0]) if row else 0

    def erasure_marks(self) -> list[tuple[str, str, int]]:
        """Every erased memory's mark, (tenant, memory_id, last version
        erased), in key order: what a store knows it must never serve again."""
        rows = self.conn.execute(
            "SELECT tenant, memory_id, through_version FROM erased_texts ORDER BY tenant, memory_id"
        ).fetchall()
        return [(str(t), str(m), int(v)) for t, m, v in rows]

    def on_append(self, conn: Any, events: Sequence[RecordedEvent]) -> None:
        """The log's subscriber, inside every append's transaction: a
        ``memory.erased`` destroys the texts of the versions it names, up to
        its ``version`` (for an erasure recorded before events named it:
        every version saved before it), and marks them erased for good."""
        for event in events:
            if event.type != "memory.erased":
                continue
            p = event.payload
            through = p.get("version") or self._saves_before(p["tenant"], p["memory_id"], event.seq)
            self.erase_through(p["tenant"], p["memory_id"], through)

    def _saves_before(self, tenant: str, memory_id: str, seq: int) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM events WHERE stream = ? AND type = 'memory.saved' AND seq < ?",
            (memory_stream(tenant, memory_id), seq),
        ).fetchone()
        return int(row[0])

    def erase_through(self, tenant: str, memory_id: str, version: int) -> int:
        """Delete the texts of versions up to ``version`` and mark them
        erased; the rows deleted."""
        self.conn.execute(
            "INSERT INTO erased_texts (tenant, memory_id, through_version) VALUES (?,?,?) "
            "ON CONFLICT (tenant, memory_id) DO UPDATE SET through_version = "
            "CASE WHEN excluded.through_version > erased_texts.through_version "
            "THEN excluded.through_version ELSE erased_texts.through_version END",
            (tenant, memory_id, version),
        )
        # the embeddings go with the texts: they can be inverted back into them
        self.conn.execute(
            "DELETE FROM vectors WHERE tenant = ? AND memory_id = ? AND version <= ?", (tenant, memory_id, version)
        )
        return self.conn.execute(
            "DELETE FROM texts WHERE tenant = ? AND memory_id = ? AND version <= ?", (tenant, memory_id, version)
        ).rowcount

    def _one(self, expression: str, tenant: str, memory_id: str, version: int) -> Any:
        row = self.conn.execute(
            f"SELECT {expression} FROM texts t WHERE tenant = ? AND memory_id = ? AND version = ?",
            (tenant, memory_id, version),
        ).fetchone()
        return row[0] if row else None

    def content_bytes(self, tenant: str, memory_id: str, version: int) -> bytes | None:
        data = self._one(self.CONTENT, tenant, memory_id, version)
        return None if data is None else bytes(data)

    def content(self, tenant: str, memory_id: str, version: int, checksum: str) -> str | None:
        """The text only if its bytes still hash to ``checksum``."""
        data = self.content_bytes(tenant, memory_id, version)
        if data is None or content_checksum(data) != checksum:
            return None
        return data.decode("utf-8")

    def summary(self, tenant: str, memory_id: str, version: int) -> str | None:
        return self._one(self.SUMMARY, tenant, memory_id, version)

    def restore(self, tenant: str, memory_id: str, version: int, checksum: str, text: str) -> None:
        """Put back a version's content (a resync, a re-verification) after
        checking it; its summary stays as it is."""
        if content_checksum(text) != checksum:
            raise ValueError(f"content does not match {checksum}")
        check_storable("content", text)
        updated = self.conn.execute(
            "UPDATE texts SET content = ? WHERE tenant = ? AND memory_id = ? AND version = ?",
            (_bytes(text), tenant, memory_id, version),
        ).rowcount
        if not updated:
            self.put(tenant, memory_id, version, None, text)

    def all(self) -> Iterator[Texts]:
        """Every stored version's texts, for an export."""
        for tenant, memory_id, version, summary, content in self.conn.execute(
            f"SELECT tenant, memory_id, version, {self.SUMMARY_BYTES}, {self.CONTENT} FROM texts t "
            "ORDER BY tenant, memory_id, version"
        ):
            yield Texts(tenant, memory_id, version, _text(summary), _text(content))


def _check_texts(tenant: str, memory_id: str, version: int, summary: str | None, content: str | None) -> None:
    """A version's texts under the one byte rule; a refusal names the
    version too (an import's or a migration's texts are many)."""
    for field, text in (("summary", summary), ("content", content)):
        try:
            check_storable(field, text)
        except UnstorableText as exc:
            raise UnstorableText(field, f"{exc.problem} ({tenant}/{memory_id} v{version})") from None


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8")


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return None  # damaged: an export leaves it out, and the reader quarantines it


def actual_checksum(data: bytes | None) -> str | None:
    return None if data is None else content_checksum(data)


def migrate_blobs(conn: sqlite3.Connection, texts: TextStore, tenants: LegacyTenants) -> None:
    """A database from before per-memory texts kept contents shared by
    checksum (``blobs``) and summaries in the hashed payloads: give every
    saved version its own texts, none to an erased memory, and drop the
    shared table. The log is not touched."""
    if not has_table(conn, "blobs"):
        return
    erased = {stream for (stream,) in conn.execute("SELECT DISTINCT stream FROM events WHERE type = 'memory.erased'")}
    saves = conn.execute(
        "SELECT stream, payload FROM events WHERE type = 'memory.saved' AND schema_version = 1 ORDER BY seq"
    ).fetchall()
    moved = 0
    for stream, payload in saves:
        if stream in erased:
            continue
        p = json.loads(payload)
        tenant = tenants(stream) or p["scope"]["tenant"]
        blob = conn.execute("SELECT CAST(content AS BLOB) FROM blobs WHERE checksum = ?", (p["content_checksum"],))
        data = blob.fetchone()
        content = None
        if data is not None and data[0] is not None:
            content = bytes(data[0]).decode("utf-8", "replace")
        texts.put(tenant, p["memory_id"], p["version"], p.get("summary"), content)
        moved += 1
    conn.execute("DROP TABLE blobs")
    _log.warning("texts_migrated", versions=moved, note="per-memory texts replace the shared blob table")
