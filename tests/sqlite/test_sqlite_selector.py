from __future__ import annotations

import sqlite3
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from memwarden.projections import COLUMNS, UsableProjection, selector_covers, selector_sql
from memwarden.projections._rows import row_dict

VALUES = st.sampled_from(["a", "b", "서울"])
ROWS = st.lists(
    st.fixed_dictionaries(
        {
            "tenant": VALUES,
            "project": st.none() | VALUES,
            "permission": st.none() | VALUES,
            "user": st.none() | VALUES,
            "agent": st.none() | VALUES,
            "tool": st.none() | VALUES,
            "kind": VALUES,
            "source_url": st.sampled_from(
                ["https://a.example/x", "https://a.example/y/z", "https://b.example/", "file:///서울"]
            ),
        }
    ),
    min_size=1,
    max_size=12,
)
SELECTORS = st.fixed_dictionaries(
    {},
    optional={
        "tenant": VALUES,
        "project": VALUES,
        "permission": VALUES,
        "user": VALUES,
        "agent": VALUES,
        "tool": VALUES,
        "kind": VALUES,
        "source_prefix": st.sampled_from(["https://a.example/", "https://a.example/y", "file:///서", "x"]),
        "ids": st.lists(st.sampled_from([f"m{i}" for i in range(12)]), min_size=1, max_size=4).map(tuple),
        "everything": st.just(True),
    },
)


@settings(max_examples=300)
@given(ROWS, SELECTORS)
def test_python_and_sql_selectors_agree(rows: list[dict[str, Any]], selector: dict[str, Any]) -> None:
    conn = sqlite3.connect(":memory:")
    UsableProjection().create(conn)
    full = []
    for i, r in enumerate(rows):
        row = dict.fromkeys(COLUMNS)
        row.update(
            r,
            memory_id=f"m{i}",
            version=1,
            status="usable",
            fetched_at="t",
            policy="default",
            revocation_version=1,
            checksum="c",
            content_length=0,
            derived_from="[]",
            first_seq=1,
            last_seq=1,
        )
        full.append(row)
        conn.execute(
            f"INSERT INTO memories (mid, {', '.join(f'{c!r}' for c in COLUMNS)}) "
            f"VALUES (?, {', '.join('?' * len(COLUMNS))})",
            [i + 1, *[row[c] for c in COLUMNS]],
        )
    where, params = selector_sql(selector)
    by_sql = {r[0] for r in conn.execute(f"SELECT memory_id FROM memories WHERE {where}", params)}
    by_python = {r["memory_id"] for r in full if selector_covers(selector, r)}
    assert by_sql == by_python
    assert row_dict([full[0][c] for c in COLUMNS])["memory_id"] == "m0"
