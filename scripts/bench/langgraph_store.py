"""LangGraph's store interface over memwarden, against a raw-SQL floor and LangGraph's own stores.

    .venv/bin/python scripts/bench/langgraph_store.py [--quick] [--json PATH] [--repeat N] [--backend postgres]

The same items (100,000; 10,000 with --quick; 1,000 with --smoke) in 100 namespaces of 10
users each, put through ``BaseStore`` in one run, on one machine:
``MemwardenStore`` in process (an agent key's Warden), then the floor, then
LangGraph's ``SqliteStore`` (``langgraph-checkpoint-sqlite``) and
``InMemoryStore`` as the peers to catch. A fifth of the items are put with
a TTL of one minute and the clock moves two on; one namespace is revoked.

The floor does the reads memwarden's must, in raw SQL on memwarden's own
database, and builds LangGraph's ``Item``: for a ``get``, the view's row
with its text, the policies and the view's position, in one snapshot; for
a filtered ``search``, the same with the page of rows the filter passes
(evaluated in SQL: SQLite's ``json_extract``, PostgreSQL's ``jsonb``),
usable and unexpired now, newest first. It does not judge (no checksum, no
evidence, no rights): that is what memwarden adds.

Targets (issue #59):
* ``get`` p99 and filtered ``search`` p99 within 1.5x the floor's;
* expired and revoked items served: 0.
``put`` and batch ``put`` rates beside memwarden's own ``save`` and
``save_many`` are kept from issue #41 (target 0.8x).
"""

from __future__ import annotations

import json
import random
import sqlite3
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

# scripts/bench/http.py would shadow the standard library's http package:
# look in this folder last, not first
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE] + [_HERE]
from _common import Metric, RawConnection, arguments, fresh_store, median_of, percentile, report, sized
from memwarden.engine import OPERATOR, Principal, Warden
from memwarden.events import FrozenClock

AGENT = Principal("bench", "agent", tenants=("acme",))
FILTER = {"n": {"$gte": 10}, "kind_of": "note"}


def item(i: int) -> tuple[tuple[str, str], str, dict[str, Any], float | None]:
    """(namespace, key, value, ttl in minutes) of item ``i``: a fifth expire within a minute."""
    namespace = (f"p{i % 100}", f"u{(i // 100) % 10}")
    value = {"content": f"note {i} 회의록 요약", "n": i % 50, "kind_of": "note" if i % 2 else "fact"}
    return namespace, f"k{i}", value, 1.0 if i % 5 == 0 else None


def fields(i: int) -> dict[str, Any]:
    """What ``MemwardenStore`` saves for item ``i``, for memwarden's own save."""
    from memwarden.integrations._items import content_of, memory_id_of, summary_of

    namespace, key, value, ttl = item(i)
    return {
        "memory_id": memory_id_of(namespace, key),
        "kind": "store_item",
        "summary": summary_of(value, key),
        "content": content_of(value),
        "source_url": "langgraph:" + memory_id_of(namespace, key)[3:],
        "scope": {"tenant": "acme", "project": namespace[0], "user": namespace[1]},
        "ttl": timedelta(minutes=ttl) if ttl else None,
    }


def rate(count: int, fn: Callable[[], None]) -> float:
    started = time.perf_counter()
    fn()
    return count / (time.perf_counter() - started)


def p99_ms(fn: Callable[[int], Any], picks: list[int]) -> tuple[float, list[Any]]:
    samples, answers = [], []
    for i in picks:
        started = time.perf_counter()
        answers.append(fn(i))
        samples.append((time.perf_counter() - started) * 1000)
    return percentile(samples, 0.99), answers


def paired(
    fn: Callable[[int], Any], other: Callable[[int], Any], picks: list[int]
) -> tuple[tuple[float, list[Any]], tuple[float, list[Any]]]:
    """``p99_ms`` of two readers, taking turns on each pick."""
    samples: tuple[list[float], list[float]] = ([], [])
    answers: tuple[list[Any], list[Any]] = ([], [])
    for i in picks:
        for read, taken, found in ((fn, samples[0], answers[0]), (other, samples[1], answers[1])):
            started = time.perf_counter()
            found.append(read(i))
            taken.append((time.perf_counter() - started) * 1000)
    return (percentile(samples[0], 0.99), answers[0]), (percentile(samples[1], 0.99), answers[1])


class Floor:
    """memwarden's reads in raw SQL on its own database, each in one
    snapshot, answering LangGraph's items (``get``, ``search``)."""

    # the view's row with its text (as the agent query selects it)
    ROW = (
        "SELECT m.memory_id, m.status, m.fetched_at, m.expires_at, m.policy, m.revocation_version, "
        "m.checksum, {content} FROM memories m "
        "LEFT JOIN texts t ON t.tenant = m.tenant AND t.memory_id = m.memory_id AND t.version = m.version"
    )

    def __init__(self, location: str, now: str) -> None:
        self.postgres = location.startswith("postgresql://")
        self.conn = RawConnection(location)
        self.now = now
        content = "t.content" if self.postgres else "CAST(t.content AS BLOB)"
        self.row = self.ROW.format(content=content)
        # as memwarden's query: given the project, SQLite walks the covering
        # (tenant, project, last_seq) index in order, the user compared on the
        # way, not the user's own index and a sort
        self.user = 'm."user"' if self.postgres else '+m."user"'
        if self.postgres:
            doc = "convert_from(t.content, 'UTF8')::jsonb"
            self.filter = f"({doc} ->> 'kind_of') = ? AND CAST({doc} -> 'n' AS numeric) >= ?"
        else:
            doc = "CAST(t.content AS TEXT)"
            self.filter = f"json_extract({doc}, '$.kind_of') = ? AND json_extract({doc}, '$.n') >= ?"

    def _snapshot(self, read: Callable[[], list[Any]]) -> tuple[list[Any], dict[str, Any], int]:
        self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ" if self.postgres else "BEGIN")
        try:
            rows = read()
            policies = dict(self.conn.execute("SELECT policy, version FROM policies").fetchall())
            position = min(seq for _, seq in self.conn.execute("SELECT name, seq FROM projection_tracking"))
        finally:
            self.conn.execute("COMMIT")
        return rows, policies, position

    def _usable(self, row: Any) -> bool:
        _, status, _, expires_at, _, _, _, _ = row
        return status == "usable" and (expires_at is None or expires_at > self.now)

    def get(self, namespace: tuple[str, ...], key: str) -> Any:
        from langgraph.store.base import Item
        from memwarden.integrations._items import memory_id_of

        memory_id = memory_id_of(namespace, key)
        rows, _, _ = self._snapshot(
            lambda: self.conn.execute(
                f"{self.row} WHERE m.tenant = ? AND m.memory_id = ?", ("acme", memory_id)
            ).fetchall()
        )
        if not rows or not self._usable(rows[0]):
            return None
        when = datetime.fromisoformat(rows[0][2])
        return Item(namespace=namespace, key=key, value=json.loads(rows[0][7]), created_at=when, updated_at=when)

    def search(self, namespace: tuple[str, ...]) -> list[Any]:
        from langgraph.store.base import SearchItem

        sql = (
            f"{self.row} WHERE m.tenant = ? AND m.project = ? AND {self.user} = ? AND {self.filter} "
            "AND m.status = 'usable' AND (m.expires_at IS NULL OR m.expires_at > ?) "
            "ORDER BY m.last_seq DESC LIMIT 10"
        )
        params = ("acme", namespace[0], namespace[1], "note", 10, self.now)
        rows, _, _ = self._snapshot(lambda: self.conn.execute(sql, params).fetchall())
        items = []
        for row in rows:
            when = datetime.fromisoformat(row[2])
            key = row[0].rsplit(":", 1)[1]
            value = json.loads(bytes(row[7]))
            items.append(SearchItem(namespace=namespace, key=key, value=value, created_at=when, updated_at=when))
        return items


def measure(which: str, args: Any, n: int, singles: int, reads: int) -> dict[str, float]:
    from langgraph.store.base import PutOp

    clock = FrozenClock("2026-01-05T09:00:00Z")
    warden = None
    if which == "memwarden":
        from memwarden.integrations.langgraph import MemwardenStore

        location = fresh_store(args, "lgstore")
        warden = Warden(location, clock=clock)
        store: Any = MemwardenStore(warden.acting_as(AGENT), tenant="acme")
    elif which == "save":
        warden = Warden(fresh_store(args, "lgsave"), clock=clock)
    elif which == "sqlite":
        from _common import scratch_dir
        from langgraph.store.sqlite import SqliteStore

        conn = sqlite3.connect(scratch_dir("lgbench-sqlite-") / "lg.db", check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        store = SqliteStore(conn)
        store.setup()
    else:
        from langgraph.store.memory import InMemoryStore

        store = InMemoryStore()
    out: dict[str, float] = {}
    offset = n  # the single puts take items past the bulk's
    if which == "save":
        assert warden is not None
        out["put"] = rate(singles, lambda: [warden.save(**fields(offset + i), caller=AGENT) for i in range(singles)])
        out["batch"] = rate(
            n,
            lambda: [
                warden.save_many([fields(i) for i in range(start, min(start + 1000, n))], caller=AGENT)
                for start in range(0, n, 1000)
            ],
        )
        warden.close()
        return out

    def op(i: int) -> Any:
        namespace, key, value, ttl = item(i)
        return PutOp(namespace, key, value, ttl=ttl if store.supports_ttl else None)

    def put(i: int) -> None:
        namespace, key, value, ttl = item(i)
        store.put(namespace, key, value, ttl=ttl if store.supports_ttl else None)

    out["put"] = rate(singles, lambda: [put(offset + i) for i in range(singles)])
    out["batch"] = rate(
        n,
        lambda: [store.batch([op(i) for i in range(start, min(start + 1000, n))]) for start in range(0, n, 1000)],
    )
    if warden is not None:
        clock.advance("2m")  # the one-minute items are past their TTL
        warden.revoke({"tenant": "acme", "project": "p5"}, reason="bench", caller=OPERATOR)
    picks = random.Random(7).choices(range(n), k=reads)
    readers = {
        "get": lambda i: store.get(item(i)[0], item(i)[1]),
        "search": lambda i: store.search(item(i)[0], filter=FILTER, limit=10),
    }
    answers: dict[str, list[Any]] = {}
    if warden is None:
        for name, read in readers.items():
            out[f"{name}_p99_ms"], answers[name] = p99_ms(read, picks)
    else:
        floor = Floor(location, warden.now())
        floors = {"get": lambda i: floor.get(item(i)[0], item(i)[1]), "search": lambda i: floor.search(item(i)[0])}
        for name, read in readers.items():
            # memwarden and the floor take turns, a read each: both see the machine as it is at each moment
            timings = paired(read, floors[name], picks)
            for label, (p99, found) in zip((name, f"floor_{name}"), timings, strict=True):
                out[f"{label}_p99_ms"], answers[label] = p99, found
    served = [x for x in answers["get"] if x is not None] + [x for page in answers["search"] for x in page]
    # what no answer may hold: an item past its TTL, or of the revoked namespace
    out["expired_served"] = sum(1 for x in served if int(x.key[1:]) % 5 == 0)
    out["revoked_served"] = sum(1 for x in served if x.namespace[0] == "p5")
    if warden is not None:
        pages = [[(x.key, x.value) for x in page] for page in answers["search"]]
        gets = [x and x.value for x in answers["get"]]
        floor_pages = [[(x.key, x.value) for x in page] for page in answers["floor_search"]]
        out["floor_agrees"] = float(pages == floor_pages and gets == [x and x.value for x in answers["floor_get"]])
        warden.close()
    return out


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    n, singles = sized(args, full=(100_000, 2000), quick=(10_000, 500), smoke=(1_000, 20))
    reads = sized(args, full=2000, quick=2000, smoke=50)
    runs = args.repeat or (1 if args.quick or args.smoke else 3)
    results: dict[str, list[dict[str, float]]] = {k: [] for k in ("memwarden", "save", "sqlite", "memory")}
    for _ in range(runs):
        for which in results:  # alternating, run by run: each sees the same machine
            results[which].append(measure(which, args, n, singles, reads))

    def med(which: str, key: str) -> float:
        values = iter([r[key] for r in results[which]])
        return median_of(len(results[which]), lambda: next(values))

    mw = lambda key: med("memwarden", key)  # noqa: E731
    metrics = [
        Metric("get p99, MemwardenStore", mw("get_p99_ms"), "ms", mw("floor_get_p99_ms"),
               mw("get_p99_ms") / mw("floor_get_p99_ms"), "<= 1.5x the raw-SQL floor's",
               mw("get_p99_ms") <= 1.5 * mw("floor_get_p99_ms")),
        Metric("filtered search p99, MemwardenStore", mw("search_p99_ms"), "ms", mw("floor_search_p99_ms"),
               mw("search_p99_ms") / mw("floor_search_p99_ms"), "<= 1.5x the raw-SQL floor's",
               mw("search_p99_ms") <= 1.5 * mw("floor_search_p99_ms")),
        Metric("expired items served, MemwardenStore", mw("expired_served"), "items", None, None, "0",
               mw("expired_served") == 0),
        Metric("revoked items served, MemwardenStore", mw("revoked_served"), "items", None, None, "0",
               mw("revoked_served") == 0),
        Metric("the floor answers as MemwardenStore (check)", mw("floor_agrees"), "1 = yes", None, None, "1",
               mw("floor_agrees") == 1),
        Metric("put rate, MemwardenStore", mw("put"), "puts/s", med("save", "put"),
               mw("put") / med("save", "put"), ">= 0.8x memwarden's save", mw("put") >= 0.8 * med("save", "put")),
        Metric("batch put rate, MemwardenStore", mw("batch"), "puts/s", med("save", "batch"),
               mw("batch") / med("save", "batch"), ">= 0.8x memwarden's batch",
               mw("batch") >= 0.8 * med("save", "batch")),
        Metric("get p99, SqliteStore (peer)", med("sqlite", "get_p99_ms"), "ms", None, None, "-", True),
        Metric("filtered search p99, SqliteStore (peer)", med("sqlite", "search_p99_ms"), "ms", None, None, "-", True),
        Metric("get p99, InMemoryStore (peer)", med("memory", "get_p99_ms"), "ms", None, None, "-", True),
        Metric("filtered search p99, InMemoryStore (peer)", med("memory", "search_p99_ms"), "ms", None, None, "-",
               True),
        Metric("put rate, SqliteStore (peer)", med("sqlite", "put"), "puts/s", None, None, "-", True),
        Metric("batch put rate, SqliteStore (peer)", med("sqlite", "batch"), "puts/s", None, None, "-", True),
        Metric("expired items served, SqliteStore (peer: no sweep ran)", med("sqlite", "expired_served"), "items",
               None, None, "-", True),
    ]  # fmt: skip
    title = f"LangGraph's BaseStore over memwarden ({n:,} items, {args.backend}, median of {runs})"
    report(title, metrics, args.json_path)


if __name__ == "__main__":
    main()
