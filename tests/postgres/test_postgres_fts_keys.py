"""PostgreSQL's text index keys its words by tenant as SQLite's does (issue
58): a GIN index keeps one posting list per lexeme for the whole table, so
two tenants' documents holding one word index it under two lexemes, a
tenant's search asks only its own tenant's, what a search finds is as
before, and a store whose index was written before the keys is rewritten
keyed when it opens."""

from __future__ import annotations

import psycopg
from memwarden.engine import OPERATOR, Warden
from memwarden.projections._fts_keys import MARK_CHARS, tenant_mark
from memwarden.projections._postgres_usable import KEYED_QUERY, MARK, search_query, search_vector

from ..conftest import save_memory

A, B = "acme", "globex"


def lexemes(url: str) -> tuple[bytes, set[str]]:
    with psycopg.connect(url, autocommit=True) as conn:
        key = bytes(conn.execute("SELECT secret FROM text_index_key").fetchone()[0])  # type: ignore[index]
        words = {w for (w,) in conn.execute("SELECT word FROM ts_stat('SELECT doc FROM memories_search')")}
    return key, words


def found(w: Warden, tenant: str, text: str) -> list[str]:
    page = w.search(tenant=tenant, query_text=text, mode="text", limit=50, caller=OPERATOR)
    assert {f.view.scope["tenant"] for f in page} <= {tenant}
    return sorted(f.view.memory_id for f in page)


def test_tenants_words_are_apart_and_a_search_asks_its_own(pg_url: str) -> None:
    w = Warden(pg_url)
    try:
        for tenant, copies in ((A, 1), (B, 4)):
            for n in range(copies):
                save_memory(w, f"seoul-{n}", tenant=tenant, summary="서울 출장", content="서울에서 foo-bar café")
        assert found(w, A, "서울") == ["seoul-0"]
        assert found(w, B, "서울") == [f"seoul-{n}" for n in range(4)]
        assert found(w, A, "foo-bar cafe") == ["seoul-0"]
        assert found(w, A, "bar-foo") == []
    finally:
        w.close()
    key, words = lexemes(pg_url)
    marks = {tenant_mark(key, A), tenant_mark(key, B)}
    assert {m + "서울에서" for m in marks} <= words
    assert all(word[:MARK_CHARS] in marks for word in words), sorted(words)[:5]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        asked = conn.execute(
            f"SELECT CAST({KEYED_QUERY} AS text)".replace("?", "%s"), (search_query(["서울"], MARK), [A])
        )
        [(query,)] = asked.fetchall()
    assert query == f"'{tenant_mark(key, A)}서울':*"


def test_a_store_of_unkeyed_words_is_rewritten_when_it_opens(pg_url: str) -> None:
    w = Warden(pg_url)
    save_memory(w, "kept", tenant=A, summary="서울 출장", content="서울에서 회의")
    save_memory(w, "gone", tenant=A, summary="secret", content="erasedword 서울")
    w.erase(memory_id="gone", tenant=A, reason="asked", caller=OPERATOR)
    w.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:  # the index as the version before wrote it
        conn.execute("DROP TABLE text_index_key")
        rows = conn.execute(
            "SELECT m.mid, convert_from(t.summary, 'UTF8'), convert_from(t.content, 'UTF8') FROM memories m "
            "JOIN texts t USING (tenant, memory_id, version) WHERE m.status <> 'erased'"
        ).fetchall()
        conn.execute("TRUNCATE memories_search")
        for mid, summary, content in rows:
            conn.execute(
                "INSERT INTO memories_search VALUES (%s, CAST(%s AS tsvector))", (mid, search_vector(summary, content))
            )
        bare = conn.execute("SELECT count(*) FROM ts_stat('SELECT doc FROM memories_search') WHERE word = '서울에서'")
        assert bare.fetchone() == (1,)
    w = Warden(pg_url)
    try:
        assert found(w, A, "서울") == ["kept"]
    finally:
        w.close()
    key, words = lexemes(pg_url)
    assert tenant_mark(key, A) + "서울에서" in words
    assert all(word[:MARK_CHARS] == tenant_mark(key, A) for word in words), sorted(words)
    assert not [word for word in words if "erasedword" in word or "secret" in word]
