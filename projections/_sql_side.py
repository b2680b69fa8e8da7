"""The tables beside the usable view, not built from events: API keys (a
key is a credential, and its secret's hash must never enter the log), the
server's own secrets (kept in the store so that every node of a shared
store holds the same ones) and the sources that failed lately (a retry
schedule is not history). Written once in SQL both backends speak;
``SQLView`` inherits them."""

from __future__ import annotations

import json

from ._reads import Backoff, KeyRow
from ._rows import Connection


class SideTables:
    conn: Connection

    # -- API keys: a table beside the view, not built from events (a key is a
    # credential, and its secret's hash must never enter the log) -------------------------

    def add_key(self, key_id: str, key_hash: str, role: str, tenants: list[str], agent: str | None, now: str) -> None:
        self.conn.execute(
            "INSERT INTO api_keys (key_id, key_hash, role, tenants, agent, created_at) VALUES (?,?,?,?,?,?)",
            (key_id, key_hash, role, json.dumps(tenants), agent, now),
        )

    def keys(self, key_id: str | None = None) -> list[KeyRow]:
        """Every key, oldest first, never with its hash; with ``key_id``,
        that key (with its hash), or nothing if there is no such key."""
        if key_id is not None:
            found = self.conn.execute(
                "SELECT key_id, role, tenants, agent, created_at, revoked_at, key_hash FROM api_keys WHERE key_id = ?",
                (key_id,),
            ).fetchall()
        else:
            found = self.conn.execute(
                "SELECT key_id, role, tenants, agent, created_at, revoked_at, NULL FROM api_keys ORDER BY created_at"
            ).fetchall()
        return [KeyRow(k, r, tuple(json.loads(t)), a, c, v, h) for k, r, t, a, c, v, h in found]

    # -- the server's secrets: made once per store and shared by every node on it;
    # a credential, so never in the log, an export or a log line ---------------------------

    def keep_server_secret(self, name: str, secret: bytes, now: str) -> bytes:
        """The secret under ``name``: the one already kept (a writer on
        another node may have kept one first), or ``secret``, kept now."""
        self.conn.execute(
            "INSERT INTO server_secrets (name, secret, created_at) VALUES (?,?,?) ON CONFLICT(name) DO NOTHING",
            (name, secret.hex(), now),
        )
        return self.server_secrets(name)[name]  # inserted, or already there, in this transaction

    def server_secrets(self, name: str | None = None) -> dict[str, bytes]:
        """Every secret by name (a migration carries them to the new store);
        with ``name``, only the one kept under it, if one is."""
        sql, args = "SELECT name, secret FROM server_secrets", tuple[str, ...]()
        if name is not None:
            sql, args = f"{sql} WHERE name = ?", (name,)
        rows = self.conn.execute(f"{sql} ORDER BY name", args).fetchall()
        return {kept: bytes.fromhex(secret) for kept, secret in rows}

    def set_server_secret(self, name: str, secret: bytes, now: str) -> None:
        """``secret`` under ``name``, in place of any kept before (a migration's copy)."""
        self.conn.execute(
            "INSERT INTO server_secrets (name, secret, created_at) VALUES (?,?,?) "
            "ON CONFLICT(name) DO UPDATE SET secret = excluded.secret, created_at = excluded.created_at",
            (name, secret.hex(), now),
        )

    # -- sources that failed lately: a table beside the view, shared by every
    # scheduler on the store (not events: a retry schedule is not history) ----------------

    def backoff(self, host: str) -> Backoff | None:
        """(failures in a row, the time before which not to try) of a source; None if it is fine."""
        row = self.conn.execute("SELECT failures, until FROM host_backoff WHERE host = ?", (host,)).fetchone()
        return Backoff(int(row[0]), float(row[1])) if row else None

    def set_backoff(self, host: str, failures: int, until: float) -> None:
        self.conn.execute(
            "INSERT INTO host_backoff (host, failures, until) VALUES (?,?,?) "
            "ON CONFLICT(host) DO UPDATE SET failures = excluded.failures, until = excluded.until",
            (host, failures, until),
        )

    def clear_backoff(self, host: str) -> None:
        self.conn.execute("DELETE FROM host_backoff WHERE host = ?", (host,))

    def revoke_key(self, key_id: str, now: str) -> bool:
        """Disable a key; False if it does not exist or was revoked already."""
        cursor = self.conn.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL", (now, key_id)
        )
        return bool(cursor.rowcount)
