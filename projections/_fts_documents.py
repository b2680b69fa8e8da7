"""The documents of the ``usable`` view's FTS5 index: what a fold writes
to it for each batch and what a rebuild fills it with. SQLite's; the
PostgreSQL view keeps its own (``_postgres_usable``) and shares
``index_changes``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from memwarden.events import CONTENT_BYTES, SUMMARY_TEXT, TEXT_JOIN
from memwarden.events.sqlite import has_table

from ._fts_keys import FUNCTION, document_words, keying, text_index_key
from ._rows import Connection, Key, chunks, on_sqlite, value_marks

# (tenant, memory_id, version) -> (summary, content) to index, or None
TextSource = Callable[[Connection, str, str, int], tuple[str | None, str | None] | None]
# a document's two columns, read from the text store's row t, each word
# behind its tenant's mark, and an agent's memory's again behind its
# agent's (``_fts_keys``); bytes, so a damaged row's text that is not
# UTF-8 still indexes
_DOCUMENT = f"{FUNCTION}(m.tenant, m.agent, CAST(t.summary AS BLOB)), {FUNCTION}(m.tenant, m.agent, {CONTENT_BYTES})"


def stored_texts(conn: Connection, tenant: str, memory_id: str, version: int) -> tuple[str | None, str | None] | None:
    """A version's texts from the text store in the same database, if it has one."""
    try:
        row = conn.execute(
            f"SELECT {SUMMARY_TEXT}, {CONTENT_BYTES} FROM texts t WHERE tenant = ? AND memory_id = ? AND version = ?",
            (tenant, memory_id, version),
        ).fetchone()
    except sqlite3.OperationalError:
        return None
    if row is None:
        return None
    try:
        content = None if row[1] is None else bytes(row[1]).decode("utf-8")
    except UnicodeDecodeError:
        content = None
    return row[0], content


def index_changes(
    fts: list[tuple[Key, str]], stored: dict[Key, dict[str, Any] | None]
) -> tuple[dict[Key, str], list[Key]]:
    """What a batch does to the text index: each named memory's last action
    ("index" or "drop"; a memory named twice ends as its last says), and
    which of them may have a document to drop (a memory the table did not
    hold has none: its row, and so its rowid, is new)."""
    last: dict[Key, str] = {}
    for key, action in fts:
        last[key] = action
    return last, [key for key in last if stored.get(key) is not None]


def external_index(conn: Connection) -> bool:
    """Whether the text index reads its documents from the view
    (``FTS_SOURCE``) instead of holding a copy of its own."""
    row = on_sqlite(conn).execute("SELECT sql FROM sqlite_master WHERE name = 'memories_fts'").fetchone()
    return row is not None and "memories_fts_source" in str(row[0])


def drop_documents(
    conn: Connection,
    text_source: TextSource | None,
    fts: list[tuple[Key, str]],
    stored: dict[Key, dict[str, Any] | None],
) -> None:
    """Drop the documents of the memories a batch names, before the batch
    writes their rows: FTS5 removes a document by the words it indexed,
    which an index without its own copy reads back from the rows and texts
    as they were (``FTS_SOURCE``). A row already changed, or a text
    already destroyed, would leave the old words in the index."""
    _, held = index_changes(fts, stored)
    if not held:
        return
    if text_source is stored_texts:
        keying(conn)
    for chunk in chunks(held, 400):
        # SQLite walks an IN list in order: the rowids come sorted
        conn.execute(
            f"WITH k(t, m) AS (VALUES {value_marks(chunk, 2)}) DELETE FROM memories_fts WHERE rowid IN "
            "(SELECT mid FROM k JOIN memories ON tenant = k.t AND memory_id = k.m)",
            [part for key in chunk for part in key],
        )


def write_documents(
    conn: Connection,
    text_source: TextSource | None,
    fts: list[tuple[Key, str]],
    pending: dict[Key, dict[str, Any] | None],
    stored: dict[Key, dict[str, Any] | None],
) -> None:
    """Index the saved versions' texts (the erased ones' and the replaced
    ones' documents went before the rows changed: ``drop_documents``),
    a statement per few hundred memories (a batch save of 1,000 made
    2,000 statements).

    In rowid order: FTS5 holds a transaction's new documents in
    memory until it commits, but only while their rowids rise: a
    rowid lower than the last one makes it write its pending segment
    out first. A batch's rows, in the order its events name them, made
    it write and merge a segment for nearly every memory (925 page
    writes for a batch of 300 new memories)."""
    last, _ = index_changes(fts, stored)
    if not last:
        return
    indexed = [
        (key, row["version"], row["agent"])
        for key, action in last.items()
        if action == "index" and (row := pending[key]) is not None and row["status"] != "erased"
    ]
    insert = "INSERT INTO memories_fts (rowid, summary, content) SELECT m.mid"
    if not indexed:
        return
    if text_source is stored_texts:
        # the texts are in this database: SQLite joins them itself,
        # without a read into Python per memory (as fill_documents does)
        keying(conn)
        try:
            for chunk in chunks([key for key, _, _ in indexed], 400):
                conn.execute(
                    f"WITH k(t, m) AS (VALUES {value_marks(chunk, 2)}) {insert}, {_DOCUMENT} FROM k "
                    f"JOIN memories m ON m.tenant = k.t AND m.memory_id = k.m {TEXT_JOIN} ORDER BY m.mid",
                    [part for key in chunk for part in key],
                )
            return
        except sqlite3.OperationalError as exc:
            # a database without a text store (asking first cost three
            # statements a save): its documents are indexed empty
            if "no such table: texts" not in str(exc):
                raise
    documents = []
    marks: dict[Any, str] = {}
    secret = text_index_key(conn)
    for key, version, agent in indexed:
        texts = text_source(conn, *key, version) if text_source else None
        summary, content = texts or (None, None)
        documents.append(
            (*key, *(document_words(secret, key[0], agent, part or "", marks) for part in (summary, content)))
        )
    for chunk in chunks(documents, 200):
        conn.execute(
            f"WITH k(t, m, s, c) AS (VALUES {value_marks(chunk, 4)}) {insert}, k.s, k.c FROM k "
            "JOIN memories m ON m.tenant = k.t AND m.memory_id = k.m ORDER BY m.mid",
            [part for document in chunk for part in document],
        )


def fill_documents(conn: Connection, text_source: TextSource | None) -> None:
    """The index written whole from the view (a rebuild's last step), in rowid order."""
    if external_index(conn):
        # read whole from FTS_SOURCE: the erased memories are not in it
        keying(conn)
        conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('rebuild')")
        return
    conn.execute("DELETE FROM memories_fts")
    if text_source is stored_texts and has_table(on_sqlite(conn), "texts"):
        keying(conn)
        conn.execute(
            f"INSERT INTO memories_fts (rowid, summary, content) SELECT m.mid, {_DOCUMENT} "
            f"FROM memories m {TEXT_JOIN} WHERE m.status != 'erased' ORDER BY m.mid"
        )
    else:
        rows = conn.execute(
            "SELECT mid, tenant, memory_id, version, agent FROM memories WHERE status != 'erased' ORDER BY mid"
        ).fetchall()
        key = text_index_key(conn)
        marks: dict[Any, str] = {}
        conn.executemany(
            "INSERT INTO memories_fts (rowid, summary, content) VALUES (?,?,?)",
            [
                (
                    mid,
                    *(
                        document_words(key, t, agent, part or "", marks)
                        for part in ((text_source(conn, t, m, v) if text_source else None) or (None, None))
                    ),
                )
                for mid, t, m, v, agent in rows
            ],
        )
