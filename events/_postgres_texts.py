"""The text store in PostgreSQL: the texts table and its erasure marks,
through the same ``TextStore`` the SQLite backend uses."""

from __future__ import annotations

import json

import psycopg

from ._errors import StoreFailed
from ._postgres_driver import QmarkConnection, no_statistics, postgres_failure
from ._texts import ERASED_TEXT, TextStore
from ._translated import translated


@translated
class PostgresTextStore(TextStore):
    """Each memory version's summary and content as ``bytea``: UTF-8 bytes
    as they were hashed. An erasure deletes the rows; the store's purge
    (``VACUUM FULL`` after it commits) rewrites the table files without
    them (README, "Erasure on PostgreSQL")."""

    # keyed in the view's collation ("C"): a join from memories walks this key
    SCHEMA = (
        """CREATE TABLE IF NOT EXISTS texts (
            tenant text COLLATE "C" NOT NULL, memory_id text COLLATE "C" NOT NULL, version bigint NOT NULL,
            summary bytea, content bytea,
            PRIMARY KEY (tenant, memory_id, version)
        )""",
        """CREATE TABLE IF NOT EXISTS erased_texts (
            tenant text COLLATE "C" NOT NULL, memory_id text COLLATE "C" NOT NULL, through_version bigint NOT NULL,
            PRIMARY KEY (tenant, memory_id)
        )""",
        # DDL only where it is missing: a process opening a store whose
        # schema exists takes no lock a running writer holds
        f"""DO $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'texts_erased' AND NOT tgisinternal) THEN
            CREATE FUNCTION memwarden_refuse_erased_text() RETURNS trigger LANGUAGE plpgsql AS $f$
            BEGIN
                IF EXISTS (SELECT 1 FROM erased_texts e WHERE e.tenant = NEW.tenant AND e.memory_id = NEW.memory_id
                           AND NEW.version <= e.through_version) THEN
                    RAISE EXCEPTION '{ERASED_TEXT}' USING ERRCODE = 'integrity_constraint_violation',
                        DETAIL = json_build_array(NEW.tenant, NEW.memory_id, NEW.version)::text;
                END IF;
                RETURN NEW;
            END $f$;
            CREATE TRIGGER texts_erased BEFORE INSERT OR UPDATE ON texts
                FOR EACH ROW EXECUTE FUNCTION memwarden_refuse_erased_text();
        END IF;
        END $$""",
        no_statistics("texts", ("summary", "content")),
        """CREATE TABLE IF NOT EXISTS vectors (
            tenant text COLLATE "C" NOT NULL, memory_id text COLLATE "C" NOT NULL, version bigint NOT NULL,
            embedder text NOT NULL, dims integer NOT NULL, vector bytea NOT NULL,
            PRIMARY KEY (tenant, memory_id, version)
        )""",
        # the same refusal as the texts': a vector of an erased version never returns
        """DO $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'vectors_erased' AND NOT tgisinternal) THEN
            CREATE TRIGGER vectors_erased BEFORE INSERT OR UPDATE ON vectors
                FOR EACH ROW EXECUTE FUNCTION memwarden_refuse_erased_text();
        END IF;
        END $$""",
        no_statistics("vectors", ("vector",)),
    )
    CONTENT = "t.content"
    SUMMARY = "convert_from(t.summary, 'UTF8')"
    SUMMARY_BYTES = "t.summary"

    def __init__(self, conn: psycopg.Connection, *, where: str | None = None) -> None:
        super().__init__(QmarkConnection(conn), where=where)

    def rebind(self, conn: psycopg.Connection) -> None:
        """Use ``conn``, the log's write connection opened again after a loss."""
        self.conn = QmarkConnection(conn)

    def _driver_error(self, exc: Exception, operation: str) -> StoreFailed | None:
        return postgres_failure(exc, self.__dict__.get("where"), f"texts.{operation}")

    def _first_erased(self, versions: list[tuple[str, str, int]], exc: Exception) -> tuple[str, str, int]:
        # the failed statement aborted the transaction: the trigger names its row
        try:
            tenant, memory_id, version = json.loads(exc.diag.message_detail or "")  # type: ignore[attr-defined]
            return str(tenant), str(memory_id), int(version)
        except (AttributeError, TypeError, ValueError):
            return versions[0]
