"""memwarden.projections: the read models built only from events, and the
store the engine reaches them through.

``Store`` (``_port``) is the port: what the engine asks of storage, in its
own words, its rows named (``_named``); ``open_store`` (``_open``) opens the
backend a URL names, so the port imports none. ``SQLiteStore`` (``_sqlite_store``) is the embedded backend,
``PostgresStore`` (``_postgres_store``, imported when a URL names it) the
shared one; every question either answers, the agent query's SQL among
them, is a method of ``SQLView`` (``_sql_view``), each backend's view
spelling what its SQL says its own way. The fold (``_fold``), the selectors
(``_selector``) and the counters are shared by every backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memwarden.events import lazy_exports

# what type checkers and the docs read; each name is imported when first
# asked for (``lazy_exports``): importing the package costs next to nothing
if TYPE_CHECKING:
    from ._access import Access
    from ._agent_page import AgentPage, AgentQuery
    from ._asof import PointView, story
    from ._content_tests import ContentTest
    from ._errors import AppendRefused, ProjectionDamaged
    from ._fold import (
        COLUMNS,
        SCOPE_COLUMNS,
        SETTLED,
        STATUSES,
        TERMINAL,
        TERMINAL_SQL,
        fetched_at,
        fold_memory,
        revoke_row,
    )
    from ._fts_documents import stored_texts
    from ._named import (
        Child,
        DueRow,
        EmbeddingCount,
        Expiring,
        StaleVector,
        VectorRow,
        ViewRow,
    )
    from ._open import UnknownBackend, open_store, sqlite_options, sqlite_path
    from ._port import Evidence, SideReader, Store, Texts, VectorReader, ViewReader, ViewWriter, Write
    from ._reads import (
        Backoff,
        CheckedUnder,
        CoveredRow,
        Covering,
        KeyRow,
        Kin,
        LineageQuery,
        PolicyRow,
        RevocationQuery,
        RevocationRow,
        RevokedBy,
        Selected,
        TakenAt,
        TextRow,
        WeekRow,
        depth_of,
        row_of,
    )
    from ._rows import VIEW_COLUMNS, Key, MemoryRow, parent_refs
    from ._runner import CheckResult, Projection, Projector, default_projections
    from ._selector import (
        COVERED_SQL,
        Revocation,
        blocking_revocation,
        revocation_blocks,
        revokes,
        selector_covers,
        selector_sql,
    )
    from ._sql_outbox import Outbox
    from ._sql_view import SQLView
    from ._sqlite_store import SQLiteStore, copy_store_file, private_view
    from ._sqlite_view import SQLiteView
    from ._stats import COUNTERS, StatsProjection
    from ._text_index import purge_text_index, text_index_levels
    from ._tokens import search_tokens
    from ._usable import UsableProjection
    from ._usable_schema import RECHECK
    from ._vector_index import IndexSettings, VectorIndex
    from ._wanted import Wanted
    from ._write import LogWrite

__getattr__ = lazy_exports(__name__, __file__)

__all__ = [
    "COLUMNS",
    "COUNTERS",
    "COVERED_SQL",
    "RECHECK",
    "SCOPE_COLUMNS",
    "SETTLED",
    "STATUSES",
    "TERMINAL",
    "TERMINAL_SQL",
    "VIEW_COLUMNS",
    "Access",
    "AgentPage",
    "AgentQuery",
    "AppendRefused",
    "Backoff",
    "CheckResult",
    "CheckedUnder",
    "Child",
    "ContentTest",
    "CoveredRow",
    "Covering",
    "DueRow",
    "EmbeddingCount",
    "Evidence",
    "Expiring",
    "IndexSettings",
    "Key",
    "KeyRow",
    "Kin",
    "LineageQuery",
    "LogWrite",
    "MemoryRow",
    "Outbox",
    "PointView",
    "PolicyRow",
    "Projection",
    "ProjectionDamaged",
    "Projector",
    "Revocation",
    "RevocationQuery",
    "RevocationRow",
    "RevokedBy",
    "SQLView",
    "SQLiteStore",
    "SQLiteView",
    "Selected",
    "SideReader",
    "StaleVector",
    "StatsProjection",
    "Store",
    "TakenAt",
    "TextRow",
    "Texts",
    "UnknownBackend",
    "UsableProjection",
    "VectorIndex",
    "VectorReader",
    "VectorRow",
    "ViewReader",
    "ViewRow",
    "ViewWriter",
    "Wanted",
    "WeekRow",
    "Write",
    "blocking_revocation",
    "copy_store_file",
    "default_projections",
    "depth_of",
    "fetched_at",
    "fold_memory",
    "open_store",
    "parent_refs",
    "private_view",
    "purge_text_index",
    "revocation_blocks",
    "revoke_row",
    "revokes",
    "row_of",
    "search_tokens",
    "selector_covers",
    "selector_sql",
    "sqlite_options",
    "sqlite_path",
    "stored_texts",
    "story",
    "text_index_levels",
]
