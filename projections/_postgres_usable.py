"""The usable view's tables in PostgreSQL, kept by the same fold as SQLite's.

What each event does is ``UsableProjection.apply`` (the fold, the
revocation's UPDATE, the policies), shared; this module gives PostgreSQL's
tables, its set form of a batch of invalidations, and its text index. Text
columns compare and sort byte by byte (``COLLATE "C"``), as SQLite's do,
whatever the database's own collation: a listing is in the same order on
both backends.

The text index is a ``tsvector`` per memory, written from the same words
SQLite's FTS5 (``unicode61 remove_diacritics 2``) finds: runs of letters and
digits, lower-cased, without diacritics (``search_tokens``). Both the
vector and the query are given to PostgreSQL as literals, so its own parser
never splits a word differently, and a search matches the same memories on
both backends. Each word is behind its tenant's mark, as in SQLite's index
(``_fts_keys``): a search reads its own tenant's GIN entries only, never
the posting lists of another tenant's words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from typing import Any

from memwarden.events import RecordedEvent
from memwarden.events.postgres import no_statistics

from ._content_tests import JSONB_FUNCTION
from ._fold import STATUSES
from ._fts_documents import index_changes
from ._fts_keys import MARK_CHARS, make_key, tenant_mark, text_index_key
from ._rows import Connection, Key
from ._runner import Backlog, Projection, Projector
from ._stats import StatsProjection
from ._tokens import search_tokens
from ._usable import UsableProjection
from ._usable_schema import CARRIED, DERIVATIONS_EVER, RECHECK, SCOPE_KEY

C_TEXT = 'text COLLATE "C"'

SCHEMA = (
    f"""CREATE TABLE IF NOT EXISTS memories (
        mid bigint NOT NULL UNIQUE,
        memory_id {C_TEXT} NOT NULL,
        version bigint NOT NULL, kind {C_TEXT} NOT NULL,
        status {C_TEXT} NOT NULL CHECK (status IN ({",".join(repr(s) for s in STATUSES)})),
        reason {C_TEXT},
        tenant {C_TEXT} NOT NULL, project {C_TEXT}, permission {C_TEXT}, "user" {C_TEXT}, agent {C_TEXT},
        tool {C_TEXT}, tool_version {C_TEXT}, input_hash {C_TEXT},
        source_url {C_TEXT} NOT NULL, source {C_TEXT}, repo {C_TEXT}, branch {C_TEXT},
        fetched_at {C_TEXT} NOT NULL, expires_at {C_TEXT}, verified_at {C_TEXT},
        policy {C_TEXT} NOT NULL, revocation_version {C_TEXT} NOT NULL,
        checksum {C_TEXT} NOT NULL, content_length bigint NOT NULL,
        invalidation_reason {C_TEXT}, invalidated_by bigint, revoked_by {C_TEXT},
        revoked_until {C_TEXT}, last_revocation {C_TEXT}, quarantined_from {C_TEXT},
        derived_from {C_TEXT} NOT NULL DEFAULT '[]',
        first_seq bigint NOT NULL, last_seq bigint NOT NULL,
        PRIMARY KEY (tenant, memory_id)
    )""",
    f"""CREATE TABLE IF NOT EXISTS revocations (
        revocation_id {C_TEXT} PRIMARY KEY, seq bigint NOT NULL, selector {C_TEXT} NOT NULL,
        reason {C_TEXT} NOT NULL, issued_by {C_TEXT} NOT NULL, effective_at {C_TEXT} NOT NULL,
        recorded_at {C_TEXT} NOT NULL, covered bigint NOT NULL,
        readback_status {C_TEXT}, readback_seq bigint, readback_latency_ms double precision,
        still_visible bigint, leaked_ids {C_TEXT}
    )""",
    f"""CREATE TABLE IF NOT EXISTS policies (
        policy {C_TEXT} PRIMARY KEY, version {C_TEXT} NOT NULL, previous_version {C_TEXT} NOT NULL,
        changed_at {C_TEXT} NOT NULL, seq bigint NOT NULL
    )""",
    f"""CREATE TABLE IF NOT EXISTS retired_versions (
        policy {C_TEXT} NOT NULL, version {C_TEXT} NOT NULL, retired_seq bigint NOT NULL,
        PRIMARY KEY (policy, version)
    )""",
    f"""CREATE TABLE IF NOT EXISTS derivations (
        tenant {C_TEXT} NOT NULL, child_id {C_TEXT} NOT NULL, parent_id {C_TEXT} NOT NULL,
        parent_version bigint NOT NULL,
        PRIMARY KEY (tenant, child_id, parent_id)
    )""",
    "CREATE TABLE IF NOT EXISTS memories_search (mid bigint PRIMARY KEY, doc tsvector NOT NULL)",
    # the key of the index's words (``_fts_keys``): a new index, a new key
    "CREATE TABLE IF NOT EXISTS text_index_key (id bigint PRIMARY KEY CHECK (id = 1), secret bytea NOT NULL)",
    # the words of the texts and the checksums never reach the planner's samples
    no_statistics("memories_search", ("doc",)),
    no_statistics("memories", ("checksum",)),
    DERIVATIONS_EVER.format(text=C_TEXT, rowid=""),
    # the agent query's content tests read the stored text as jsonb through it
    JSONB_FUNCTION,
)


_QUOTED_CARRIED = ", ".join(f'"{c}"' for c in CARRIED)

INDEXES = (
    # the agent query: a tenant's usable memories, newest first
    "CREATE INDEX IF NOT EXISTS memories_usable_by_tenant ON memories (tenant, last_seq) WHERE status = 'usable'",
    # Covering, as on SQLite (``_usable_schema``): the query for a project
    # reads neighbouring index entries (an index-only scan, on the pages
    # vacuum has marked all-visible) instead of one table page per memory,
    # for a wider entry per usable memory.
    f"CREATE INDEX IF NOT EXISTS memories_usable_view ON memories ({', '.join(SCOPE_KEY)}) "
    f"INCLUDE ({_QUOTED_CARRIED}) WHERE status = 'usable'",
    "CREATE INDEX IF NOT EXISTS memories_by_tenant ON memories (tenant, last_seq)",
    'CREATE INDEX IF NOT EXISTS memories_by_user ON memories ("user") WHERE "user" IS NOT NULL',
    "CREATE INDEX IF NOT EXISTS memories_by_agent ON memories (agent) WHERE agent IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS memories_by_id ON memories (memory_id)",
    "CREATE INDEX IF NOT EXISTS memories_by_expiry ON memories (expires_at) WHERE expires_at IS NOT NULL",
    f"CREATE INDEX IF NOT EXISTS memories_to_reverify ON memories (status) WHERE {RECHECK}",
    "CREATE INDEX IF NOT EXISTS memories_by_policy ON memories (policy, revocation_version)",
    "CREATE INDEX IF NOT EXISTS derivations_by_parent ON derivations (tenant, parent_id)",
    # the state every save's revocation check asks first (_revocation_cache)
    "CREATE INDEX IF NOT EXISTS revocations_by_seq ON revocations (seq)",
    "CREATE INDEX IF NOT EXISTS memories_search_words ON memories_search USING gin (doc)",
)

# indexes an older version made and this one no more reads: dropped (by
# ``PostgresStore``, concurrently) once what replaces them is valid
RETIRED_INDEXES = ("memories_usable_by_project",)  # not covering

_CREATE = re.compile(r"CREATE INDEX IF NOT EXISTS (\w+) ON (\w+) ")


def index_names(statement: str) -> tuple[str, str]:
    """(index, table) of one of ``INDEXES``."""
    found = _CREATE.match(statement)
    assert found is not None, statement
    return found[1], found[2]


def concurrently(statement: str) -> str:
    """One of ``INDEXES`` as a build that lets writes go on beside it."""
    return statement.replace("CREATE INDEX IF NOT EXISTS", "CREATE INDEX CONCURRENTLY IF NOT EXISTS", 1)


TABLES = (
    "text_index_key",
    "memories_search",
    "derivations_ever",
    "derivations",
    "retired_versions",
    "policies",
    "revocations",
    "memories",
)

# -- the words of a text, as SQLite's FTS5 finds them --------------------------

# tsvector positions stop at 16383 and a vector at 1 MB: a longer text is
# searchable by its first words (FTS5 indexes all of it)
_MAX_POSITION = 16383
_MAX_VECTOR = 1_000_000


_MAX_LEXEME = 2047  # bytes: PostgreSQL refuses a longer word in a tsvector or a tsquery


# in a query, where its tenant's mark goes: never in a token (letters and
# digits only), replaced by the mark in SQL (KEYED_QUERY)
MARK = "#"
# a query's tsquery: ``search_query(words, MARK)`` with each of the tenants'
# marks (every tenant's, given NULL), computed as ``tenant_mark`` does, in
# the statement that reads the index, so in its snapshot (a rebuild makes a
# new key); no tenant makes NULL, which matches nothing
KEYED_QUERY = (
    "CAST((SELECT string_agg('(' || replace(CAST(? AS text), '#', "
    f"substr(encode(sha256(k.secret || convert_to(u.t, 'UTF8')), 'hex'), 1, {MARK_CHARS})) || ')', ' | ') "
    "FROM text_index_key k, unnest(coalesce(CAST(? AS text[]), "
    "ARRAY(SELECT DISTINCT tenant FROM memories))) AS u(t)) AS tsquery)"
)


def _clipped(token: str, mark: str = "") -> str:
    """A token as the index keeps it, behind ``mark``: its first 2,047
    bytes (whole characters), a tenant's mark's room kept whatever the
    mark. A longer word is still found by its beginning, as a prefix, where
    PostgreSQL would refuse the text that holds it."""
    room = _MAX_LEXEME - (MARK_CHARS if mark else 0)
    raw = token.encode("utf-8")
    return mark + (token if len(raw) <= room else raw[:room].decode("utf-8", "ignore"))


def _lexeme(token: str, mark: str = "") -> str:
    # tokens hold letters and digits only: nothing to escape inside quotes
    return f"'{_clipped(token, mark)}'"


def search_vector(summary: str | None, content: str | None, mark: str = "") -> str:
    """A ``tsvector`` literal of a version's summary and content, each word
    behind ``mark``. Their positions are a word apart, so a phrase never
    runs from one into the other (as in FTS5, whose columns are separate)."""
    positions: dict[str, list[int]] = {}
    at = 0
    size = 0
    for part in (summary, content):
        at += 1
        for word in search_tokens(part or ""):
            at += 1
            token = _clipped(word, mark)
            spots = positions.get(token)
            if spots is None:
                size += len(token.encode("utf-8")) + 8
                if size > _MAX_VECTOR:
                    break
                positions[token] = spots = []
            if len(spots) < 256:  # a vector keeps at most 256 positions a word
                spots.append(min(at, _MAX_POSITION))
    return " ".join(f"{_lexeme(t)}:{','.join(map(str, sorted(set(p))))}" for t, p in positions.items())


def search_query(words: Sequence[str], mark: str = "") -> str:
    """A ``tsquery`` literal: every word a prefix, behind ``mark``, a word
    of several tokens (``foo-bar``) a phrase whose last token is the
    prefix, as FTS5 reads ``"foo-bar"*``. A word with no letters or digits
    is left out; with none left, the query matches nothing (``_`` is never
    a token)."""
    phrases = []
    for word in words:
        tokens = search_tokens(word)
        if tokens:
            lexemes = [_lexeme(token, mark) for token in tokens]
            phrases.append(" <-> ".join([*lexemes[:-1], f"{lexemes[-1]}:*"]))
    return " & ".join(phrases) or "'_'"


def stored_texts(conn: Connection, tenant: str, memory_id: str, version: int) -> tuple[str | None, str | None] | None:
    """A version's texts from the text store in the same database."""
    row = conn.execute(
        "SELECT convert_from(summary, 'UTF8'), content FROM texts WHERE tenant = ? AND memory_id = ? AND version = ?",
        (tenant, memory_id, version),
    ).fetchone()
    if row is None:
        return None
    return row[0], _utf8(row[1])


def _utf8(data: bytes | None) -> str | None:
    """Stored content as text; bytes that are not UTF-8 (a damaged row) index nothing."""
    try:
        return None if data is None else bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return None


class PostgresUsableProjection(UsableProjection):
    """Projection ``usable`` in PostgreSQL."""

    INDEXED = "SELECT m.tenant, m.memory_id FROM memories_search f JOIN memories m ON m.mid = f.mid"

    def __init__(self) -> None:
        super().__init__(text_source=stored_texts)

    def outdated(self, conn: Connection) -> bool:
        """Whether the memories table is of an older layout (before each
        memory kept its revocation horizon): dropped and folded again."""
        found = conn.execute(
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'memories' AND column_name IN ('memory_id', 'revoked_until')"
        ).fetchone()[0]
        return found == 1

    def create(self, conn: Connection, *, indexes: bool = True) -> None:
        # a text index of before its words were keyed by tenant (_fts_keys)
        unkeyed = conn.execute(
            "SELECT to_regclass('memories_search') IS NOT NULL AND to_regclass('text_index_key') IS NULL"
        ).fetchone()[0]
        for statement in SCHEMA:
            conn.execute(statement)
        make_key(conn, next(s for s in SCHEMA if "text_index_key" in s))
        if unkeyed:
            # written again whole, every word keyed; TRUNCATE leaves no page
            # of the old words behind
            conn.execute("TRUNCATE memories_search")
            self._fill(conn)
        if indexes:
            self.create_indexes(conn)

    def create_indexes(self, conn: Connection) -> None:
        # only the missing ones: CREATE INDEX takes its table's SHARE lock
        # before it finds the name taken, and would wait, head lock held,
        # for another process's concurrent build (PostgresStore._build_indexes)
        names = [index_names(statement)[0] for statement in INDEXES]
        missing = {
            index
            for (index,) in conn.execute(
                "SELECT i FROM unnest(CAST(? AS text[])) AS u(i) WHERE to_regclass(i) IS NULL", (names,)
            ).fetchall()
        }
        for index, statement in zip(names, INDEXES, strict=True):
            if index in missing:
                conn.execute(statement)

    def drop(self, conn: Connection) -> None:
        for table in TABLES:
            conn.execute(f"DROP TABLE IF EXISTS {table}")

    def _run(self, conn: Connection, run: list[tuple[Any, ...]], update: Callable[[str], str]) -> None:
        why, seq, memory_id, version, tenant = (list(column) for column in zip(*run, strict=True))
        conn.execute(
            "WITH j AS (SELECT * FROM unnest(?::text[], ?::bigint[], ?::text[], ?::bigint[], ?::text[]) "
            f"AS u(why, seq, memory_id, version, tenant)) {update('j')}",
            (why, seq, memory_id, version, tenant),
        )

    def _unindex(self, conn: Connection, fts: list[tuple[Key, str]], stored: dict[Key, dict[str, Any] | None]) -> None:
        """Its index keeps its own words (``_index`` replaces them)."""

    def _index(
        self,
        conn: Connection,
        fts: list[tuple[Key, str]],
        pending: dict[Key, dict[str, Any] | None],
        stored: dict[Key, dict[str, Any] | None],
    ) -> None:
        """The batch's text index rows in three statements, whatever its
        size (one statement per memory made a save of 5,000 cost 15,000
        round trips): drop each named memory's document (a new one has
        none: a round trip less), read the texts of those the batch leaves
        indexed, write their documents."""
        last, held = index_changes(fts, stored)
        if not last:
            return
        if held:
            tenants, ids = (list(column) for column in zip(*held, strict=True))
            conn.execute(
                "DELETE FROM memories_search f USING memories m, unnest(?::text[], ?::text[]) AS k(tenant, memory_id) "
                "WHERE f.mid = m.mid AND m.tenant = k.tenant AND m.memory_id = k.memory_id",
                (tenants, ids),
            )
        indexed = [
            (key, row["version"])
            for key, action in last.items()
            if action == "index" and (row := pending[key]) is not None and row["status"] != "erased"
        ]
        if not indexed:
            return
        key = text_index_key(conn)
        rows = conn.execute(
            "SELECT k.tenant, k.memory_id, convert_from(t.summary, 'UTF8'), t.content "
            "FROM unnest(?::text[], ?::text[], ?::bigint[]) AS k(tenant, memory_id, version) "
            "LEFT JOIN texts t ON t.tenant = k.tenant AND t.memory_id = k.memory_id AND t.version = k.version",
            ([k[0] for k, _ in indexed], [k[1] for k, _ in indexed], [v for _, v in indexed]),
        ).fetchall()
        marks = {tenant: tenant_mark(key, tenant) for tenant, *_ in rows}
        documents = [
            (tenant, memory_id, search_vector(summary, _utf8(content), marks[tenant]))
            for tenant, memory_id, summary, content in rows
        ]
        conn.execute(
            "INSERT INTO memories_search (mid, doc) SELECT m.mid, CAST(k.doc AS tsvector) "
            "FROM unnest(?::text[], ?::text[], ?::text[]) AS k(tenant, memory_id, doc) "
            "JOIN memories m ON m.tenant = k.tenant AND m.memory_id = k.memory_id",
            tuple(list(column) for column in zip(*documents, strict=True)),
        )

    def finish_bulk(self, conn: Connection) -> None:
        self.create_indexes(conn)
        conn.execute("DELETE FROM memories_search")
        self._fill(conn)

    def _fill(self, conn: Connection) -> None:
        """Every memory's document written, from the view and the text store."""
        key = text_index_key(conn)
        marks: dict[str, str] = {}
        raw = conn.raw  # type: ignore[attr-defined]  # COPY needs psycopg's own cursor
        # a page of texts at a time, then its COPY: one connection cannot
        # read a cursor while a COPY is under way
        with raw.cursor(name="memwarden_index_texts") as rows, raw.cursor() as out:
            rows.execute(
                "SELECT m.mid, m.tenant, convert_from(t.summary, 'UTF8'), t.content FROM memories m "
                "LEFT JOIN texts t ON t.tenant = m.tenant AND t.memory_id = m.memory_id AND t.version = m.version "
                "WHERE m.status <> 'erased' ORDER BY m.mid"
            )
            while page := rows.fetchmany(2000):
                with out.copy("COPY memories_search (mid, doc) FROM STDIN") as copy:
                    for mid, tenant, summary, content in page:
                        mark = marks.get(tenant) or marks.setdefault(tenant, tenant_mark(key, tenant))
                        copy.write_row((mid, search_vector(summary, _decoded(content), mark)))


def _decoded(data: bytes | None) -> str | None:
    try:
        return None if data is None else bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return None


class PostgresStatsProjection(StatsProjection):
    """Projection ``stats`` in PostgreSQL."""

    def create(self, conn: Connection, *, indexes: bool = True) -> None:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS stats (week {C_TEXT} NOT NULL, counter {C_TEXT} NOT NULL, "
            "count bigint NOT NULL, PRIMARY KEY (week, counter))"
        )


class PostgresProjector(Projector):
    """The projector of the PostgreSQL store: its tables, no SQLite settings."""

    def __init__(self, backlog: Backlog, projections: Sequence[Projection] | None = None) -> None:
        super().__init__(
            projections if projections is not None else [PostgresUsableProjection(), PostgresStatsProjection()],
            backlog=backlog,
        )

    def create_tracking(self, conn: Connection) -> None:
        conn.execute(f"CREATE TABLE IF NOT EXISTS projection_tracking (name {C_TEXT} PRIMARY KEY, seq bigint NOT NULL)")

    def bulk(self, conn: Connection) -> nullcontext[None]:
        return nullcontext()

    def dropping(self, conn: Connection) -> nullcontext[None]:
        return nullcontext()


def events_after(read: Callable[..., Iterator[RecordedEvent]]) -> Backlog:
    """The backlog of a log whose reads run on the projection's own connection."""
    return lambda _conn, after, until: read(after_seq=after, until_seq=until)
