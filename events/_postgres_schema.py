"""The log's tables on PostgreSQL and their upkeep: the DDL a new database
runs, and the planner's statistics the writers keep up as the log grows."""

from __future__ import annotations

import psycopg
from psycopg.sql import SQL, Identifier

from ._canonical import GENESIS_HASH
from ._recorded import ROW_COLUMNS

# the log's columns no query filters on: the planner keeps no statistics of them
_UNFILTERED = frozenset({"payload", "prev_hash", "hash"})

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS events (
        seq bigint PRIMARY KEY,
        event_id text NOT NULL UNIQUE,
        type text NOT NULL,
        stream text NOT NULL,
        stream_version bigint NOT NULL,
        occurred_at text NOT NULL,
        recorded_at text NOT NULL,
        actor text NOT NULL,
        schema_version integer NOT NULL,
        payload text NOT NULL,
        prev_hash text NOT NULL,
        hash text NOT NULL,
        UNIQUE (stream, stream_version)
    )""",
    # What the planner needs of the log is its size and its keys: a sample
    # of 3,000 rows (not 30,000) and no statistics over the payload and the
    # hashes, which no query filters on: the writers run ANALYZE as the log
    # grows, so it must stay cheap
    "ALTER TABLE events "
    + ", ".join(
        f"ALTER COLUMN {column} SET STATISTICS {0 if column in _UNFILTERED else 10}"
        for column in ROW_COLUMNS.split(", ")
    ),
    "CREATE INDEX IF NOT EXISTS events_by_type ON events (type, seq)",
    # the one row every writer locks first; its seq is what was issued, so a
    # log whose last rows went missing is told from one that ends there
    """CREATE TABLE IF NOT EXISTS log_head (
        only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
        seq bigint NOT NULL,
        hash text NOT NULL,
        recorded_at text
    )""",
    f"INSERT INTO log_head (seq, hash, recorded_at) VALUES (0, '{GENESIS_HASH}', NULL) ON CONFLICT DO NOTHING",
    """CREATE OR REPLACE FUNCTION memwarden_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'memwarden: the event log is append-only; % refused', TG_OP
            USING ERRCODE = 'insufficient_privilege';
    END $$""",
    """CREATE OR REPLACE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
        FOR EACH ROW EXECUTE FUNCTION memwarden_append_only()""",
    """CREATE OR REPLACE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
        FOR EACH STATEMENT EXECUTE FUNCTION memwarden_append_only()""",
    """CREATE OR REPLACE FUNCTION memwarden_head_forward() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.seq < OLD.seq THEN
            RAISE EXCEPTION 'memwarden: the log head only moves forward (% to %)', OLD.seq, NEW.seq
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN NEW;
    END $$""",
    """CREATE OR REPLACE TRIGGER log_head_forward BEFORE UPDATE ON log_head
        FOR EACH ROW EXECUTE FUNCTION memwarden_head_forward()""",
    """CREATE OR REPLACE TRIGGER log_head_kept BEFORE DELETE OR TRUNCATE ON log_head
        FOR EACH STATEMENT EXECUTE FUNCTION memwarden_append_only()""",
)

TRIGGERS = ("events_append_only", "events_no_truncate", "log_head_forward", "log_head_kept")
SCHEMA_PRESENT = (
    "SELECT count(*) FROM pg_trigger WHERE tgrelid IN (to_regclass('events'), to_regclass('log_head')) "
    f"AND tgname IN ({', '.join(repr(t) for t in TRIGGERS)})"
)
_OWN_TABLES = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename"

# events appended by one process before it analyses the store itself
_ANALYZE_AFTER = 50_000
# ... and, sooner, whenever the log has doubled since (from this many events on)
_ANALYZE_FIRST = 1_000


def install_schema(conn: psycopg.Connection) -> None:
    """Create the log's tables and triggers on a database that lacks them.

    Only a database without the whole schema runs its DDL: CREATE OR
    REPLACE TRIGGER locks the tables against every writer, and a process
    starting beside running writers would wait on them, and they on it (a
    deadlock, seen in the mixed run).
    """
    present = conn.execute(SCHEMA_PRESENT).fetchone()
    assert present is not None  # a count answers one row
    if present[0] == len(TRIGGERS):
        return
    with conn.transaction():
        # one process creates it at a time (CREATE ... IF NOT EXISTS is not
        # safe against a concurrent CREATE)
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('memwarden schema'))")
        for statement in SCHEMA:
            conn.execute(statement)


class PlannerStatistics:
    """When a writer analyses the store: after it appended 50,000 events,
    or once the log has doubled since the last time (1,000 events at least).

    As autovacuum would within a minute, where it runs (this machine's
    server has it off). Until then the planner takes grown tables for small
    ones, and worse, each connection keeps the generic plan it made of a
    prepared statement at its sixth run: made on a fresh store, that plan
    scans whole tables ever after (a save grew slower over a new store's
    first thousands; an ANALYZE makes every connection plan again). A page
    of rows read by seq (the audit after an import) sorted the whole range
    on disk instead of walking the key, and
    the agent query joined each text on its tenant alone. Every table of
    the store: the view's and the texts' grow with the log. Doubling keeps
    the cost per event bounded.
    """

    def __init__(self) -> None:
        self._unanalyzed = 0  # events this process appended since it last analysed the store
        self._analyzed_at: int | None = None  # the log's length then (or at this process's first write)

    def after_append(self, conn: psycopg.Connection, before: int, after: int) -> None:
        """A commit took the log from ``before`` to ``after`` events."""
        if self._analyzed_at is None:
            self._analyzed_at = before
        self._unanalyzed += after - before
        grown = after >= max(2 * self._analyzed_at, self._analyzed_at + _ANALYZE_FIRST)
        if self._unanalyzed >= _ANALYZE_AFTER or grown:
            self._unanalyzed, self._analyzed_at = 0, after
            # the store's own tables: a bare ANALYZE also samples the ~60
            # system catalogs, most of its cost on a small store
            tables = [row[0] for row in conn.execute(_OWN_TABLES)]
            conn.execute(SQL("ANALYZE {}").format(SQL(", ").join(map(Identifier, tables))))
