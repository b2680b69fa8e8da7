"""The SQLite store's view: ``SQLView``'s questions, with what SQLite spells
its own way: the FTS5 text index, stored texts read as whatever type a
hand-edited file holds, and the planner hint that keeps the status index
out of the expiry walks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memwarden.events import SUMMARY_TEXT

from ._content_tests import ContentTest, sqlite_terms
from ._fts_keys import fts5_query as fts5_query  # the words' query, unkeyed (tests compare PostgreSQL's to it)
from ._fts_keys import keyed_query
from ._rows import SQLITE_TEXTS
from ._sql_view import SQLView
from ._text_index import purge_text_index


class SQLiteView(SQLView):
    """The usable view as one SQLite connection sees it."""

    SUMMARY = SUMMARY_TEXT
    TEXTS = SQLITE_TEXTS
    MATCHING = "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?"
    # a unary plus makes a column unusable to SQLite's index choice
    STATUS_UNINDEXED = "+status"
    UNINDEXED = "+{}"

    def match_query(self, words: Sequence[str], tenants: Sequence[str] | None, agent: str | None = None) -> list[Any]:
        return [keyed_query(self.conn, words, tenants, agent)]

    def content_terms(self, tests: Sequence[ContentTest]) -> tuple[str, list[Any]]:
        return sqlite_terms(tests, "t.content")

    def purge_text_index(self) -> bool:
        return purge_text_index(self.conn)
