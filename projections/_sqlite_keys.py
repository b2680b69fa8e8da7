"""The SQLite store's API keys: a table beside the view, not built from
events (a key is a credential, and its secret's hash must never enter the
log). The engine's ``KeyStore`` decides who may do what; this holds the rows."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

KEYS_SCHEMA = """CREATE TABLE IF NOT EXISTS api_keys (
    key_id TEXT PRIMARY KEY, key_hash TEXT NOT NULL, role TEXT NOT NULL, tenants TEXT NOT NULL,
    agent TEXT, created_at TEXT NOT NULL, revoked_at TEXT
)"""


def create_keys_table(conn: sqlite3.Connection) -> None:
    conn.execute(KEYS_SCHEMA)


def insert_key(
    conn: sqlite3.Connection, key_id: str, key_hash: str, role: str, tenants: list[str], agent: str | None, now: str
) -> None:
    conn.execute(
        "INSERT INTO api_keys (key_id, key_hash, role, tenants, agent, created_at) VALUES (?,?,?,?,?,?)",
        (key_id, key_hash, role, json.dumps(tenants), agent, now),
    )


def key_row(conn: sqlite3.Connection, key_id: str) -> dict[str, Any] | None:
    """A key's hash, role, tenants, agent and revocation time; None if there
    is no such key (or no key table yet)."""
    try:
        row = conn.execute(
            "SELECT key_hash, role, tenants, agent, revoked_at FROM api_keys WHERE key_id = ?", (key_id,)
        ).fetchone()
    except sqlite3.OperationalError:  # a database that never had a key
        return None
    if row is None:
        return None
    return {"key_hash": row[0], "role": row[1], "tenants": json.loads(row[2]), "agent": row[3], "revoked_at": row[4]}


def key_rows(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every key (never a hash), oldest first."""
    return [
        {"key_id": k, "role": r, "tenants": json.loads(t), "agent": a, "created_at": c, "revoked_at": v}
        for k, r, t, a, c, v in conn.execute(
            "SELECT key_id, role, tenants, agent, created_at, revoked_at FROM api_keys ORDER BY created_at"
        )
    ]


def revoke_key(conn: sqlite3.Connection, key_id: str, now: str) -> bool:
    """Disable a key; False if it does not exist or was revoked already."""
    return bool(
        conn.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL", (now, key_id)
        ).rowcount
    )
