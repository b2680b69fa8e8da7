"""The usable-memory view: memories, their text index, revocations, policies.

Its text index's documents are written by ``_fts_documents``.

One projection, because a memory's status depends on the revocations and
policies that came before it in the log: folding them together keeps the
order of the log. Its rows change only through ``fold_memory`` (one
memory, one event, in ``_fold``) and its set forms here: ``_revoke`` (a
revocation's selector as one UPDATE) and ``_set_form`` (a batch of
invalidations, or of expiries, as one statement), which tests hold equal
to the fold.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

from memwarden.events import RecordedEvent, canonical_json, version_key
from memwarden.events.sqlite import column_types, has_table

from ._fold import COLUMNS, TERMINAL_SQL, fold_memory
from ._fts_documents import TextSource, drop_documents, external_index, fill_documents, stored_texts, write_documents
from ._fts_keys import is_keyed, keying, make_key
from ._revocation_cache import RevocationCache
from ._rows import QUOTED_COLUMNS, SELECT_MEMORIES, Connection, Key, fetch_row_dicts, on_sqlite
from ._selector import Revocation, selector_sql
from ._text_index import drop_text_index
from ._usable_schema import FTS_EXTERNAL, FTS_OWN, FTS_SOURCE, INDEXES, SCHEMA, TABLES

# the view's rows by memory, as a batch holds them (None: no row)
Rows = dict[Key, dict[str, Any] | None]

_UPSERT = (
    f"INSERT INTO memories (mid, {QUOTED_COLUMNS}) "
    f"VALUES (?, {', '.join('?' * len(COLUMNS))}) ON CONFLICT(tenant, memory_id) DO UPDATE SET "
    + ", ".join(f'"{c}" = excluded."{c}"' for c in COLUMNS if c not in ("tenant", "memory_id"))
)
_values = operator.itemgetter(*COLUMNS)


def invalidation_update(source: str) -> str:
    """``fold_memory``'s ``memory.invalidated`` branch as an UPDATE of the
    memories that ``source`` (why, seq, memory_id, version, tenant) names.
    The right-hand sides all read the row as it was before the statement,
    so each column takes the branch's value or keeps its own."""
    j = source
    taken = f"memories.version = {j}.version AND status <> 'erased' AND status <> 'revoked'"  # no IN: see RECHECK
    return (
        f"UPDATE memories SET status = CASE WHEN {taken} THEN 'invalidated' ELSE status END, "
        f"reason = CASE WHEN {taken} THEN {j}.why ELSE reason END, "
        f"invalidation_reason = CASE WHEN {taken} THEN {j}.why ELSE invalidation_reason END, "
        f"invalidated_by = CASE WHEN {taken} THEN {j}.seq ELSE invalidated_by END, "
        f"last_seq = {j}.seq FROM {j} WHERE memories.tenant = {j}.tenant AND memories.memory_id = {j}.memory_id"
    )


def expiry_update(source: str) -> str:
    """``fold_memory``'s ``memory.expired`` branch as an UPDATE of the
    memories that ``source`` (why = the event's expires_at, seq, memory_id,
    version, tenant) names: a usable row of that version and that expiry
    becomes expired; every named row takes the event's seq."""
    j = source
    taken = f"memories.version = {j}.version AND status = 'usable' AND memories.expires_at = {j}.why"
    return (
        f"UPDATE memories SET status = CASE WHEN {taken} THEN 'expired' ELSE status END, "
        f"reason = CASE WHEN {taken} THEN 'expired' ELSE reason END, "
        f"last_seq = {j}.seq FROM {j} WHERE memories.tenant = {j}.tenant AND memories.memory_id = {j}.memory_id"
    )


# the events whose batches apply as one UPDATE (an expiry sweep, a
# derivation cascade): the event's text for the ``why`` column, and the UPDATE
SET_FORMS: dict[str, tuple[str, Callable[[str], str]]] = {
    "memory.invalidated": ("reason", invalidation_update),
    "memory.expired": ("expires_at", expiry_update),
}


# -- applying to tables -----------------------------------------------------


class UsableProjection:
    """Projection ``usable``: tables memories, memories_fts, revocations, policies."""

    name = "usable"
    tables = TABLES
    # (tenant, memory_id) of every memory the text index holds
    INDEXED = "SELECT m.tenant, m.memory_id FROM memories_fts f JOIN memories m ON m.mid = f.rowid"

    def __init__(self, text_source: TextSource | None = stored_texts) -> None:
        self.text_source = text_source
        self.revocations = RevocationCache()

    def outdated(self, conn: Connection) -> bool:
        """Whether the tables are of an older layout (memory ids global, the
        summary in the row, numbered policy versions only): they are dropped
        and rebuilt from the log."""
        columns = column_types(on_sqlite(conn), "memories")
        derivation_columns = column_types(on_sqlite(conn), "derivations")
        return bool(columns) and (
            "revoked_until" not in columns
            or "summary" in columns
            or "tenant" not in derivation_columns
            or columns["revocation_version"] != "TEXT"
            or not column_types(on_sqlite(conn), "derivations_ever")
        )

    def create(self, conn: Connection, *, indexes: bool = True) -> None:
        # a text index of before its words were keyed by tenant, or by
        # tenant alone and not by agent too (_fts_keys)
        unkeyed = has_table(on_sqlite(conn), "memories_fts") and not is_keyed(on_sqlite(conn))
        external = self._reads_texts(conn)
        # a store's index of before it read its documents from the view
        # holds a copy of every text: written again without it
        copied = external and has_table(on_sqlite(conn), "memories_fts") and not external_index(conn)
        for statement in SCHEMA:
            if statement is FTS_OWN and external:
                conn.execute(FTS_SOURCE)
                if not copied:
                    conn.execute(FTS_EXTERNAL)
                continue
            conn.execute(statement)
        make_key(conn)
        if external:
            keying(conn)
        if unkeyed or copied:
            self.rekey(conn)
        if indexes:
            self.create_indexes(conn)

    def _reads_texts(self, conn: Connection) -> bool:
        """Whether the index reads its documents from this database's texts (``FTS_SOURCE``)."""
        return self.text_source is stored_texts and has_table(on_sqlite(conn), "texts")

    def rekey(self, conn: Connection) -> None:
        """Write the text index again, every word keyed: dropped whole (no
        segment of the old one left behind), with a new key of this shape,
        and filled from the view and the text store, where an erased memory
        has no text and no row."""
        drop_text_index(conn, "memories_fts")
        conn.execute(FTS_EXTERNAL if self._reads_texts(conn) else FTS_OWN)
        conn.execute("DROP TABLE IF EXISTS text_index_key")
        make_key(conn)
        fill_documents(conn, self.text_source)

    def create_indexes(self, conn: Connection) -> None:
        for statement in INDEXES:
            conn.execute(statement)

    def drop(self, conn: Connection) -> None:
        for table in TABLES:
            if table == "memories_fts":
                drop_text_index(conn, table)
                conn.execute("DROP VIEW IF EXISTS memories_fts_source")
            else:
                conn.execute(f"DROP TABLE IF EXISTS {table}")

    def apply(self, conn: Connection, events: Sequence[RecordedEvent], *, bulk: bool = False) -> None:
        """Fold ``events`` into the tables. With ``bulk``, the text index is
        left for ``finish_bulk`` (a rebuild fills it in one statement)."""
        kinds = {e.type for e in events}
        if len(kinds) == 1 and (kind := next(iter(kinds))) in SET_FORMS:
            # the derivation cascade and the expiry sweep write thousands of
            # these in one commit
            self._set_form(conn, events, *SET_FORMS[kind])
            return
        tenants = {e.payload["tenant"] for e in events if e.type.startswith("memory.")}
        # a batch of one tenant (a save) folds with only what may cover it
        revocations = self.revocations.load(conn, next(iter(tenants)) if len(tenants) == 1 else None)
        keys = list({(e.payload["tenant"], e.payload["memory_id"]) for e in events if e.type.startswith("memory.")})
        pending: Rows = fetch_row_dicts(conn, keys)
        stored = dict(pending)  # the rows as the table holds them (fold never mutates a row)
        # a dict for its order: new rows take their mids in log order, the
        # same in a rebuild as live
        changed: dict[Key, None] = {}
        fts: list[tuple[Key, str]] = []  # (memory, "index" | "drop")
        links: dict[Key, list[dict[str, Any]]] = {}  # child -> its parents, when they change
        ever: set[tuple[str, str, str]] = set()  # (tenant, parent_id, child_id) of derivations_ever
        for event in events:
            kind = event.type
            if kind.startswith("memory."):
                key = (event.payload["tenant"], event.payload["memory_id"])
                old = pending.get(key)
                new = fold_memory(old, event, revocations)
                if (
                    kind == "memory.saved"
                    and new is not None
                    and new["status"] != "erased"
                    and (event.payload.get("derived_from") or (old is not None and old["derived_from"] != "[]"))
                ):
                    links[key] = list(event.payload.get("derived_from") or [])
                    # every parent ever named, kept even when a later save in
                    # this batch names others (``links`` keeps only the last)
                    ever.update((key[0], ref["memory_id"], key[1]) for ref in links[key])
                if new is not None:
                    pending[key] = new
                    changed[key] = None
                    if kind == "memory.saved" and new["status"] != "erased":
                        fts.append((key, "index"))
                    elif kind == "memory.erased":
                        fts.append((key, "drop"))
            elif kind == "revocation.issued":
                self._flush(conn, pending, stored, changed, fts, links, bulk)
                revocations.append(self._revoke(conn, event))
                # the revocation may have changed rows held here: re-read them
                pending = fetch_row_dicts(conn, list(pending))
                stored = dict(pending)
                changed, fts, links = {}, [], {}
            elif kind == "policy.version_changed":
                p = event.payload
                version, previous = version_key(p["version"]), version_key(p["previous_version"])
                if conn.execute(
                    "SELECT 1 FROM retired_versions WHERE policy = ? AND version = ?", (p["policy"], version)
                ).fetchone():
                    # a retired version never becomes current again, even in a
                    # log written before appends were judged (AppendRules)
                    continue
                conn.execute(
                    "INSERT INTO policies (policy, version, previous_version, changed_at, seq) VALUES (?,?,?,?,?) "
                    "ON CONFLICT(policy) DO UPDATE SET version=excluded.version, "
                    "previous_version=excluded.previous_version, changed_at=excluded.changed_at, seq=excluded.seq",
                    (p["policy"], version, previous, event.recorded_at, event.seq),
                )
                conn.execute(
                    "INSERT INTO retired_versions (policy, version, retired_seq) VALUES (?,?,?) ON CONFLICT DO NOTHING",
                    (p["policy"], previous, event.seq),
                )
            elif kind in ("readback.confirmed", "readback.failed"):
                p = event.payload
                conn.execute(
                    "UPDATE revocations SET readback_status=?, readback_seq=?, readback_latency_ms=?, "
                    "still_visible=?, leaked_ids=? WHERE revocation_id=?",
                    (
                        "confirmed" if kind == "readback.confirmed" else "failed",
                        event.seq,
                        p["latency_ms"],
                        p["still_visible"],
                        canonical_json(p.get("leaked_ids") or []),
                        p["revocation_id"],
                    ),
                )
        self._flush(conn, pending, stored, changed, fts, links, bulk)
        if ever:
            conn.executemany(
                "INSERT INTO derivations_ever (tenant, parent_id, child_id) VALUES (?,?,?) ON CONFLICT DO NOTHING",
                sorted(ever),
            )

    def _revoke(self, conn: Connection, event: RecordedEvent) -> Revocation:
        p = event.payload
        where, params = selector_sql(p["selector"])
        # revoke_row's statement: every right-hand side reads the row as it was
        later = "revoked_until IS NULL OR revoked_until <= ?"
        cursor = conn.execute(
            f"UPDATE memories SET status='revoked', reason='revoked', revoked_by=?, last_seq=?, "
            f"revoked_until = CASE WHEN {later} THEN ? ELSE revoked_until END, "
            f"last_revocation = CASE WHEN {later} THEN ? ELSE last_revocation END "
            f"WHERE ({where}) AND status NOT IN {TERMINAL_SQL}",
            [
                p["revocation_id"],
                event.seq,
                p["effective_at"],
                p["effective_at"],
                p["effective_at"],
                p["revocation_id"],
                *params,
            ],
        )
        conn.execute(
            "INSERT INTO revocations (revocation_id, seq, selector, reason, issued_by, effective_at, "
            "recorded_at, covered) VALUES (?,?,?,?,?,?,?,?)",
            (
                p["revocation_id"],
                event.seq,
                canonical_json(p["selector"]),
                p["reason"],
                p["issued_by"],
                p["effective_at"],
                event.recorded_at,
                cursor.rowcount,
            ),
        )
        return Revocation.issued(event)

    def _set_form(
        self, conn: Connection, events: Sequence[RecordedEvent], why: str, update: Callable[[str], str]
    ) -> None:
        """``fold_memory``'s branch for a batch of one kind of event
        (``SET_FORMS``), as one statement instead of a read, a fold and a
        write per memory. The
        right-hand sides all read the row as it was before the statement, so
        each column takes the branch's value or keeps its own.
        ``tests/sqlite/test_sqlite_projections.py`` holds each equal to the fold."""
        # One statement per run of distinct memories (not executemany:
        # 10,000 executions cost a third more than one). A target row
        # matched twice in one UPDATE takes one source row at random, so a
        # memory invalidated twice starts a new run, and runs apply in log
        # order like the fold.
        run: list[tuple[Any, ...]] = []
        in_run: set[Key] = set()
        for e in events:
            key = (e.payload["tenant"], e.payload["memory_id"])
            if key in in_run:
                self._run(conn, run, update)
                run, in_run = [], set()
            run.append((e.payload[why], e.seq, key[1], e.payload["version"], key[0]))
            in_run.add(key)
        self._run(conn, run, update)

    def _run(self, conn: Connection, run: list[tuple[Any, ...]], update: Callable[[str], str]) -> None:
        """One UPDATE for a run of (reason, seq, memory_id, version, tenant),
        each naming a distinct memory: SQLite reads them from ``json_each``.
        The CTE is materialised so each element's JSON is parsed once, not
        once per column that reads it (a tenth of the statement)."""
        sql = (
            "WITH j AS MATERIALIZED (SELECT value ->> 0 AS why, value ->> 1 AS seq, value ->> 2 AS memory_id, "
            "value ->> 3 AS version, value ->> 4 AS tenant FROM json_each(?)) "
            f"{update('j')}"
        )
        conn.execute(sql, (canonical_json(run, floats=False),))

    def _flush(
        self,
        conn: Connection,
        pending: Rows,
        stored: Rows,
        changed: dict[Key, None],
        fts: list[tuple[Key, str]],
        links: dict[Key, list[dict[str, Any]]],
        bulk: bool,
    ) -> None:
        if not changed:
            return
        if not bulk:
            self._unindex(conn, fts, stored)
        # new rows are inserted whole; a stored row gets only its changed
        # columns, so SQLite rewrites only the indexes over those columns
        inserts: list[tuple[Any, ...]] = []
        updates: dict[tuple[str, ...], list[list[Any]]] = {}
        for key in changed:
            row, before = pending[key], stored.get(key)
            if row is None:
                continue
            if before is None:
                inserts.append(_values(row))
                continue
            columns = tuple(c for c in COLUMNS if row[c] != before[c])
            if columns:
                updates.setdefault(columns, []).append([*(row[c] for c in columns), *key])
        if inserts:
            base = conn.execute("SELECT coalesce(max(mid), 0) FROM memories").fetchone()[0]
            conn.executemany(_UPSERT, [(base + n, *values) for n, values in enumerate(inserts, start=1)])
        for columns, values in updates.items():
            assignments = ", ".join(f'"{c}" = ?' for c in columns)
            conn.executemany(f"UPDATE memories SET {assignments} WHERE tenant = ? AND memory_id = ?", values)
        if links:
            conn.executemany("DELETE FROM derivations WHERE tenant = ? AND child_id = ?", list(links))
            conn.executemany(
                "INSERT INTO derivations (tenant, child_id, parent_id, parent_version) VALUES (?,?,?,?)",
                [(t, c, p["memory_id"], p["version"]) for (t, c), parents in links.items() for p in parents],
            )
        if not bulk:
            self._index(conn, fts, pending, stored)

    def _unindex(self, conn: Connection, fts: list[tuple[Key, str]], stored: Rows) -> None:
        drop_documents(conn, self.text_source, fts, stored)

    def _index(self, conn: Connection, fts: list[tuple[Key, str]], pending: Rows, stored: Rows) -> None:
        write_documents(conn, self.text_source, fts, pending, stored)

    def finish_bulk(self, conn: Connection) -> None:
        self.create_indexes(conn)
        fill_documents(conn, self.text_source)

    def digest_rows(self, conn: Connection) -> dict[str, list[tuple[Any, ...]]]:
        """Comparable content of every table, in key order (no rowids)."""
        return {
            "memories": conn.execute(f"{SELECT_MEMORIES} ORDER BY tenant, memory_id").fetchall(),
            "revocations": conn.execute(
                "SELECT revocation_id, seq, selector, reason, issued_by, effective_at, recorded_at, covered, "
                "readback_status, readback_seq, readback_latency_ms, still_visible, leaked_ids "
                "FROM revocations ORDER BY revocation_id"
            ).fetchall(),
            "policies": conn.execute("SELECT * FROM policies ORDER BY policy").fetchall(),
            "retired_versions": conn.execute("SELECT * FROM retired_versions ORDER BY policy, version").fetchall(),
            "derivations": conn.execute(
                "SELECT tenant, child_id, parent_id, parent_version FROM derivations "
                "ORDER BY tenant, child_id, parent_id"
            ).fetchall(),
            "derivations_ever": conn.execute(
                "SELECT tenant, parent_id, child_id FROM derivations_ever ORDER BY tenant, parent_id, child_id"
            ).fetchall(),
            # the indexed texts come from the text store, not the log: which
            # memories are indexed is what the log decides
            "memories_fts": conn.execute(f"{self.INDEXED} ORDER BY m.tenant, m.memory_id").fetchall(),
        }
