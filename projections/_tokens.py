"""The words of a text as the text index finds them (SQLite's FTS5
``unicode61 remove_diacritics 2``; PostgreSQL's vector is written from the
same words): one tokenizer for indexing, searching and the read-back's
sample, so no word one of them finds can break another."""

from __future__ import annotations

import re
import unicodedata

_TOKEN = re.compile(r"[^\W_]+")

# ASCII and Hangul syllables only: no diacritic to remove. A syllable's
# canonical decomposition is conjoining jamo, none of them a combining mark,
# and composing them again gives the syllable back, so the NFD, the filter
# and the NFC below would return such a text unchanged, at a cost each save's
# indexing would pay
_NO_DIACRITICS = re.compile(r"[\x00-\x7f\uac00-\ud7a3]*")


def search_tokens(text: str) -> list[str]:
    """The searchable words of ``text``: runs of letters and digits,
    lower-cased, with diacritics removed (café is cafe) and Hangul whole."""
    folded = text.lower()
    if not _NO_DIACRITICS.fullmatch(folded):
        bare = "".join(c for c in unicodedata.normalize("NFD", folded) if not unicodedata.combining(c))
        folded = unicodedata.normalize("NFC", bare)
    return _TOKEN.findall(folded)
