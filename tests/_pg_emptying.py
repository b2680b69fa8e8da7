"""How a PostgreSQL database lent to tests (``backends.PostgresBackend``)
is emptied between test modules, and dropped after the session.

An emptied database is as new: nothing of memwarden lives outside its
``public`` schema. A store whose schema is memwarden's own, as its making
left it (the fingerprint), keeps it with its rows deleted; any other loses
its schema. ``DROP DATABASE`` waits for a checkpoint of the whole server, so
the drops happen in a process of their own after the session.
"""

from __future__ import annotations

from typing import Any

# drops the databases named, and any an ended session left (its process gone)
DROPPER = """
import os, sys, psycopg
server, names = sys.argv[1], sys.argv[2:]
with psycopg.connect(server + "/postgres", autocommit=True) as admin:
    for (name,) in admin.execute("SELECT datname FROM pg_database WHERE datname LIKE 'memwarden_test_%'").fetchall():
        pid = name.split("_")[2]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            names.append(name)
    for name in dict.fromkeys(names):
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
"""

# a schema as memwarden makes it: any change (a trigger a test dropped, a
# column it altered) makes a store that is not lent again as it is
_FINGERPRINT = (
    "SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns"
    " WHERE table_schema = 'public' ORDER BY 1, 2",
    "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1",
    "SELECT tgrelid::regclass::text, tgname, tgenabled FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1, 2",
    "SELECT proname, md5(prosrc) FROM pg_proc WHERE pronamespace = 'public'::regnamespace ORDER BY 1, 2",
    "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE connamespace = 'public'::regnamespace"
    " ORDER BY 1, 2",
    "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public' ORDER BY 1",
)


def _tables(conn: Any) -> list[str]:
    return [row[0] for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")]


def _fingerprint(conn: Any) -> list[Any]:
    return [conn.execute(sql).fetchall() for sql in _FINGERPRINT]


def making(url: str) -> tuple[list[Any], dict[str, list[tuple[Any, ...]]]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        found = {table: conn.execute(f'SELECT * FROM "{table}"').fetchall() for table in _tables(conn)}
        return _fingerprint(conn), {table: rows for table, rows in found.items() if rows}


# past this many rows a store is truncated (new files) rather than deleted
# from: a DELETE of a few rows is ten times quicker than a TRUNCATE
_DELETE_UP_TO = 2_000


def emptied(url: str, fingerprint: list[Any], seed: dict[str, list[tuple[Any, ...]]]) -> bool:
    """Whether the store at ``url`` had memwarden's schema as it makes it,
    and if so, every row gone and the making's rows back, past the log's
    own refusals (triggers do not fire in a replica's session)."""
    import psycopg

    with psycopg.connect(url) as conn:
        if _fingerprint(conn) != fingerprint:
            return False
        conn.execute("SET LOCAL session_replication_role = replica")
        tables = _tables(conn)
        deleted = sum(conn.execute(f'DELETE FROM "{t}"').rowcount for t in tables)
        if deleted > _DELETE_UP_TO:
            conn.rollback()
            conn.execute("SET LOCAL session_replication_role = replica")
            conn.execute("TRUNCATE " + ", ".join(f'"{t}"' for t in tables) + " RESTART IDENTITY")
        for table, rows in seed.items():
            marks = ", ".join(["%s"] * len(rows[0]))
            conn.cursor().executemany(f'INSERT INTO "{table}" VALUES ({marks})', rows)
    return True
