"""Reading the usable view: memory rows (``MemoryRow``), policies."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from memwarden.events import CONTENT_BYTES, SUMMARY_TEXT, TEXT_JOIN

from ._errors import ProjectionDamaged
from ._fold import COLUMNS, SCOPE_COLUMNS


class Connection(Protocol):
    """What the view's SQL runs on: sqlite3's connection, or PostgreSQL's
    wrapped to take ``?`` marks (``memwarden.events.QmarkConnection``)."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Any: ...
    def executemany(self, sql: str, parameters: Any, /) -> Any: ...


def on_sqlite(conn: Connection) -> sqlite3.Connection:
    """``conn`` as sqlite3's, for sqlite-utils and the log's SQLite reads:
    where SQLite's projections and projector use them, they are only handed
    its connections (PostgreSQL's subclasses override those steps)."""
    return cast("sqlite3.Connection", conn)


# summary (text) and content (bytes) of a version in SQLite, over ``texts t``
SQLITE_TEXTS = f"{SUMMARY_TEXT}, {CONTENT_BYTES}"

QUOTED_COLUMNS = ", ".join(f'"{c}"' for c in COLUMNS)
SELECT_MEMORIES = f"SELECT {QUOTED_COLUMNS} FROM memories"

# What an agent's view of a memory is made of, in order: the agent query
# selects only these (the engine's views are built from them by position),
# and the index it walks carries every one of them (``_usable.INDEXES``).
# The last two are not shown: the gate reads them.
VIEW_COLUMNS = (
    "memory_id",
    "version",
    "status",
    "kind",
    "checksum",
    *SCOPE_COLUMNS,
    "source_url",
    "fetched_at",
    "expires_at",
    "verified_at",
    "policy",
    "revocation_version",
    "derived_from",
    "last_seq",
    "revoked_by",
    "invalidation_reason",
)


def parent_refs(memory_id: str, derived_from: str | None) -> list[dict[str, Any]]:
    """The memories a row says it was drawn from (``[{memory_id, version}]``)."""
    if derived_from is None or derived_from == "[]":
        return []
    try:
        refs = json.loads(derived_from) if isinstance(derived_from, str) else None
    except ValueError:
        refs = None
    if not isinstance(refs, list) or not all(
        isinstance(r, dict) and isinstance(r.get("memory_id"), str) and type(r.get("version")) is int for r in refs
    ):
        raise ProjectionDamaged(f"memory {memory_id}", "derived_from is not a list of {memory_id, version}")
    return refs


Key = tuple[str, str]  # (tenant, memory_id): a memory's identity


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """A memory's whole row in the usable view (``ViewReader.rows`` and
    ``memories``): ``COLUMNS``, in that order, so a statement selecting
    them makes one with ``MemoryRow(*values)``, no dict in between. Read a
    few at a time (a memory and its evidence), unlike the agent query's
    ``ViewRow`` read by the hundred. The fold works on dicts (``_fold``);
    ``as_dict`` and ``of`` cross over."""

    memory_id: str
    version: int
    kind: str
    status: str
    reason: str | None
    tenant: str
    project: str | None
    permission: str | None
    user: str | None
    agent: str | None
    tool: str | None
    tool_version: str | None
    input_hash: str | None
    source_url: str
    source: str | None
    repo: str | None
    branch: str | None
    fetched_at: str
    expires_at: str | None
    verified_at: str | None
    policy: str
    revocation_version: int | str
    checksum: str
    content_length: int
    invalidation_reason: str | None
    invalidated_by: int | None
    revoked_by: str | None
    revoked_until: str | None
    last_revocation: str | None
    quarantined_from: str | None
    derived_from: str
    first_seq: int
    last_seq: int

    @property
    def key(self) -> Key:
        return (self.tenant, self.memory_id)

    def as_dict(self) -> dict[str, Any]:
        """The row as the fold takes it."""
        return {name: getattr(self, name) for name in COLUMNS}

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> MemoryRow:
        """A row the fold made (a dict of every column)."""
        return cls(**row)


# the statements select COLUMNS by that list, so the fields must be it
if tuple(MemoryRow.__dataclass_fields__) != COLUMNS:
    raise AssertionError(f"MemoryRow's fields are not COLUMNS: {tuple(MemoryRow.__dataclass_fields__)}")


def row_dict(values: Sequence[Any]) -> dict[str, Any]:
    return dict(zip(COLUMNS, values, strict=True))


_SELECT_BY_KEYS = f"SELECT {QUOTED_COLUMNS} FROM k JOIN memories ON memories.tenant = k.t AND memories.memory_id = k.m"


def chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    """``items`` in runs of at most ``size`` (a statement's bound values stay few)."""
    return [items[start : start + size] for start in range(0, len(items), size)]


def value_marks(rows: Sequence[Sequence[Any]], width: int) -> str:
    """The ``VALUES`` marks of ``rows`` of ``width`` values each."""
    row = "(" + ",".join("?" * width) + ")"
    return ",".join(row for _ in rows)


def _values_by_keys(
    conn: Connection, keys: Sequence[Key], allowed: str = "TRUE", allowed_params: Sequence[Any] = ()
) -> Iterator[Sequence[Any]]:
    """The ``COLUMNS`` of the memories ``keys`` name (absent ones left
    out), among those the WHERE term ``allowed`` (over ``memories``) lets through."""
    for chunk in chunks(keys, 400):
        flat = [part for key in chunk for part in key]
        # a join on a VALUES list, not "(tenant, memory_id) IN (VALUES ...)":
        # SQLite answers the row-value IN with a scan of the whole table
        sql = f"WITH k(t, m) AS (VALUES {value_marks(chunk, 2)}) {_SELECT_BY_KEYS} WHERE {allowed}"
        yield from conn.execute(sql, [*flat, *allowed_params])


def fetch_rows(
    conn: Connection, keys: Sequence[Key], allowed: str = "TRUE", allowed_params: Sequence[Any] = ()
) -> dict[Key, MemoryRow]:
    """The rows of the memories ``keys`` name (absent ones left out), among
    those the WHERE term ``allowed`` (over ``memories``) lets through."""
    found: dict[Key, MemoryRow] = {}
    for values in _values_by_keys(conn, keys, allowed, allowed_params):
        row = MemoryRow(*values)
        found[(row.tenant, row.memory_id)] = row
    return found


def fetch_row_dicts(conn: Connection, keys: Sequence[Key]) -> dict[Key, dict[str, Any] | None]:
    """``fetch_rows`` as the fold takes them (dicts it may change), for the projector."""
    found: dict[Key, dict[str, Any] | None] = {}
    for values in _values_by_keys(conn, keys):
        row = row_dict(values)
        found[(row["tenant"], row["memory_id"])] = row
    return found


def fetch_row(conn: Connection, tenant: str, memory_id: str) -> MemoryRow | None:
    values = conn.execute(f"{SELECT_MEMORIES} WHERE tenant = ? AND memory_id = ?", (tenant, memory_id)).fetchone()
    return MemoryRow(*values) if values else None


def select_rows_with_text(
    conn: Connection,
    columns: Sequence[str],
    where: str,
    params: Sequence[Any],
    tail: str = "",
    *,
    texts: str = SQLITE_TEXTS,
) -> list[tuple[Any, ...]]:
    """``columns`` of the rows and, last, their summary (text) and stored
    content (bytes; None without one), in one statement: the agent query
    path. ``texts`` is how the backend reads the two (``SQLView.TEXTS``)."""
    return conn.execute(rows_with_text_sql(columns, where, tail, texts=texts), params).fetchall()


def rows_with_text_sql(columns: Sequence[str], where: str, tail: str = "", *, texts: str = SQLITE_TEXTS) -> str:
    """The statement ``select_rows_with_text`` runs."""
    selected = ", ".join(f'm."{c}"' for c in columns)
    return f"SELECT {selected}, {texts} FROM memories m {TEXT_JOIN} WHERE {where} {tail}"


def select_rows(conn: Connection, where: str, params: Sequence[Any], tail: str = "") -> list[MemoryRow]:
    return [MemoryRow(*v) for v in conn.execute(f"{SELECT_MEMORIES} WHERE {where} {tail}", params)]


# each policy's current version key (a policy never set is at "1")
POLICIES = "SELECT policy, version FROM policies"


def current_policies(conn: Connection) -> dict[str, str]:
    """Each policy's current version key (a policy never set is at "1")."""
    return dict(conn.execute(POLICIES).fetchall())
