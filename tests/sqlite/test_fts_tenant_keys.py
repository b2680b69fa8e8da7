"""The SQLite text index's words are keyed by tenant (issue 58, a search that
leaks nothing): two tenants' documents holding one word index it under two
terms, a tenant's search names only its own tenant's terms (so the work it
does never grows with another tenant's documents), what a search finds is
as before, Korean and diacritics and phrases included, and a store whose
index was written before the keys is rewritten keyed when it opens.

An agent's memory is keyed again by (tenant, agent): its words are indexed
under the tenant's terms and the agent's, a search by a key bound to an
agent names only that agent's terms (so its work never grows with the
tenant's other agents' memories), and a store keyed by tenant alone is
rewritten when it opens."""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from memwarden.engine import OPERATOR, Warden
from memwarden.events import FrozenClock
from memwarden.projections._access import Access
from memwarden.projections._fts_keys import MARK_CHARS, agent_mark, keyed, tenant_mark, text_index_key
from memwarden.projections._sqlite_view import SQLiteView
from memwarden.projections._unicode61 import DIACRITICS, SEPARATORS
from memwarden.projections._usable_schema import FTS_OWN

from ..conftest import agent_key, save_memory

A, B = "acme", "globex"
TEXTS = {
    "seoul": ("서울 출장", "서울에서 회의가 있었다"),
    "cafe": ("Café notes", "crème brûlée at the CAFÉ"),
    "phrase": ("deploy", "the foo-bar switch, then baz"),
    "nfd": ("decomposed", "cafe\u0301 au lait"),
}


@pytest.fixture
def two(tmp_path: Path, clock: FrozenClock) -> Iterator[Warden]:
    """Both tenants hold the same words; globex holds many more documents of them."""
    w = Warden(tmp_path / "store.db", clock=clock)
    for tenant, copies in ((A, 1), (B, 5)):
        for name, (summary, content) in TEXTS.items():
            for n in range(copies):
                save_memory(w, f"{name}-{n}", tenant=tenant, summary=summary, content=content)
    yield w
    w.close()


def vocabulary(conn: sqlite3.Connection) -> set[str]:
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_terms USING fts5vocab(main, memories_fts, 'row')")
    return {term for (term,) in conn.execute("SELECT term FROM temp.fts_terms")}


def words_of(conn: sqlite3.Connection, text: str) -> list[str]:
    """The terms SQLite's FTS5 makes of ``text``, in order."""
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.probe USING fts5(s, tokenize='unicode61 remove_diacritics 2')"
    )
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.probe_words USING fts5vocab(temp, probe, 'instance')")
    conn.execute("INSERT INTO temp.probe (rowid, s) VALUES (1, ?)", (text,))
    found = [t for (t,) in conn.execute("SELECT term FROM temp.probe_words ORDER BY offset")]
    conn.execute("DELETE FROM temp.probe")
    return found


def test_the_same_word_in_two_tenants_is_two_terms(two: Warden) -> None:
    conn = two.store.conn  # type: ignore[attr-defined]
    key = text_index_key(conn)
    marks = {A: tenant_mark(key, A), B: tenant_mark(key, B)}
    assert marks[A] != marks[B] and len(marks[A]) == MARK_CHARS
    terms = vocabulary(conn)
    for word in ("서울에서", "cafe", "creme", "foo", "bar", "baz"):
        assert {t for t in terms if t.endswith(word) and len(t) == MARK_CHARS + len(word)} == {
            marks[A] + word,
            marks[B] + word,
        }, word
    # no word of a document is indexed bare
    assert all(t[:MARK_CHARS] in marks.values() for t in terms), sorted(terms)[:5]


def test_a_search_names_only_its_tenants_terms(two: Warden) -> None:
    conn = two.store.conn  # type: ignore[attr-defined]
    view = SQLiteView(conn, two.store.projector)  # type: ignore[attr-defined]
    mark = tenant_mark(text_index_key(conn), A)
    _sql, params = view.agent_query_sql(
        tenant=A,
        access=Access(tenants=(A,)),
        filters={},
        ids=None,
        id_prefixes=None,
        match=["서울", "foo-bar", "caf"],
        content=None,
        usable_at=None,
        limit=10,
        offset=0,
    )
    [expression] = [p for p in params if isinstance(p, str) and '"*' in p]
    assert expression == f'"{mark}서울"* "{mark}foo-{mark}bar"* "{mark}caf"*'
    # every term the expression can read is the tenant's: a prefix of one of
    # its words (the last of a phrase) or one of them whole
    terms = vocabulary(conn)
    named = re.findall(rf"[0-9a-f]{{{MARK_CHARS}}}[^\s\"*-]+", expression)
    read = {t for t in terms for n in named if t.startswith(n)}
    assert read and all(t.startswith(mark) for t in read)
    # the raw text-index path too, for a caller of both tenants searching one
    assert sorted(two.search_ids("서울", tenant=A, caller=OPERATOR)) == ["seoul-0"]


def test_what_a_search_finds_is_unchanged(two: Warden) -> None:
    def found(tenant: str, text: str) -> list[str]:
        page = two.search(tenant=tenant, query_text=text, mode="text", limit=50, caller=OPERATOR)
        assert {f.view.scope["tenant"] for f in page} <= {tenant}
        return sorted(f.view.memory_id for f in page)

    assert found(A, "서울") == ["seoul-0"]  # a stem finds its inflected form
    assert found(B, "서울") == [f"seoul-{n}" for n in range(5)]
    assert found(A, "cafe") == ["cafe-0", "nfd-0"]  # diacritics folded, composed or not
    assert found(A, "CAFÉ") == ["cafe-0", "nfd-0"]
    assert found(A, "brul") == ["cafe-0"]
    assert found(A, "foo-bar") == ["phrase-0"]  # a phrase: its words next to each other
    assert found(A, "bar-foo") == []
    assert found(A, "switch then") == ["phrase-0"]
    assert found(A, "회의 서울") == ["seoul-0"]
    assert found(A, "nothing") == []


def test_the_marks_go_where_fts5_starts_a_word(tmp_path: Path) -> None:
    """A keyed text is the same words, each behind the mark, on random texts
    of every kind of character the tokenizer treats apart."""
    conn = sqlite3.connect(":memory:")
    rng = random.Random(58)
    edges = [c for first, last in SEPARATORS for c in (first - 1, first, last, last + 1) if 0 < c < 0x110000]
    alphabet = [chr(c) for c in [*edges, *DIACRITICS, *range(0x20, 0x7F)] if not 0xD800 <= c < 0xE000]
    alphabet += list("서울에서회의 éÉçÇß") + [chr(rng.randrange(0x80, 0x30000)) for _ in range(500)]
    alphabet = [c for c in alphabet if not 0xD800 <= ord(c) < 0xE000]
    ascii = [chr(c) for c in range(0x7F)]
    mark = "0123456789ab"
    for n in range(600):
        letters = ascii if n % 3 == 0 else alphabet  # ASCII alone takes a path of its own
        text = "".join(rng.choice(letters) for _ in range(rng.randrange(1, 40)))
        assert words_of(conn, keyed(mark, text)) == [mark + w for w in words_of(conn, text)], repr(text)


def test_the_separator_table_is_sqlites(tmp_path: Path) -> None:
    """Each separator run's edges, and each diacritic: a word character
    joins the letters around it, a separator splits them, a diacritic
    folds away inside a word and does not start one."""
    conn = sqlite3.connect(":memory:")
    separators = {c for first, last in SEPARATORS for c in range(first, last + 1)}
    for code in sorted({c for first, last in SEPARATORS for c in (first - 1, first, last, last + 1)} | set(DIACRITICS)):
        if not 0 < code < 0x110000 or 0xD800 <= code < 0xE000:
            continue
        inside = len(words_of(conn, f"xq{chr(code)}q")) == 1
        starts = words_of(conn, f"x {chr(code)}q")[1:] != ["q"]
        kind = "separator" if code in separators else "diacritic" if code in DIACRITICS else "word"
        assert kind == ("word" if starts else "diacritic" if inside else "separator"), hex(code)


def test_a_store_of_unkeyed_words_is_rewritten_when_it_opens(tmp_path: Path, clock: FrozenClock) -> None:
    path = tmp_path / "old.db"
    w = Warden(path, clock=clock)
    save_memory(w, "kept", tenant=A, summary="서울 출장", content="서울에서 회의")
    save_memory(w, "other", tenant=B, summary="서울 출장", content="서울에서 회의")
    save_memory(w, "gone", tenant=A, summary="secret", content="erasedword 서울")
    w.erase(memory_id="gone", tenant=A, reason="asked", caller=OPERATOR)
    w.close()
    # the index as a store before the keys wrote it: every word bare
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TABLE text_index_key")
    conn.execute("DROP TABLE memories_fts")
    conn.execute(
        "CREATE VIRTUAL TABLE memories_fts USING fts5(summary, content, tokenize = 'unicode61 remove_diacritics 2')"
    )
    conn.execute(
        "INSERT INTO memories_fts (rowid, summary, content) SELECT m.mid, CAST(t.summary AS TEXT), "
        "CAST(t.content AS TEXT) FROM memories m JOIN texts t ON t.tenant = m.tenant AND t.memory_id = m.memory_id "
        "AND t.version = m.version WHERE m.status != 'erased'"
    )
    assert "서울에서" in vocabulary(conn)
    conn.close()

    w = Warden(path, clock=clock)
    try:
        conn = w.store.conn  # type: ignore[attr-defined]
        key = text_index_key(conn)
        terms = vocabulary(conn)
        assert {tenant_mark(key, A) + "서울에서", tenant_mark(key, B) + "서울에서"} <= terms
        assert not [t for t in terms if "erasedword" in t or "secret" in t]
        assert all(len(t) > MARK_CHARS and t[:MARK_CHARS] in {tenant_mark(key, A), tenant_mark(key, B)} for t in terms)
        page = w.search(tenant=A, query_text="서울", mode="text", limit=10, caller=OPERATOR)
        assert [f.view.memory_id for f in page] == ["kept"]
        conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    finally:
        w.close()


PLANNER, OTHER = "planner", "other"


@pytest.fixture
def agents(tmp_path: Path, clock: FrozenClock) -> Iterator[Warden]:
    """acme's planner holds each text once, its other agent five times, and
    acme itself (no agent) once; globex's planner once."""
    w = Warden(tmp_path / "agents.db", clock=clock)
    for tenant, agent, copies in ((A, PLANNER, 1), (A, OTHER, 5), (A, None, 1), (B, PLANNER, 1)):
        scope = {} if agent is None else {"agent": agent}
        for name, (summary, content) in TEXTS.items():
            for n in range(copies):
                memory_id = f"{name}-{agent or 'tenant'}-{n}"
                save_memory(w, memory_id, tenant=tenant, summary=summary, content=content, scope=scope)
    save_memory(
        w, "ends", tenant=A, summary="omega middle alpha", content="omega middle alpha", scope={"agent": PLANNER}
    )
    yield w
    w.close()


def test_an_agents_word_is_a_tenant_term_and_an_agent_term(agents: Warden) -> None:
    conn = agents.store.conn  # type: ignore[attr-defined]
    key = text_index_key(conn)
    tenant = {A: tenant_mark(key, A), B: tenant_mark(key, B)}
    agent = {(t, a): agent_mark(key, t, a) for t in (A, B) for a in (PLANNER, OTHER)}
    assert len(set(tenant.values()) | set(agent.values())) == 6  # every mark apart
    assert all(len(m) == MARK_CHARS for m in agent.values())
    terms = vocabulary(conn)
    for word in ("서울에서", "cafe", "creme", "foo", "bar", "baz"):
        assert {t for t in terms if t.endswith(word) and len(t) == MARK_CHARS + len(word)} == {
            tenant[A] + word,
            tenant[B] + word,
            agent[A, PLANNER] + word,
            agent[A, OTHER] + word,
            agent[B, PLANNER] + word,
        }, word
    # one planner memory's document holds each word under both marks, once each
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_at USING fts5vocab(main, memories_fts, 'instance')")
    [mid] = conn.execute("SELECT mid FROM memories WHERE tenant = ? AND memory_id = 'seoul-planner-0'", (A,)).fetchone()
    held = [t for (t,) in conn.execute("SELECT term FROM temp.fts_at WHERE doc = ? AND col = 'content'", (mid,))]
    assert sorted(held) == sorted(
        m + w for m in (tenant[A], agent[A, PLANNER]) for w in ("서울에서", "회의가", "있었다")
    )
    # a memory of no agent: its tenant's terms only
    [mid] = conn.execute("SELECT mid FROM memories WHERE tenant = ? AND memory_id = 'seoul-tenant-0'", (A,)).fetchone()
    held = [t for (t,) in conn.execute("SELECT term FROM temp.fts_at WHERE doc = ?", (mid,))]
    assert held and all(t.startswith(tenant[A]) for t in held)


def test_an_agent_bound_search_names_only_its_agents_terms(agents: Warden) -> None:
    conn = agents.store.conn  # type: ignore[attr-defined]
    view = SQLiteView(conn, agents.store.projector)  # type: ignore[attr-defined]
    mark = agent_mark(text_index_key(conn), A, PLANNER)
    for tenant in (A, None):
        _sql, params = view.agent_query_sql(
            tenant=tenant,
            access=Access(tenants=(A,), agent=PLANNER),
            filters={},
            ids=None,
            id_prefixes=None,
            match=["서울", "foo-bar", "caf"],
            content=None,
            usable_at=None,
            limit=10,
            offset=0,
        )
        [expression] = [p for p in params if isinstance(p, str) and '"*' in p]
        assert expression == f'"{mark}서울"* "{mark}foo-{mark}bar"* "{mark}caf"*'
        terms = vocabulary(conn)
        named = re.findall(rf"[0-9a-f]{{{MARK_CHARS}}}[^\s\"*-]+", expression)
        read = {t for t in terms for n in named if t.startswith(n)}
        assert read and all(t.startswith(mark) for t in read)
    # the raw text-index path asks for the agent's terms too
    assert view.match_query(["서울"], [A], PLANNER) == [f'"{mark}서울"*']


def test_what_an_agent_bound_search_finds_is_its_agents(agents: Warden) -> None:
    bound = agent_key(A, agent=PLANNER)

    def found(text: str, caller: object = bound) -> list[str]:
        page = agents.search(tenant=A, query_text=text, mode="text", limit=50, caller=caller)
        return sorted(f.view.memory_id for f in page)

    assert found("서울") == ["seoul-planner-0"]  # a Korean stem finds its inflected form
    assert found("cafe") == ["cafe-planner-0", "nfd-planner-0"]
    assert found("CAFÉ") == ["cafe-planner-0", "nfd-planner-0"]
    assert found("brul") == ["cafe-planner-0"]  # a prefix
    assert found("foo-bar") == ["phrase-planner-0"]  # a phrase
    assert found("bar-foo") == []
    assert found("회의 서울") == ["seoul-planner-0"]
    # a phrase does not run from one copy of the text into the other
    assert found("middle-alpha") == ["ends"]
    assert found("alpha-omega") == []
    assert found("alpha-omega", OPERATOR) == []
    assert sorted(agents.search_ids("서울", tenant=A, caller=bound)) == ["seoul-planner-0"]
    # tenant-wide searches still find every agent's memories and the tenant's own
    everyone = ["planner-0", "tenant-0", *(f"{OTHER}-{n}" for n in range(5))]
    assert found("서울", OPERATOR) == sorted(f"seoul-{x}" for x in everyone)
    assert found("서울", agent_key(A)) == sorted(f"seoul-{x}" for x in everyone)
    assert found("foo-bar", agent_key(A)) == sorted(f"phrase-{x}" for x in everyone)


def test_a_store_keyed_by_tenant_alone_is_rewritten_when_it_opens(tmp_path: Path, clock: FrozenClock) -> None:
    path = tmp_path / "tenant-only.db"
    w = Warden(path, clock=clock)
    save_memory(w, "mine", tenant=A, summary="서울 출장", content="서울에서 회의", scope={"agent": PLANNER})
    save_memory(w, "theirs", tenant=A, summary="서울 출장", content="서울에서 회의", scope={"agent": OTHER})
    save_memory(w, "shared", tenant=A, summary="서울 출장", content="서울에서 회의")
    w.close()
    # the index as a store keyed by tenant alone wrote it: a key of no shape, every word behind its tenant's mark
    conn = sqlite3.connect(path, isolation_level=None)
    old = bytes(32)
    conn.execute("DROP TABLE text_index_key")
    conn.execute("CREATE TABLE text_index_key (id INTEGER PRIMARY KEY CHECK (id = 1), secret BLOB NOT NULL)")
    conn.execute("INSERT INTO text_index_key VALUES (1, ?)", (old,))
    # and, as then, an index holding its own copy of the texts
    conn.execute("DROP TABLE memories_fts")
    conn.execute("DROP VIEW memories_fts_source")
    conn.execute(FTS_OWN)
    for mid, tenant, summary, content in conn.execute(
        "SELECT m.mid, m.tenant, CAST(t.summary AS TEXT), CAST(t.content AS TEXT) FROM memories m JOIN texts t "
        "ON t.tenant = m.tenant AND t.memory_id = m.memory_id AND t.version = m.version"
    ).fetchall():
        mark = tenant_mark(old, tenant)
        conn.execute(
            "INSERT INTO memories_fts (rowid, summary, content) VALUES (?, ?, ?)",
            (mid, keyed(mark, summary), keyed(mark, content)),
        )
    assert {t[:MARK_CHARS] for t in vocabulary(conn)} == {tenant_mark(old, A)}
    conn.close()

    w = Warden(path, clock=clock)
    try:
        conn = w.store.conn  # type: ignore[attr-defined]
        key = text_index_key(conn)
        assert key != old  # a new index, a new key
        marks = {tenant_mark(key, A), agent_mark(key, A, PLANNER), agent_mark(key, A, OTHER)}
        terms = vocabulary(conn)
        assert {m + "서울에서" for m in marks} <= terms
        assert {t[:MARK_CHARS] for t in terms} == marks
        page = w.search(tenant=A, query_text="서울", mode="text", limit=10, caller=agent_key(A, agent=PLANNER))
        assert [f.view.memory_id for f in page] == ["mine"]
        page = w.search(tenant=A, query_text="서울", mode="text", limit=10, caller=OPERATOR)
        assert sorted(f.view.memory_id for f in page) == ["mine", "shared", "theirs"]
        conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    finally:
        w.close()
    # and opened again, it is not rewritten
    w = Warden(path, clock=clock)
    try:
        assert text_index_key(w.store.conn) == key  # type: ignore[attr-defined]
    finally:
        w.close()
