"""The PostgreSQL store's view: ``SQLView``'s questions, with the text index
of ``_postgres_usable`` (a ``tsvector`` per memory, matched by a
``tsquery`` of prefixes) and stored texts read as ``bytea``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memwarden.events import PostgresTextStore

from ._agent_page import AgentPage, AgentQuery
from ._content_tests import ContentTest, postgres_terms
from ._graph import LATERAL_STEP
from ._named import ViewRow
from ._postgres_usable import KEYED_QUERY, MARK, search_query
from ._rows import POLICIES, Connection
from ._runner import TRACKED, Projector
from ._sql_view import SQLView

# what every read of the view asks first, read in the round trip that opens
# its snapshot (``PostgresEventLog.opened_snapshot``)
OPENING = (TRACKED, POLICIES)
# OPENING's answers as arrays of pairs beside a page of the agent query, so
# the three are read in one statement, and so in one snapshot
# (``agent_page_at_once``); a LEFT JOIN, so an empty page still brings them
_PAGE_AT_ONCE = (
    "SELECT ARRAY(SELECT ARRAY[name, CAST(seq AS text)] FROM projection_tracking), "
    "ARRAY(SELECT ARRAY[policy, version] FROM policies), page.* FROM (SELECT 1) AS one LEFT JOIN ("
)
_PAGE_AT_ONCE_END = ") AS page ON TRUE ORDER BY page.last_seq DESC"
_OPENED = 2  # the arrays before a page's columns


class PostgresView(SQLView):
    """The usable view as one PostgreSQL connection sees it."""

    SUMMARY = PostgresTextStore.SUMMARY
    TEXTS = f"{PostgresTextStore.SUMMARY}, {PostgresTextStore.CONTENT}"
    MATCHING = f"SELECT mid FROM memories_search WHERE doc @@ {KEYED_QUERY}"
    GRAPH_STEP = LATERAL_STEP
    # a notice another node is taking is skipped, never waited for
    ROW_LOCK = " FOR UPDATE SKIP LOCKED"

    def __init__(
        self, conn: Connection, projector: Projector, opened: Sequence[list[tuple[Any, ...]]] | None = None
    ) -> None:
        """``opened``: the rows of ``OPENING``'s statements, read in this
        snapshot as it opened (None: read them when asked)."""
        super().__init__(conn, projector)
        self._opened = opened

    def position(self) -> int:
        if self._opened is None:
            return super().position()
        return self._projector.position_of(self._opened[0])

    def policies(self) -> dict[str, str]:
        if self._opened is None:
            return super().policies()
        return dict(self._opened[1])

    def agent_page_at_once(self, query: AgentQuery) -> AgentPage:
        """A page of the agent query with the view's position and policies,
        in one statement on a connection outside any transaction: one round
        trip where a snapshot takes three (BEGIN with the opening, the rows,
        COMMIT). One statement sees one snapshot, so the three agree as
        they do in a snapshot. Its evidence is not read: a page that needs
        it is read again in a snapshot (``PostgresStore.agent_page``)."""
        sql, params = self.agent_query_sql(**query)
        found = self.conn.execute(_PAGE_AT_ONCE + sql + _PAGE_AT_ONCE_END, params).fetchall()
        tracked, policies = found[0][:_OPENED]
        # memory_id is NULL only on the one row of an empty page
        rows = [ViewRow._make(row[_OPENED:]) for row in found if row[_OPENED] is not None]
        position = self._projector.position_of((name, int(seq)) for name, seq in tracked)
        return AgentPage(position, dict(policies), rows, {})

    def match_query(self, words: Sequence[str], tenants: Sequence[str] | None, agent: str | None = None) -> list[Any]:
        # keyed by tenant only, an agent's search too (``_fts_keys``)
        return [search_query(words, MARK), None if tenants is None else list(tenants)]

    def content_terms(self, tests: Sequence[ContentTest]) -> tuple[str, list[Any]]:
        return postgres_terms(tests, "t.content")

    def purge_text_index(self) -> bool:
        # a deleted row's words stay in the table's pages until the store's
        # purge rewrites them, after the erasure commits (after_erasure)
        return False
