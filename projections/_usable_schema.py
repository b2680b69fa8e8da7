"""The usable view's tables and indexes, in SQLite's SQL (PostgreSQL spells
its own in ``_postgres_usable``): what the projection in ``_usable`` writes
and every query of ``_sql_view`` reads."""

from __future__ import annotations

from memwarden.events import CONTENT_BYTES, TEXT_JOIN

from ._fold import STATUSES
from ._fts_keys import FUNCTION
from ._rows import VIEW_COLUMNS

# every memory any version of a memory was drawn from, kept when a later
# version names other evidence: the view as of a past seq finds there what
# was drawn from a memory then (projections/_asof.py)
DERIVATIONS_EVER = """CREATE TABLE IF NOT EXISTS derivations_ever (
    tenant {text} NOT NULL, parent_id {text} NOT NULL, child_id {text} NOT NULL,
    PRIMARY KEY (tenant, parent_id, child_id)
){rowid}"""
# a text index holding its own copy of the keyed texts (see FTS_SOURCE)
FTS_OWN = """CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
        summary, content, tokenize = 'unicode61 remove_diacritics 2'
    )"""

SCHEMA = [
    # Keyed, and so clustered, by (tenant, memory_id), a memory's identity:
    # a revocation of a tenant (or a project in it) rewrites a run of
    # neighbouring pages, not one page per memory. ``mid`` is the stable
    # integer the text index is keyed by. No text here: summaries and
    # contents are in the text store, per version.
    f"""CREATE TABLE IF NOT EXISTS memories (
        mid INTEGER NOT NULL UNIQUE,
        memory_id TEXT NOT NULL,
        version INTEGER NOT NULL, kind TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ({",".join(repr(s) for s in STATUSES)})),
        reason TEXT,
        tenant TEXT NOT NULL, project TEXT, permission TEXT, "user" TEXT, agent TEXT, tool TEXT,
        tool_version TEXT, input_hash TEXT,
        source_url TEXT NOT NULL, source TEXT, repo TEXT, branch TEXT,
        fetched_at TEXT NOT NULL, expires_at TEXT, verified_at TEXT,
        policy TEXT NOT NULL, revocation_version TEXT NOT NULL,
        checksum TEXT NOT NULL, content_length INTEGER NOT NULL,
        invalidation_reason TEXT, invalidated_by INTEGER, revoked_by TEXT,
        revoked_until TEXT, last_revocation TEXT, quarantined_from TEXT,
        derived_from TEXT NOT NULL DEFAULT '[]',
        first_seq INTEGER NOT NULL, last_seq INTEGER NOT NULL,
        PRIMARY KEY (tenant, memory_id)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS revocations (
        revocation_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, selector TEXT NOT NULL,
        reason TEXT NOT NULL, issued_by TEXT NOT NULL, effective_at TEXT NOT NULL,
        recorded_at TEXT NOT NULL, covered INTEGER NOT NULL,
        readback_status TEXT, readback_seq INTEGER, readback_latency_ms REAL,
        still_visible INTEGER, leaked_ids TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS policies (
        policy TEXT PRIMARY KEY, version TEXT NOT NULL, previous_version TEXT NOT NULL,
        changed_at TEXT NOT NULL, seq INTEGER NOT NULL
    )""",
    # every version a policy has left behind: retired for good
    """CREATE TABLE IF NOT EXISTS retired_versions (
        policy TEXT NOT NULL, version TEXT NOT NULL, retired_seq INTEGER NOT NULL,
        PRIMARY KEY (policy, version)
    ) WITHOUT ROWID""",
    # which memories each memory was drawn from (its current version's
    # evidence); a memory's evidence is in its own tenant
    """CREATE TABLE IF NOT EXISTS derivations (
        tenant TEXT NOT NULL, child_id TEXT NOT NULL, parent_id TEXT NOT NULL, parent_version INTEGER NOT NULL,
        PRIMARY KEY (tenant, child_id, parent_id)
    ) WITHOUT ROWID""",
    DERIVATIONS_EVER.format(text="TEXT", rowid=" WITHOUT ROWID"),
    FTS_OWN,
]

# The store's text index holds no text of its own: its documents are read,
# keyed, from the view's row and the text store (one copy of each text, in
# ``texts``). FTS5 reads this view to write a document, to remove one (it
# needs the words it indexed, so a document is dropped before its row or
# its text changes: ``drop_documents``) and to rebuild. Every connection
# that writes the index has the keying function (``keying``). A view built
# apart from a text store (a replay, a check) keeps ``FTS_OWN``: its texts
# come from elsewhere.
FTS_SOURCE = f"""CREATE VIEW IF NOT EXISTS memories_fts_source AS
    SELECT m.mid AS mid, {FUNCTION}(m.tenant, m.agent, CAST(t.summary AS BLOB)) AS summary,
        {FUNCTION}(m.tenant, m.agent, {CONTENT_BYTES}) AS content
    FROM memories m {TEXT_JOIN} WHERE m.status != 'erased'"""
FTS_EXTERNAL = """CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
        summary, content, content = 'memories_fts_source', content_rowid = 'mid',
        tokenize = 'unicode61 remove_diacritics 2'
    )"""

# memories that wait for a re-verification (a partial index's condition).
# Spelled with OR, not IN: SQLite builds an IN list's lookup table each time
# a statement runs, and an UPDATE of status evaluates this for every row it
# writes.
RECHECK = "(status = 'expired' OR status = 'unknown' OR status = 'invalidated')"

# the agent query's key in the covering index of either backend; the index
# carries the view's other columns after it
SCOPE_KEY = ("tenant", "project", "last_seq")
CARRIED = tuple(c for c in VIEW_COLUMNS if c not in SCOPE_KEY)
_VIEW_KEY = ", ".join(f'"{c}"' for c in SCOPE_KEY + CARRIED)

INDEXES = [
    # The agent query reads usable memories only, newest first. Partial
    # indexes hold just those: a memory revoked or invalidated leaves them
    # (one delete) instead of moving within them (a delete and an insert),
    # which is most of the cost of taking 10,000 memories out in one commit.
    "DROP INDEX IF EXISTS memories_by_scope",  # older databases: over every status
    "DROP INDEX IF EXISTS memories_by_tenant",
    "DROP INDEX IF EXISTS memories_usable_by_scope",  # older databases: not covering
    # Covering: it carries every column a view shows, so the query for a
    # scope reads a few neighbouring index pages instead of one table page
    # per memory. A usable memory is
    # stored twice; a view column that changes (a re-verification's times)
    # rewrites its entry.
    f"CREATE INDEX IF NOT EXISTS memories_usable_view ON memories ({_VIEW_KEY}) WHERE status = 'usable'",
    "CREATE INDEX IF NOT EXISTS memories_usable_by_tenant ON memories (tenant, last_seq) WHERE status = 'usable'",
    'CREATE INDEX IF NOT EXISTS memories_by_user ON memories ("user") WHERE "user" IS NOT NULL',
    "CREATE INDEX IF NOT EXISTS memories_by_agent ON memories (agent) WHERE agent IS NOT NULL",
    "DROP INDEX IF EXISTS memories_by_checksum",  # older databases: erasure by shared text
    # a memory named by its id alone (the caller's tenants narrow it)
    "CREATE INDEX IF NOT EXISTS memories_by_id ON memories (memory_id)",
    # Not (status, expires_at): a revocation would move entries scattered by
    # time. On (status) alone the entries follow the table's (tenant,
    # memory_id) order, so one tenant's memories move as a block.
    "CREATE INDEX IF NOT EXISTS memories_by_expiry ON memories (expires_at) WHERE expires_at IS NOT NULL",
    "DROP INDEX IF EXISTS memories_by_status",
    # what `due` lists; a query names RECHECK among its terms to use it
    "DROP INDEX IF EXISTS memories_to_recheck",  # older databases: the condition spelled with IN
    f"CREATE INDEX IF NOT EXISTS memories_to_reverify ON memories (status) WHERE {RECHECK}",
    "CREATE INDEX IF NOT EXISTS memories_by_policy ON memories (policy, revocation_version)",
    "CREATE INDEX IF NOT EXISTS derivations_by_parent ON derivations (tenant, parent_id)",
    # the state every save's revocation check asks first (_revocation_cache)
    "CREATE INDEX IF NOT EXISTS revocations_by_seq ON revocations (seq)",
]


TABLES = (
    "memories",
    "revocations",
    "policies",
    "retired_versions",
    "derivations",
    "derivations_ever",
    "memories_fts",
    "text_index_key",  # the key of the index's words (_fts_keys): a new index, a new key
)
