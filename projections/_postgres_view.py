"""The PostgreSQL store's view: ``SQLView``'s questions, with the text index
of ``_postgres_usable`` (a ``tsvector`` per memory, matched by a
``tsquery`` of prefixes) and stored texts read as ``bytea``."""

from __future__ import annotations

from collections.abc import Sequence

from memwarden.events import PostgresTextStore

from ._graph import LATERAL_STEP
from ._postgres_usable import search_query
from ._sql_view import SQLView


class PostgresView(SQLView):
    """The usable view as one PostgreSQL connection sees it."""

    SUMMARY = PostgresTextStore.SUMMARY
    TEXTS = f"{PostgresTextStore.SUMMARY}, {PostgresTextStore.CONTENT}"
    MATCHING = "SELECT mid FROM memories_search WHERE doc @@ CAST(? AS tsquery)"
    GRAPH_STEP = LATERAL_STEP

    def match_query(self, words: Sequence[str]) -> str:
        return search_query(words)

    def purge_text_index(self) -> bool:
        # a deleted row's words stay in the table's pages until the store's
        # purge rewrites them, after the erasure commits (after_erasure)
        return False
