"""The audit's SQL spelling of the hash preimage equals the one definition."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st
from memwarden.events import canonical_json
from memwarden.events._canonical import envelope_preimage

_SQL_CONN = sqlite3.connect(":memory:")


@settings(max_examples=300)
@given(
    st.text(min_size=1),
    st.text(min_size=1),
    st.text(min_size=1),
    st.integers(1, 2**62),
    st.integers(1, 2**62),
    st.dictionaries(st.text(), st.text(), max_size=4),
)
def test_sqlite_builds_the_same_preimage(
    event_id: str, stream: str, actor: str, seq: int, stream_version: int, payload: dict
) -> None:
    """The audit's fast path (SQLite concatenates the envelope) is the
    canonical encoding, control characters, quotes and Korean included."""
    from memwarden.events._sqlite_chain import PREIMAGE_SQL

    try:
        payload_json = canonical_json(payload)
        (event_id + stream + actor + payload_json).encode("utf-8")
    except UnicodeEncodeError:
        return  # lone surrogates never reach the log: SQLite text is UTF-8
    prev = "cd" * 32
    values = {
        "seq": seq,
        "event_id": event_id,
        "type": "memory.saved",
        "stream": stream,
        "stream_version": stream_version,
        "occurred_at": "2026-01-05T09:00:00.000000Z",
        "recorded_at": "2026-01-05T09:00:00.000001Z",
        "actor": actor,
        "schema_version": 1,
        "payload": payload_json,
        "prev_hash": prev,
    }
    columns = ", ".join(f":{k} AS {k}" for k in values)
    (got,) = _SQL_CONN.execute(f"SELECT {PREIMAGE_SQL} FROM (SELECT {columns})", values).fetchone()
    expected = prev + envelope_preimage(
        seq=seq,
        event_id=event_id,
        type="memory.saved",
        stream=stream,
        stream_version=stream_version,
        occurred_at=values["occurred_at"],
        recorded_at=values["recorded_at"],
        actor=actor,
        schema_version=1,
        payload_json=payload_json,
        prev_hash=prev,
    )
    assert got == expected
