"""The SQLite store: the engine's questions to the usable view, in SQLite's
SQL. The store port of issue #18 grows here: each engine module's statements
move in, named for what they answer, and the engine asks by name. (The
agent query's SQL is in ``_rows`` and ``_usable``; the log's in
``memwarden.events._sqlite``.)"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from memwarden.events import CONTENT_BYTES, TEXT_JOIN, RecordedEvent

from ._rows import SELECT_MEMORIES, VIEW_COLUMNS, Key, row_dict, select_rows_with_text
from ._runner import Projector
from ._selector import BLOCKED_FETCH_SQL, selector_sql
from ._stats import StatsProjection
from ._usable import RECHECK, UsableProjection

REVOCATION_FIELDS = (
    "revocation_id",
    "seq",
    "selector",
    "reason",
    "issued_by",
    "effective_at",
    "recorded_at",
    "covered",
    "readback_status",
    "readback_seq",
    "readback_latency_ms",
    "still_visible",
    "leaked_ids",
)


def rows_where(conn: sqlite3.Connection, where: str, args: list[Any], *, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` whole memory rows matching ``where`` (a caller's
    naming of a memory, confined to what it may see)."""
    return [row_dict(r) for r in conn.execute(f"{SELECT_MEMORIES} WHERE {where} LIMIT ?", [*args, limit])]


def policy_version(conn: sqlite3.Connection, policy: str) -> str | None:
    """The current version key of ``policy``, or None if it was never set."""
    row = conn.execute("SELECT version FROM policies WHERE policy = ?", (policy,)).fetchone()
    return row[0] if row else None


def past_expiry(conn: sqlite3.Connection, now: str, limit: int) -> list[tuple[str, str, int, str]]:
    """(tenant, memory_id, version, expires_at) of usable memories at or past
    their expiry, the earliest first."""
    return conn.execute(
        # "+status": the expiry index, not the status index, drives this
        "SELECT tenant, memory_id, version, expires_at FROM memories WHERE +status = 'usable' "
        "AND expires_at IS NOT NULL AND expires_at <= ? ORDER BY expires_at, memory_id, tenant LIMIT ?",
        (now, limit),
    ).fetchall()


def unconfirmed_revocations(conn: sqlite3.Connection) -> list[str]:
    """Revocations with no read-back yet, or a failed one, oldest first."""
    return [
        r[0]
        for r in conn.execute(
            "SELECT revocation_id FROM revocations WHERE readback_status IS NULL OR readback_status = 'failed' "
            "ORDER BY seq"
        )
    ]


def memories_of_kinds(conn: sqlite3.Connection, kinds: Iterable[str]) -> set[Key]:
    """(tenant, memory_id) of every memory of the given kinds."""
    wanted = sorted(kinds)
    return set(
        conn.execute(
            f"SELECT tenant, memory_id FROM memories WHERE kind IN ({','.join('?' * len(wanted))})", wanted
        ).fetchall()
    )


def revoked_by(conn: sqlite3.Connection, revocation: dict[str, Any]) -> list[Key]:
    """(tenant, memory_id) of what ``revocation`` covers, by memory id."""
    where, params = selector_sql(revocation["selector"])
    return conn.execute(
        f"SELECT tenant, memory_id FROM memories WHERE ({where}) AND {BLOCKED_FETCH_SQL} ORDER BY memory_id",
        [*params, revocation["effective_at"]],
    ).fetchall()


def readback_state(conn: sqlite3.Connection, revocation_id: str) -> tuple[str | None, str | None] | None:
    """(readback_status, leaked_ids JSON) of a revocation; None if there is none."""
    row = conn.execute(
        "SELECT readback_status, leaked_ids FROM revocations WHERE revocation_id = ?", (revocation_id,)
    ).fetchone()
    return (row[0], row[1]) if row else None


def revocation_row(conn: sqlite3.Connection, revocation_id: str) -> dict[str, Any] | None:
    """A revocation as the view holds it (selector and leaked ids as JSON text)."""
    row = conn.execute(
        f"SELECT {', '.join(REVOCATION_FIELDS)} FROM revocations WHERE revocation_id = ?", (revocation_id,)
    ).fetchone()
    return dict(zip(REVOCATION_FIELDS, row, strict=True)) if row else None


def due_rows(conn: sqlite3.Connection, now: str, allowed: str, params: list[Any]) -> list[tuple[str, str, str, str]]:
    """(tenant, memory_id, source_url, reason) of what must be re-verified,
    in precedence (a memory may come more than once: the first counts):
    invalidated as ``revoked``, past expiry, failed checks, older policy
    versions. ``allowed`` and ``params`` confine every statement to a caller."""
    found: list[tuple[str, str, str, str]] = []

    def add(sql: str, args: list[Any], reason: str) -> None:
        found.extend(
            (tenant, memory_id, url, reason)
            for tenant, memory_id, url in conn.execute(
                f"SELECT tenant, memory_id, source_url FROM memories WHERE {sql} AND {allowed}", [*args, *params]
            )
        )

    add(f"status = 'invalidated' AND {RECHECK}", [], "revoked")
    # "+status": walk the expiry index (the few past due), not a status
    # index; memories marked expired come from the recheck index. Separate
    # statements, not a UNION: the caller drops the overlap for free.
    add("expires_at <= ? AND +status IN ('usable', 'expired', 'unknown')", [now], "expired")
    add(f"status = 'expired' AND {RECHECK}", [], "expired")
    add(f"status = 'unknown' AND {RECHECK}", [], "unknown")
    for policy, version in conn.execute("SELECT policy, version FROM policies").fetchall():
        add(
            "policy = ? AND revocation_version != ? AND +status IN ('usable', 'expired', 'unknown')",
            [policy, version],
            "policy_changed",
        )
    return found


# the scope filters of the agent query: argument name -> column
SCOPE_FILTERS = (
    ("project", "project"),
    ("permission", "permission"),
    ("user", '"user"'),
    ("agent", "agent"),
    ("tool", "tool"),
    ("kind", "kind"),
)


def agent_query(
    conn: sqlite3.Connection,
    *,
    tenant: str,
    allowed: str,
    allowed_params: list[Any],
    filters: dict[str, str | None],
    ids: list[str] | None,
    match: str | None,
    usable_at: str | None,
    limit: int,
    offset: int,
) -> list[tuple[Any, ...]]:
    """One page of the agent query, newest first, as ``VIEW_COLUMNS`` rows
    with their texts: a tenant's memories that ``allowed`` lets the caller
    read, narrowed by scope ``filters``, ``ids`` and a text-index ``match``;
    with ``usable_at``, only rows the view holds usable and unexpired then
    (an index-friendly prefilter: the gate still decides)."""
    clauses = ["m.tenant = ?", allowed]
    params: list[Any] = [tenant, *allowed_params]
    for name, column in SCOPE_FILTERS:
        if filters.get(name) is not None:
            clauses.append(f"{column} = ?")
            params.append(filters[name])
    if ids is not None:
        clauses.append(f"m.memory_id IN ({','.join('?' * len(ids))})")
        params.extend(ids)
    if match is not None:
        clauses.append("mid IN (SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?)")
        params.append(match)
    if usable_at is not None:
        clauses.append("status = 'usable' AND (expires_at IS NULL OR expires_at > ?)")
        params.append(usable_at)
    return select_rows_with_text(
        conn, VIEW_COLUMNS, " AND ".join(clauses), [*params, limit, offset], "ORDER BY m.last_seq DESC LIMIT ? OFFSET ?"
    )


def text_matches(
    conn: sqlite3.Connection, match: str, allowed: str, allowed_params: list[Any], tenant: str | None = None
) -> list[str]:
    """Ids of memories whose texts match (any status): the raw text index."""
    sql = (
        "SELECT m.memory_id FROM memories_fts f JOIN memories m ON m.mid = f.rowid "
        f"WHERE memories_fts MATCH ? AND {allowed}"
    )
    args: list[Any] = [match, *allowed_params]
    if tenant is not None:
        sql += " AND m.tenant = ?"
        args.append(tenant)
    return [r[0] for r in conn.execute(sql, args)]


def private_view(
    events: Iterable[RecordedEvent],
    *,
    path: str = ":memory:",
    text_source: Callable[..., Any] | None = None,
) -> sqlite3.Connection:
    """The view built from ``events`` alone in a database of its own (in
    memory unless ``path`` says where): as-of replays and the check of the
    live view build here, never touching the live one."""
    conn = sqlite3.connect(path, isolation_level=None)
    projector = Projector([UsableProjection(text_source=text_source), StatsProjection()])
    conn.execute("BEGIN")
    projector.build(conn, events)
    conn.execute("COMMIT")
    return conn


def current_texts(conn: sqlite3.Connection) -> Iterator[tuple[str, bytes | None]]:
    """(checksum, content bytes) of every memory not erased."""
    yield from conn.execute(
        f"SELECT m.checksum, {CONTENT_BYTES} FROM memories m {TEXT_JOIN} WHERE m.status <> 'erased'"
    )
