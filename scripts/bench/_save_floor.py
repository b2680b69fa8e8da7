"""The save benchmark's items and the raw sqlite3 baselines they are measured
against (scripts/bench/save.py): event-shaped rows and their texts committed
by raw sqlite3, and the same-writes floor, the rows memwarden's own save
leaves in the store, written again by raw sqlite3 into a store of
memwarden's schema."""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memwarden.engine import OPERATOR, Warden
from memwarden.events import canonical_json
from memwarden.projections._fts_keys import keying

TEXT = "서울 지사 회의록: 목요일 오후 3시, 3층 회의실. Quarterly numbers reviewed; follow-ups assigned. "


def memory(k: int, i: int) -> dict[str, Any]:
    return {
        "memory_id": f"m{k}-{i}",
        "kind": "external_fact",
        "summary": f"서울 지사 요약 {i} summary",
        "content": f"{TEXT}{k}-{i}",
        "source_url": f"https://example.org/docs/{k}/{i}",
        "scope": {"tenant": f"t{i % 100}", "project": f"p{i % 10}"},
        "ttl": "6h",
    }


RAW_SCHEMA = (
    "CREATE TABLE events (seq INTEGER PRIMARY KEY, event_id TEXT NOT NULL UNIQUE, stream TEXT NOT NULL, "
    "payload TEXT NOT NULL, hash TEXT NOT NULL);"
    "CREATE TABLE texts (tenant TEXT, memory_id TEXT, version INTEGER, summary BLOB, content BLOB, "
    "PRIMARY KEY (tenant, memory_id, version)) WITHOUT ROWID"
)


def raw(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.executescript(RAW_SCHEMA)
    return conn


def raw_rows(k: int, n: int, base: int) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
    out = []
    for i in range(n):
        m = memory(k, i)
        event = (base + i + 1, f"e{k}-{i}", f"{m['memory_id']} {m['scope']['tenant']}", canonical_json(m), "f" * 64)
        text = (m["scope"]["tenant"], m["memory_id"], 1, m["summary"].encode(), m["content"].encode())
        out.append((event, text))
    return out


@dataclass(frozen=True)
class SameWrites:
    """The rows memwarden's save of some items leaves, one entry an item, and
    the empty store of memwarden's schema they are written again into."""

    template: Path
    tables: dict[str, str]  # table -> its INSERT statement
    items: list[dict[str, tuple[Any, ...]]]  # per item: table -> its row
    counters: list[tuple[str, str]]  # the stats rows (week, counter) a save adds one to

    @classmethod
    def captured(cls, folder: Path, items: list[dict[str, Any]], tag: str) -> SameWrites:
        template = folder / f"template-{tag}.db"
        Warden(template, synchronous="FULL").close()
        capture = folder / f"capture-{tag}.db"
        shutil.copyfile(template, capture)
        w = Warden(capture, synchronous="FULL")
        for start in range(0, len(items), 1000):
            w.save_many(items[start : start + 1000], caller=OPERATOR)
        w.close()
        conn = sqlite3.connect(capture)
        by_key = {(r[0], r[1]): r for r in conn.execute("SELECT tenant, memory_id, * FROM memories")}
        events = {r[0]: r for r in conn.execute("SELECT * FROM events")}
        texts = {(r[0], r[1]): r for r in conn.execute("SELECT tenant, memory_id, * FROM texts")}
        keying(conn)  # the index reads its documents, keyed, from the view and the texts
        index = {r[0]: r for r in conn.execute("SELECT mid, mid, summary, content FROM memories_fts_source")}
        counters = list(conn.execute("SELECT week, counter FROM stats"))
        tables = ("events", "memories", "texts")
        columns = {t: len(next(iter(conn.execute(f"SELECT * FROM {t} LIMIT 1")))) for t in tables}
        conn.close()
        rows = []
        for m in items:
            key = (m["scope"]["tenant"], m["memory_id"])
            memory_row = by_key[key][2:]
            rows.append(
                {
                    "events": events[memory_row[-1]],  # last_seq: the event that wrote it
                    "memories": memory_row,
                    "texts": texts[key][2:],
                    "memories_fts": index[memory_row[0]][1:],  # the index's rowid is the row's mid
                }
            )
        marks = {t: ",".join("?" * n) for t, n in columns.items()}
        tables = {t: f"INSERT INTO {t} VALUES ({marks[t]})" for t in columns}
        tables["memories_fts"] = "INSERT INTO memories_fts (rowid, summary, content) VALUES (?,?,?)"
        return cls(template, tables, rows, counters)

    def store(self, path: Path) -> sqlite3.Connection:
        shutil.copyfile(self.template, path)
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    def commit(self, conn: sqlite3.Connection, items: list[dict[str, tuple[Any, ...]]]) -> None:
        """One transaction writing ``items``' rows, the counters and the positions."""
        conn.execute("BEGIN IMMEDIATE")
        for table, insert in self.tables.items():
            conn.executemany(insert, [item[table] for item in items])
        head = items[-1]["events"][0]
        conn.execute("UPDATE projection_tracking SET seq = ?", (head,))
        for week, counter in self.counters:
            conn.execute(
                "INSERT INTO stats VALUES (?, ?, ?) ON CONFLICT (week, counter) DO UPDATE SET count = count + ?",
                (week, counter, len(items), len(items)),
            )
        conn.execute("COMMIT")
