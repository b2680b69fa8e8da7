"""PostgreSQL's text index finds what SQLite's FTS5 finds: the same words,
each a prefix, a word of several tokens a phrase."""

from __future__ import annotations

import re
import sqlite3
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st
from memwarden.projections._postgres_usable import search_query, search_tokens, search_vector
from memwarden.projections._sqlite_view import fts5_query

DOCUMENT = ("Café 서울에서 본 foo-bar 보고서", "x_y 2026년 ÉTÉ naïve")
SEARCHES = [
    "cafe",
    "서울",
    "서울에",
    "foo-ba",
    "bar",
    "x",
    "y",
    "2026",
    "ete",
    "NAIVE",
    "bar 보고",
    "보고서 x_y",
    "(",
    "zzz",
]


def test_the_tokens_are_fts5_unicode61s() -> None:
    assert search_tokens("Café 서울에서 foo-bar x_y ÉTÉ") == ["cafe", "서울에서", "foo", "bar", "x", "y", "ete"]


def _tokens_the_long_way(text: str) -> list[str]:
    bare = "".join(c for c in unicodedata.normalize("NFD", text.lower()) if not unicodedata.combining(c))
    return re.findall(r"[^\W_]+", unicodedata.normalize("NFC", bare))


@given(
    st.text(
        alphabet=st.one_of(
            st.characters(min_codepoint=0x20, max_codepoint=0x7E),
            st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3),  # Hangul syllables: no diacritics
            st.sampled_from("éÉçñÅ\u0301\u0308\u1100\u1161\u11a8\u3131が\u3099ǅ"),  # marks, jamo, kana
        ),
        max_size=60,
    )
)
def test_the_tokens_of_ascii_and_hangul_skip_no_diacritic(text: str) -> None:
    """ASCII and Hangul syllables skip the diacritics' removal: the tokens
    are those the whole removal gives, for texts with and without them."""
    assert search_tokens(text) == _tokens_the_long_way(text)


def test_a_word_without_letters_matches_nothing() -> None:
    assert search_query(["("]) == "'_'"
    assert search_query(["foo-ba", "("]) == "'foo' <-> 'ba':*"


@pytest.mark.parametrize("word", SEARCHES)
def test_each_search_matches_as_fts5_does(word: str, pg_url: str) -> None:
    import psycopg

    fts = sqlite3.connect(":memory:")
    fts.execute("CREATE VIRTUAL TABLE f USING fts5(summary, content, tokenize = 'unicode61 remove_diacritics 2')")
    fts.execute("INSERT INTO f VALUES (?, ?)", DOCUMENT)
    expected = fts.execute("SELECT count(*) FROM f WHERE f MATCH ?", (fts5_query([word]),)).fetchone()[0]
    with psycopg.connect(pg_url) as conn:
        got = conn.execute(
            "SELECT CAST(%s AS tsvector) @@ CAST(%s AS tsquery)", (search_vector(*DOCUMENT), search_query([word]))
        ).fetchone()[0]
    assert got == bool(expected), word
