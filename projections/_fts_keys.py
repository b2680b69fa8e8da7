"""Tenant-keyed words in the text index (SQLite's FTS5 here).

FTS5 keeps one posting list per word for the whole table: a search for a
word reads every document holding it, every tenant's, and the time it takes
tells a tenant how many of the others' memories hold that word. So each word
of a document is indexed, and each word of a search asked, behind its
tenant's mark: twelve hex digits of the SHA-256 of a random key kept with
the index (``text_index_key``) and the tenant. A tenant's search reads only
its own tenant's posting lists. PostgreSQL's index (``_postgres_usable``)
keys its words with the same marks, which its SQL computes too.

Keyed, not a plain hash: a tenant who could name a tenant could otherwise
search for names whose mark equals another tenant's (48 bits is within
reach) and share its posting lists again. The key is of fixed length and
the marks are never shown, so the key's hash in front of the tenant is as
good as an HMAC here, and is what PostgreSQL can compute without an
extension. A mark shared by chance only shares work: which memories a
search may return is still the SQL's tenant and access terms, never the
mark. The key is made with the index, so a
rebuild of the index is also a new key.

An agent's memories, and an agent's search, are keyed again inside the
tenant: a key bound to an agent (``Access.agent``) may read only that
agent's memories, yet under the tenant's marks its search read every
posting of the tenant's other agents holding the word. So a document whose
scope names an agent holds its text twice: once behind the tenant's mark
(what a tenant-wide search, by an unbound key or staff, reads as before)
and once behind the mark of the tenant and the agent (``agent_mark``: the
key's own derived key's hash of the tenant, a NUL and the agent, so never
a tenant's mark whatever the tenant is named), and a search under an
``Access`` with an agent reads only those. The copies' words carry
different marks, so a phrase never matches across from one copy into the
other; nothing ranks by FTS5's bm25 (a search orders by the view's
``last_seq``), so the doubled document changes no order. A store whose
index was keyed by tenant alone is written again when it opens
(``is_keyed``: ``SHAPE`` in the key's row). PostgreSQL keys its words by
tenant only: there an agent-bound search's time was measured flat in the
tenant's other agents' memories (22.0 ms and 22.3 ms, with none and with
10,000 of them holding the word), so its index is as it was.

The mark goes in front of each word where FTS5 itself starts one
(``_unicode61``), leaving the text otherwise as it was: FTS5 folds case and
diacritics and splits words exactly as before, a prefix of a word is the
mark and a prefix of the keyed word, and a phrase's words stay next to each
other.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from memwarden.events.sqlite import has_table

from ._rows import Connection, on_sqlite
from ._unicode61 import DIACRITICS, SEPARATORS

__all__ = [
    "FUNCTION",
    "KEY_SCHEMA",
    "MARK_CHARS",
    "SHAPE",
    "agent_mark",
    "document_words",
    "fts5_query",
    "is_keyed",
    "keyed",
    "keyed_each",
    "keyed_query",
    "keying",
    "make_key",
    "tenant_mark",
    "text_index_key",
]

# the shape of the index's words, kept with its key: 2, keyed by tenant and
# by (tenant, agent); a key's row of no shape is an index keyed by tenant alone
SHAPE = 2
KEY_SCHEMA = f"""CREATE TABLE IF NOT EXISTS text_index_key (
    id INTEGER PRIMARY KEY CHECK (id = 1), secret BLOB NOT NULL, shape INTEGER NOT NULL DEFAULT {SHAPE}
)"""
MARK_CHARS = 12  # hex digits: 48 bits

# the separators below U+10000 and above it: a class of each lets the
# regular expression engine test most characters against a table
_SEPARATOR = "".join(
    f"{re.escape(chr(first))}-{re.escape(chr(min(last, 0xFFFF)))}" for first, last in SEPARATORS if first <= 0xFFFF
)
_ASTRAL = "".join(
    f"{re.escape(chr(max(first, 0x10000)))}-{re.escape(chr(last))}" for first, last in SEPARATORS if last > 0xFFFF
)
_DIACRITIC = "".join(re.escape(chr(c)) for c in DIACRITICS)


@functools.cache
def _unicode_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The runs between words, kept by a split, and a word as FTS5 reads it
    (a word character, then word characters and the diacritics it folds
    away, which before a word only separate): compiled with the first text
    that is not ASCII, their classes being long (a process that keys none
    starts without them)."""
    separators = re.compile(f"((?:[{_SEPARATOR}]|[{_ASTRAL}])+)")
    word = re.compile(f"[^{_SEPARATOR}{_ASTRAL}{_DIACRITIC}][^{_SEPARATOR}{_ASTRAL}]*")
    return separators, word


# in ASCII, the runs between words are all but letters and digits
_ASCII_SEPARATORS = re.compile("([^0-9A-Za-z]+)")
_DIACRITICS = frozenset(chr(c) for c in DIACRITICS)
# the SQL function documents are keyed by (``keying``)
FUNCTION = "memwarden_keyed_words"


def make_key(conn: Connection, schema: str = KEY_SCHEMA) -> None:
    """Give the index its key, if it has none."""
    conn.execute(schema)
    conn.execute("INSERT INTO text_index_key (id, secret) VALUES (1, ?) ON CONFLICT DO NOTHING", (os.urandom(32),))


def text_index_key(conn: Connection) -> bytes:
    """The index's key."""
    row = conn.execute("SELECT secret FROM text_index_key WHERE id = 1").fetchone()
    if row is None:
        raise LookupError("text_index_key: the text index has no key (open the store to make one)")
    return bytes(row[0])


def tenant_mark(key: bytes, tenant: str) -> str:
    """The mark in front of each of ``tenant``'s words."""
    return hashlib.sha256(key + tenant.encode("utf-8", "surrogatepass")).hexdigest()[:MARK_CHARS]


def agent_mark(key: bytes, tenant: str, agent: str) -> str:
    """The mark in front of each word of ``agent``'s memories in ``tenant``
    (their second copy): under a key derived from the index's, so that no
    tenant's name makes a tenant's mark equal to it."""
    derived = hashlib.sha256(b"memwarden agent marks\x00" + key).digest()
    return hashlib.sha256(derived + f"{tenant}\x00{agent}".encode("utf-8", "surrogatepass")).hexdigest()[:MARK_CHARS]


def document_words(key: bytes, tenant: str, agent: str | None, text: str, marks: dict[Any, str]) -> str:
    """A document column's text as indexed: behind the tenant's mark, and
    for an agent's memory again behind the agent's (after a line break:
    a separator, and the copies' marks differ, so no phrase spans the two).
    ``marks`` caches the marks by tenant and by (tenant, agent)."""
    mark = marks.get(tenant)
    if mark is None:
        mark = marks[tenant] = tenant_mark(key, tenant)
    if agent is None:
        return keyed(mark, text)
    second = marks.get((tenant, agent))
    if second is None:
        second = marks[(tenant, agent)] = agent_mark(key, tenant, agent)
    return "\n".join(keyed_each((mark, second), text))


def keyed(mark: str, text: str) -> str:
    """``text`` with ``mark`` in front of each of its words: split at the
    separators, each run between them is a word, unless it starts with
    diacritics, which only separate there."""
    return keyed_each((mark,), text)[0]


def keyed_each(marks: Sequence[str], text: str) -> list[str]:
    """``keyed`` of ``text`` under each of ``marks``, the text split once."""
    if text.isascii():
        parts = _ASCII_SEPARATORS.split(text)
        runs = parts[::2]
        found = []
        for mark in marks:
            parts[::2] = [mark + run if run else run for run in runs]
            found.append("".join(parts))
        return found
    separators, word = _unicode_patterns()
    parts = separators.split(text)
    runs = parts[::2]
    found = []
    for mark in marks:
        parts[::2] = [
            (mark + run if run[0] not in _DIACRITICS else word.sub(mark + r"\g<0>", run)) if run else run
            for run in runs
        ]
        found.append("".join(parts))
    return found


def _text(value: str | bytes | None) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        # a damaged row's bytes that are not UTF-8 index as U+FFFD, a separator
        return value.decode("utf-8", "replace")
    return str(value)


class _Keying:
    """The key a connection's keying function reads, and its marks."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.marks: dict[Any, str] = {}

    def __call__(self, tenant: str, agent: str | None, text: str | bytes | None) -> str:
        return document_words(self.key, tenant, agent, _text(text), self.marks)


# by id(connection): a connection's function is made once and its key set
# again on each call (SQLite refuses to replace a function while one of
# the connection's statements is still open)
_KEYINGS: dict[int, _Keying] = {}


def keying(conn: Connection) -> None:
    """Let SQL on ``conn`` key a document: ``memwarden_keyed_words(tenant,
    agent, text)``, text or bytes, under the index's key as it is now
    (``document_words``)."""
    key = text_index_key(conn)
    raw = on_sqlite(conn)
    found = _KEYINGS.get(id(raw))
    if found is not None:
        try:
            raw.execute(f"SELECT {FUNCTION}('', NULL, '')").fetchone()
        except sqlite3.OperationalError:
            found = None  # another connection, since closed, had this id
    if found is None:
        found = _KEYINGS[id(raw)] = _Keying(key)
        raw.create_function(FUNCTION, 3, found, deterministic=True)
    elif found.key != key:
        found.key, found.marks = key, {}


def fts5_query(words: Sequence[str]) -> str:
    """Words as an FTS5 query: every one must match as a prefix."""
    return " ".join('"' + w.replace('"', '""') + '"*' for w in words)


def keyed_query(conn: Connection, words: Sequence[str], tenants: Iterable[str] | None, agent: str | None = None) -> str:
    """An FTS5 query of ``words`` in each of ``tenants`` (every tenant the view
    holds, if None): every word a prefix of a word of the same tenant, so a
    Korean stem finds its inflected forms (서울 finds 서울에서). Given an
    ``agent``, of that agent's memories in each tenant only: the words
    behind its (tenant, agent) marks, none behind a tenant's."""
    if not words:
        return ""
    key = text_index_key(conn)
    if agent is not None:
        if tenants is None:
            tenants = [t for (t,) in conn.execute("SELECT DISTINCT tenant FROM memories WHERE agent = ?", (agent,))]
        marks = {agent_mark(key, t, agent) for t in tenants}
    else:
        if tenants is None:
            tenants = [t for (t,) in conn.execute("SELECT DISTINCT tenant FROM memories")]
        marks = {tenant_mark(key, t) for t in tenants}
    each = [fts5_query([keyed(mark, w) for w in words]) for mark in sorted(marks)]
    if not each:
        return '""'  # no tenant: a phrase of no words, which matches nothing
    return each[0] if len(each) == 1 else " OR ".join(f"({q})" for q in each)


def is_keyed(conn: sqlite3.Connection) -> bool:
    """Whether the index's words are keyed as this module keys them: a store
    of before the keys has no key, one keyed by tenant alone a key of no
    ``SHAPE``."""
    if not has_table(conn, "text_index_key"):
        return False
    columns = {row[1] for row in conn.execute("PRAGMA table_info(text_index_key)")}
    if "shape" not in columns:
        return False
    row = conn.execute("SELECT shape FROM text_index_key WHERE id = 1").fetchone()
    return row is None or row[0] == SHAPE
