"""Reading the usable view: memory rows as dicts, revocations, policies."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
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


def row_dict(values: Sequence[Any]) -> dict[str, Any]:
    return dict(zip(COLUMNS, values, strict=True))


Key = tuple[str, str]  # (tenant, memory_id): a memory's identity
_SELECT_BY_KEYS = f"SELECT {QUOTED_COLUMNS} FROM k JOIN memories ON memories.tenant = k.t AND memories.memory_id = k.m"


def chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    """``items`` in runs of at most ``size`` (a statement's bound values stay few)."""
    return [items[start : start + size] for start in range(0, len(items), size)]


def value_marks(rows: Sequence[Sequence[Any]], width: int) -> str:
    """The ``VALUES`` marks of ``rows`` of ``width`` values each."""
    row = "(" + ",".join("?" * width) + ")"
    return ",".join(row for _ in rows)


def fetch_rows(
    conn: Connection, keys: Sequence[Key], allowed: str = "TRUE", allowed_params: Sequence[Any] = ()
) -> dict[Key, dict[str, Any] | None]:
    """The rows of the memories ``keys`` name (absent ones left out), among
    those the WHERE term ``allowed`` (over ``memories``) lets through."""
    found: dict[Key, dict[str, Any] | None] = {}
    for chunk in chunks(keys, 400):
        flat = [part for key in chunk for part in key]
        # a join on a VALUES list, not "(tenant, memory_id) IN (VALUES ...)":
        # SQLite answers the row-value IN with a scan of the whole table
        sql = f"WITH k(t, m) AS (VALUES {value_marks(chunk, 2)}) {_SELECT_BY_KEYS} WHERE {allowed}"
        for values in conn.execute(sql, [*flat, *allowed_params]):
            row = row_dict(values)
            found[(row["tenant"], row["memory_id"])] = row
    return found


def fetch_row(conn: Connection, tenant: str, memory_id: str) -> dict[str, Any] | None:
    values = conn.execute(f"{SELECT_MEMORIES} WHERE tenant = ? AND memory_id = ?", (tenant, memory_id)).fetchone()
    return row_dict(values) if values else None


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


def select_rows(conn: Connection, where: str, params: Sequence[Any], tail: str = "") -> list[dict[str, Any]]:
    return [row_dict(v) for v in conn.execute(f"{SELECT_MEMORIES} WHERE {where} {tail}", params)]


# each policy's current version key (a policy never set is at "1")
POLICIES = "SELECT policy, version FROM policies"


def current_policies(conn: Connection) -> dict[str, str]:
    """Each policy's current version key (a policy never set is at "1")."""
    return dict(conn.execute(POLICIES).fetchall())
