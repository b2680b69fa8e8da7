"""The SQLite store's plain tables, declared through sqlite-utils: the API
keys beside the view, and each projection's position. The view's own
tables (STRICT rows, a virtual FTS5 index, covering indexes) keep their
hand-written DDL in ``_usable``: what they need is beyond a declaration.
Each is declared only where it is missing (``database`` imports sqlite-utils)."""

from __future__ import annotations

import sqlite3

from memwarden.events.sqlite import database, has_table


def create_keys_table(conn: sqlite3.Connection) -> None:
    """API keys: not built from events (a key is a credential, and its
    secret's hash must never enter the log)."""
    if has_table(conn, "api_keys"):  # an existing store: sqlite-utils stays unloaded
        return
    database(conn).table("api_keys").create(
        {
            "key_id": str,
            "key_hash": str,
            "role": str,
            "tenants": str,
            "agent": str,
            "created_at": str,
            "revoked_at": str,
        },
        pk="key_id",
        not_null={"key_hash", "role", "tenants", "created_at"},
        if_not_exists=True,
    )


def create_secrets_table(conn: sqlite3.Connection) -> None:
    """The server's secrets (``SideTables.server_secret``): a credential, not built from events."""
    if has_table(conn, "server_secrets"):
        return
    database(conn).table("server_secrets").create(
        {"name": str, "secret": str, "created_at": str},
        pk="name",
        not_null={"secret", "created_at"},
        if_not_exists=True,
    )


def create_backoff_table(conn: sqlite3.Connection) -> None:
    """Sources that failed lately, shared by every scheduler on the store."""
    if has_table(conn, "host_backoff"):
        return
    database(conn).table("host_backoff").create(
        {"host": str, "failures": int, "until": float}, pk="host", not_null={"failures", "until"}, if_not_exists=True
    )


def create_tracking_table(conn: sqlite3.Connection) -> None:
    """The seq each projection has applied; moved only forward (``_runner``)."""
    if has_table(conn, "projection_tracking"):
        return
    database(conn).table("projection_tracking").create(
        {"name": str, "seq": int}, pk="name", not_null={"seq"}, if_not_exists=True
    )
