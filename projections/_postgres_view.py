"""The PostgreSQL store's view: ``SQLView``'s questions, with the text index
of ``_postgres_usable`` (a ``tsvector`` per memory, matched by a
``tsquery`` of prefixes) and stored texts read as ``bytea``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memwarden.events import PostgresTextStore

from ._graph import LATERAL_STEP
from ._postgres_usable import search_query
from ._rows import POLICIES, Connection
from ._runner import TRACKED, Projector
from ._sql_view import SQLView

# what every read of the view asks first, read in the round trip that opens
# its snapshot (``PostgresEventLog.opened_snapshot``)
OPENING = (TRACKED, POLICIES)


class PostgresView(SQLView):
    """The usable view as one PostgreSQL connection sees it."""

    SUMMARY = PostgresTextStore.SUMMARY
    TEXTS = f"{PostgresTextStore.SUMMARY}, {PostgresTextStore.CONTENT}"
    MATCHING = "SELECT mid FROM memories_search WHERE doc @@ CAST(? AS tsquery)"
    GRAPH_STEP = LATERAL_STEP

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

    def match_query(self, words: Sequence[str]) -> str:
        return search_query(words)

    def purge_text_index(self) -> bool:
        # a deleted row's words stay in the table's pages until the store's
        # purge rewrites them, after the erasure commits (after_erasure)
        return False
