"""The PostgreSQL backend of the contract suite: a database per store,
lent from a pool the session keeps (``tests/_pg_emptying.py`` empties them)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memwarden.events import content_checksum

from ._backend import Backend, Db
from ._pg_emptying import DROPPER, emptied, making

POSTGRES_SERVER = os.environ.get("MEMWARDEN_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432")


class PostgresBackend(Backend):
    """A database of its own per store a test names, on the server
    ``MEMWARDEN_TEST_POSTGRES`` names (default: the machines' own).

    Databases are lent, not made and dropped per test: ``DROP DATABASE``
    waits for a checkpoint of the whole server (seconds each once several
    workers write), and ``CREATE DATABASE`` copies a template. A database
    lent during a test module is emptied when the module ends (its
    connections ended, its schema dropped and made again, which no
    checkpoint waits for) and lent again; the session's databases are
    dropped together at its end. An emptied database is as new: nothing of
    memwarden lives outside its ``public`` schema."""

    name = "postgres"

    def __init__(self, server: str = POSTGRES_SERVER) -> None:
        self.server = server
        self._admin: Any = None
        self._made: list[str] = []  # every database this session created: dropped at its end
        # in each name beside the pid: pids come round again (32,768 of them),
        # and an ended session's dropper, still at work, must not drop a new one's
        self._nonce = secrets.token_hex(4)
        self._free: list[str] = []  # emptied, ready to lend
        self._lent: dict[str, str] = {}  # the store a test named -> its database, until the module ends
        self._migrated: list[str] = []  # memwarden's schema, no rows: ready to lend as a store
        self._pristine: tuple[list[Any], dict[str, list[tuple[Any, ...]]]] | None = None
        self._template = ""  # the store as made, copied for each new one (see _clone_pristine)

    def available(self) -> str | None:
        if self._admin is not None:
            return None
        try:
            import psycopg
        except ImportError:
            return "psycopg is not installed (pip install 'memwarden[postgres]')"
        try:
            self._admin = psycopg.connect(f"{self.server}/postgres", autocommit=True, connect_timeout=3)
        except psycopg.OperationalError as exc:
            return f"no PostgreSQL server at {self.server}: {str(exc).strip().splitlines()[0]}"
        return None

    def close(self) -> None:
        if self._admin is None:
            return
        self._admin.close()
        self._admin = None
        made, self._made, self._free, self._lent, self._migrated = self._made, [], [], {}, []
        self._pristine, self._template = None, ""
        # each DROP DATABASE waits for a checkpoint of the whole server
        # (seconds once others write): a process of its own drops them, and
        # what an earlier session's left behind, while this one ends
        subprocess.Popen(
            [sys.executable, "-c", DROPPER, self.server, *made],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def new_database(self, name: str) -> str:
        """The URL of a new, empty database called ``name``."""
        assert self.available() is None
        self._admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self._admin.execute(f'CREATE DATABASE "{name}"')
        # a test's commits need not reach the disk (a killed client loses
        # nothing the server acknowledged either way): seconds of fsync saved
        self._admin.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
        self._made.append(name)
        return f"{self.server}/{name}"

    def lend(self) -> str:
        """The URL of an empty database (no schema), until ``give_back``."""
        assert self.available() is None
        if self._free:
            return f"{self.server}/{self._free.pop()}"
        if self._migrated:
            url = f"{self.server}/{self._migrated.pop()}"
            self._remake_schema(url)
            return url
        return self.new_database(f"memwarden_test_{os.getpid()}_{self._nonce}_{len(self._made)}")

    def give_back(self, url: str) -> None:
        """Empty the database at ``url`` and lend it again, its connections
        ended first (a server or a Warden a test left open). A store whose
        schema is still memwarden's own keeps it, its rows truncated (the
        next open need not make it again); any other loses its schema."""
        database = url.rsplit("/", 1)[1]
        self._admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        )
        if self._pristine is not None and emptied(url, *self._pristine):
            self._migrated.append(database)
        else:
            self._remake_schema(url)
            self._free.append(database)

    def _remake_schema(self, url: str) -> None:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA public CASCADE")
            conn.execute("CREATE SCHEMA public")

    def module_ended(self) -> None:
        lent, self._lent = self._lent, {}
        for database in lent.values():
            self.give_back(f"{self.server}/{database}")

    def db(self, tmp_path: Path, name: str = "memwarden.db") -> str:
        key = str(tmp_path / name)
        if key not in self._lent:
            if self._pristine is None:
                self._pristine = self._make_pristine()
            self._lent[key] = self._migrated.pop() if self._migrated else self._clone_pristine()
        return f"{self.server}/{self._lent[key]}"

    def scratch(self, tmp_path: Path, name: str = "scratch") -> str:
        key = str(tmp_path / name)
        if key in self._lent:
            self._empty(f"{self.server}/{self._lent[key]}")
        return self.db(tmp_path, name)

    def _empty(self, url: str) -> None:
        """The store at ``url`` as new, its connections ended first: its rows
        deleted (its schema kept, as memwarden made it), or its schema gone."""
        database = url.rsplit("/", 1)[1]
        self._admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        )
        if self._pristine is None or not emptied(url, *self._pristine):
            self._remake_schema(url)

    def _make_pristine(self) -> tuple[list[Any], dict[str, list[tuple[Any, ...]]]]:
        """What a store holds once opened: its schema's fingerprint and the
        rows its making writes, to tell a store a test left as memwarden
        made it (truncated and lent again) from one it damaged. The store
        stays as made, never lent: the template new stores are copied from."""
        from memwarden.engine import Warden

        url = self.lend()
        Warden(url).close()
        found = making(url)
        self._template = url.rsplit("/", 1)[1]
        return found

    def _clone_pristine(self) -> str:
        """A new database holding a store as memwarden makes it, copied from
        the template (a copy of a small database instead of making the
        schema again: a second or more of the server's work for each)."""
        name = f"memwarden_test_{os.getpid()}_{self._nonce}_{len(self._made)}"
        # a copy needs its template without sessions (a closed Warden's may still be ending)
        self._admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (self._template,),
        )
        self._admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self._admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self._template}"')
        self._admin.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
        self._made.append(name)
        return name

    def erase_without_waiting(self, warden: Any) -> None:
        # before its VACUUM FULL an erasure waits (30 s at most) for every
        # older transaction on the server, the other test workers' too
        warden.store.erasure_wait = 0.0

    def _run(self, db: Db, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(str(db), autocommit=True) as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    def _text_key(self, db: Db, checksum: str) -> tuple[str, str, int]:
        for tenant, memory_id, version, content in self._run(
            db, "SELECT tenant, memory_id, version, content FROM texts"
        ):
            if content is not None and content_checksum(bytes(content)) == checksum:
                return tenant, memory_id, version
        raise LookupError(checksum)

    def stored_text(self, db: Db, checksum: str) -> bytes | None:
        (content,) = self._run(
            db,
            "SELECT content FROM texts WHERE tenant = %s AND memory_id = %s AND version = %s",
            self._text_key(db, checksum),
        )[0]
        return None if content is None else bytes(content)

    def text_versions(self, db: Db) -> int:
        return int(self._run(db, "SELECT count(*) FROM texts")[0][0])

    def replace_summary(self, db: Db, memory_id: str, stored: str) -> None:
        self._run(db, "UPDATE texts SET summary = %s WHERE memory_id = %s", (stored, memory_id))

    def replace_text(self, db: Db, checksum: str, stored: Any) -> None:
        # bytea holds bytes only: text and numbers go in as their UTF-8
        if stored is not None and not isinstance(stored, bytes):
            stored = str(stored).encode("utf-8")
        self._run(
            db,
            "UPDATE texts SET content = %s WHERE tenant = %s AND memory_id = %s AND version = %s",
            (stored, *self._text_key(db, checksum)),
        )

    def set_view(self, db: Db, memory_id: str, **columns: Any) -> None:
        assignments = ", ".join(f'"{c}" = %s' for c in columns)
        self._run(db, f"UPDATE memories SET {assignments} WHERE memory_id = %s", (*columns.values(), memory_id))

    def rewrite_payload(self, db: Db, seq: int, payload: bytes) -> None:
        # text holds neither NUL nor bad UTF-8: the nearest damage it can hold
        text = payload.decode("utf-8", "replace").replace("\x00", "\ufffd")
        import psycopg

        with psycopg.connect(str(db)) as conn:  # one transaction: what an owner of the database does
            conn.execute("ALTER TABLE events DISABLE TRIGGER events_append_only")
            conn.execute("UPDATE events SET payload = %s WHERE seq = %s", (text, seq))
            conn.execute("ALTER TABLE events ENABLE TRIGGER events_append_only")

    def count_events(self, db: Db, event_type: str) -> int:
        return int(self._run(db, "SELECT count(*) FROM events WHERE type = %s", (event_type,))[0][0])

    def copy_store(self, db: Db, to: Db) -> None:
        dump = subprocess.run(["pg_dump", "--no-owner", str(db)], check=True, capture_output=True).stdout
        self._remake_schema(str(to))  # a database lent with memwarden's schema already made takes no dump
        subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", str(to)], input=dump, check=True, capture_output=True)

    def bytes_at_rest(self, db: Db) -> bytes:
        """The database's table files (after a checkpoint): what a disk
        image of the data directory holds for it, outside the WAL."""
        (oid,) = self._run(db, "SELECT oid FROM pg_database WHERE datname = current_database()")[0]
        self._run(db, "CHECKPOINT")
        (data,) = self._run(db, "SHOW data_directory")[0]
        folder = Path(data) / "base" / str(oid)
        return b"".join(p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file())

    @contextmanager
    def statements(self, warden: Any) -> Iterator[list[str]]:
        import psycopg

        seen: list[str] = []
        me = threading.get_ident()  # not the listeners' threads
        originals = {name: getattr(psycopg.Cursor, name) for name in ("execute", "executemany", "copy")}

        def counting(original: Any) -> Any:
            def call(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
                if threading.get_ident() == me:
                    seen.append(query if isinstance(query, str) else repr(query))
                return original(cursor, query, *args, **kwargs)

            return call

        for name, original in originals.items():
            setattr(psycopg.Cursor, name, counting(original))
        try:
            yield seen
        finally:
            for name, original in originals.items():
                setattr(psycopg.Cursor, name, original)

    def driver_failure(self) -> Exception:
        import psycopg

        return psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly")

    def sever(self, view: Any) -> None:
        view.conn.raw.close()
