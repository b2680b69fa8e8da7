"""The store's FTS5 index holds no copy of the texts: it reads its documents
from the view and the text store (``FTS_SOURCE``). Replaced versions and
erasures still leave no word of theirs in it, and a store whose index held
its own copy is written again without it when it opens."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memwarden.engine import OPERATOR, Warden
from memwarden.events import FrozenClock
from memwarden.projections._fts_documents import fill_documents, stored_texts
from memwarden.projections._fts_keys import keying
from memwarden.projections._usable_schema import FTS_OWN

from ..conftest import save_memory


def index_bytes(conn: sqlite3.Connection) -> bytes:
    return b"".join(bytes(block) for (block,) in conn.execute("SELECT block FROM memories_fts_data"))


def checked(conn: sqlite3.Connection) -> None:
    keying(conn)  # the check reads the documents through the keying function
    conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")


def found(w: Warden, text: str) -> list[str]:
    return sorted(v.memory_id for v in w.query(tenant="acme", text=text, limit=100, caller=OPERATOR))


def test_the_index_holds_no_copy_of_the_texts(warden: Warden) -> None:
    save_memory(warden, "m1", summary="요약 하나", content="xylophonequartz 서울에서 회의")
    conn = warden.store.conn
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    assert "memories_fts_content" not in tables
    assert found(warden, "xylophonequartz") == ["m1"]
    assert found(warden, "서울") == ["m1"]
    checked(conn)


def test_a_new_version_and_an_erasure_leave_no_old_word_in_the_index(warden: Warden) -> None:
    save_memory(warden, "m1", content="xylophonequartz first words", scope={"agent": "planner"})
    save_memory(warden, "m2", content="keeper words stay")
    # the new version's words replace the old (its agent too: the marks differ)
    save_memory(warden, "m1", content="marimbaviolet second words")
    conn = warden.store.conn
    checked(conn)
    assert found(warden, "xylophonequartz") == []
    assert found(warden, "marimbaviolet") == ["m1"]
    warden.erase(memory_id="m1", reason="asked", caller=OPERATOR)
    checked(conn)
    assert found(warden, "marimbaviolet") == []
    assert found(warden, "keeper") == ["m2"]
    # the erasure's purge merged the index: the words are gone from its pages
    data = index_bytes(conn)
    assert b"rimbaviolet" not in data and b"lophonequartz" not in data
    assert b"eeper" in data
    assert warden.check_projections(caller=OPERATOR).ok


def test_a_store_whose_index_held_its_own_copy_opens_without_it(tmp_path: Path, clock: FrozenClock) -> None:
    path = tmp_path / "copied.db"
    w = Warden(path, clock=clock)
    for i in range(30):
        save_memory(w, f"m{i}", content=f"기억 {i} marker{i} 서울에서")
    save_memory(w, "gone", content="erasedword here")
    w.erase(memory_id="gone", reason="asked", caller=OPERATOR)
    w.close()
    # the layout of before: an index with its own content table, filled as it was
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TABLE memories_fts")
    conn.execute("DROP VIEW memories_fts_source")
    conn.execute(FTS_OWN)
    fill_documents(conn, stored_texts)
    assert conn.execute("SELECT count(*) FROM memories_fts_content").fetchone()[0] == 30
    conn.close()

    w = Warden(path, clock=clock)
    conn = w.store.conn
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    assert "memories_fts_content" not in tables
    assert "memories_fts_source" in str(
        conn.execute("SELECT sql FROM sqlite_master WHERE name = 'memories_fts'").fetchone()[0]
    )
    checked(conn)
    assert found(w, "marker7") == ["m7"]
    assert len(found(w, "서울")) == 30
    assert found(w, "erasedword") == []
    save_memory(w, "m7", content="replaced text")
    assert found(w, "marker7") == []
    checked(conn)
    assert w.check_projections(caller=OPERATOR).ok
    w.close()
