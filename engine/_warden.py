"""The Warden: memwarden's Python API. Every face (CLI, HTTP, MCP) speaks to it."""

from __future__ import annotations

import functools
import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import structlog
from memwarden.events import (
    BlobStore,
    Clock,
    MemoryErased,
    MemoryIntegrityFailed,
    MemoryResynced,
    MemorySaved,
    ParentRef,
    PolicyVersionChanged,
    RevocationIssued,
    Scope,
    Selector,
    SQLiteEventLog,
    SystemClock,
    actual_checksum,
    content_checksum,
    format_ts,
    new_id,
    parse_duration,
    parse_ts,
)
from memwarden.events._sqlite import Synchronous
from memwarden.projections import (
    CheckResult,
    Projector,
    current_policies,
    fetch_row,
    load_revocations,
    revocation_blocks,
    select_rows,
    select_rows_with_text,
    selector_covers,
    weekly,
)

from . import _history, _verify
from ._derivation import Judge, ancestors, cascade
from ._errors import (
    ChecksumMismatch,
    FetchFailed,
    InvalidInput,
    MemoryNotFound,
    RevocationNotFound,
    RevokedScope,
    StaleView,
)
from ._errors import MemoryErased as MemoryErasedError
from ._fetchers import Fetchers
from ._gate import Decision, ParentState, decide
from ._policy import TtlPolicy
from ._validation import build
from ._views import DueItem, ImportResult, MemoryView, RevocationResult, SaveResult, VerifyResult

log = structlog.get_logger("memwarden")

# A fetch claimed to be this far in the future is a clock problem or a lie.
MAX_CLOCK_SKEW = timedelta(minutes=5)
MAX_LIMIT = 10_000


def _records_refusal(save: Callable[..., SaveResult]) -> Callable[..., SaveResult]:
    """Every refused save leaves a ``save_refused`` log line naming why."""

    @functools.wraps(save)
    def wrapper(self: Warden, **kwargs: Any) -> SaveResult:
        try:
            return save(self, **kwargs)
        except (ValueError, PermissionError) as exc:
            memory_id = kwargs.get("memory_id")
            log.warning(
                "save_refused",
                memory_id=memory_id if isinstance(memory_id, str) else None,
                error=type(exc).__name__,
                problem=str(exc),
                revocation_id=getattr(exc, "revocation_id", None),
            )
            raise

    return wrapper


class Warden:
    """Decides whether a remembered fact may be used now.

    Open one per process (or per thread); it owns a connection to the
    database at ``path``. Writes are serialised across processes by
    SQLite's write lock; reads see committed state.
    """

    def __init__(
        self,
        path: str | Path = "memwarden.db",
        *,
        clock: Clock | None = None,
        policy: TtlPolicy | None = None,
        fetchers: Fetchers | None = None,
        synchronous: Synchronous = "FULL",
    ) -> None:
        self.path = str(path)
        self.clock: Clock = clock or SystemClock()
        self.policy = policy or TtlPolicy()
        self.fetchers = fetchers or Fetchers()
        self.projector = Projector()
        # called with each revocation id after it commits (the scheduler's
        # immediate read-back hooks in here)
        self.revocation_listeners: list[Callable[[str], None]] = []
        self.log = SQLiteEventLog(
            path, clock=self.clock, synchronous=synchronous, subscribers=[self.projector.on_append]
        )
        self.conn = self.log.conn
        self.log.reactors.append(cascade)
        with self.log.transaction() as tx:
            self.projector.install(tx.conn)
            self.blobs = BlobStore(tx.conn)
        if self.projector.position(self.conn) < self.log.head().seq:
            # a copied database or a new projection: catch up before serving
            self.projector.catch_up(self.conn, lambda after: self.log.read(after_seq=after))

    def close(self) -> None:
        self.log.close()

    def file_problems(self) -> list[str]:
        """What SQLite's own check finds wrong with the database file (the
        hash chain cannot see damage to the projections or the blobs)."""
        try:
            with self.log.lock:
                rows = self.conn.execute("PRAGMA quick_check").fetchall()
        except sqlite3.DatabaseError as exc:
            return [str(exc)]
        problems = [r[0] for r in rows if r[0] != "ok"]
        if problems:
            log.error("database_damaged", path=self.path, problems=problems[:10])
        return problems

    def __enter__(self) -> Warden:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- time and freshness ---------------------------------------------------

    def now(self) -> str:
        return format_ts(self.clock.now())

    @contextmanager
    def reading(self, min_seq: int | None = None, wait: float = 2.0) -> Iterator[sqlite3.Connection]:
        """A consistent read of a view that has applied at least ``min_seq``."""
        deadline = time.monotonic() + wait
        while True:
            with self.log.snapshot() as conn:
                have = self.projector.position(conn)
                if min_seq is None or have >= min_seq:
                    yield conn
                    return
            if time.monotonic() >= deadline:
                raise StaleView(have, min_seq)
            time.sleep(0.02)

    def _policy_version(self, conn: sqlite3.Connection, policy: str) -> int:
        row = conn.execute("SELECT version FROM policies WHERE policy = ?", (policy,)).fetchone()
        return row[0] if row else 1

    # -- save -------------------------------------------------------------------

    @_records_refusal
    def save(
        self,
        *,
        memory_id: str,
        kind: str,
        summary: str,
        content: str,
        source_url: str,
        scope: Scope | dict[str, Any],
        fetched_at: datetime | str | None = None,
        expires_at: datetime | str | None = None,
        ttl: timedelta | str | None = None,
        verified_at: datetime | str | None = None,
        source: str | None = None,
        repo: str | None = None,
        branch: str | None = None,
        policy: str = "default",
        revocation_version: int | None = None,
        checksum: str | None = None,
        derived_from: Sequence[str | ParentRef | dict[str, Any]] = (),
        cache_key: dict[str, Any] | None = None,
        actor: str = "agent",
        event_id: str | None = None,
    ) -> SaveResult:
        """Record a memory (a new version if the id exists) with its provenance.

        A refused save (bad input, a revoked scope, an erased memory) raises
        and is recorded as a ``save_refused`` log line; the log is unchanged.
        """
        if not isinstance(content, str):
            raise InvalidInput("content", "must be text")
        actual = content_checksum(content)
        if checksum is not None and checksum != actual:
            raise ChecksumMismatch("checksum", checksum, actual)
        now = self.clock.now()
        fetched = _when("fetched_at", fetched_at) or now
        if fetched > now + MAX_CLOCK_SKEW:
            raise InvalidInput("fetched_at", f"{format_ts(fetched)} is in the future (now is {format_ts(now)})")
        expires = self._expiry(kind, fetched, expires_at, ttl)
        scope_model = scope if isinstance(scope, Scope) else build(Scope, "scope", **(scope or {}))

        with self.log.transaction() as tx:
            conn = tx.conn
            row = fetch_row(conn, memory_id) if isinstance(memory_id, str) else None
            if row is not None and row["status"] == "erased":
                raise MemoryErasedError(memory_id)
            current = self._policy_version(conn, policy) if isinstance(policy, str) else 1
            if revocation_version is None:
                revocation_version = current
            elif revocation_version != current:
                raise InvalidInput(
                    "revocation_version",
                    f"policy {policy!r} is at version {current}; a memory is saved under the current version "
                    f"(got {revocation_version})",
                )
            parents = self._evidence(conn, memory_id, derived_from) if derived_from else ()
            event = build(
                MemorySaved,
                memory_id=memory_id,
                version=(row["version"] + 1) if row else 1,
                kind=kind,
                summary=summary,
                content_checksum=actual,
                content_length=len(content.encode("utf-8")),
                source_url=source_url,
                source=source,
                repo=repo,
                branch=branch,
                fetched_at=fetched,
                expires_at=expires,
                verified_at=_when("verified_at", verified_at),
                scope=scope_model,
                policy=policy,
                revocation_version=revocation_version,
                derived_from=parents,
                cache_key=cache_key,
                actor=actor,
                **({"event_id": event_id} if event_id else {}),
            )
            self._refuse_if_revoked(conn, event)
            self.blobs.put(content)
            seq = tx.append([event])[0]
        log.info("memory_saved", memory_id=memory_id, version=event.version, seq=seq, kind=kind)
        return SaveResult(memory_id, event.version, actual, seq, format_ts(expires) if expires else None)

    def _evidence(
        self, conn: sqlite3.Connection, memory_id: str, derived_from: Sequence[str | ParentRef | dict[str, Any]]
    ) -> tuple[ParentRef, ...]:
        """The parents of a new memory: each must exist and be usable now (a
        conclusion cannot be drawn from evidence that may not be used), and
        none may descend from the memory itself."""
        if isinstance(derived_from, str):
            derived_from = [derived_from]
        judge = Judge(conn, self.now(), current_policies(conn))
        refs: list[ParentRef] = []
        for item in derived_from:
            parent_id = (
                item
                if isinstance(item, str)
                else (item.memory_id if isinstance(item, ParentRef) else item.get("memory_id"))
            )
            if not isinstance(parent_id, str) or not parent_id:
                raise InvalidInput("derived_from", "each parent must be a memory id")
            if parent_id == memory_id:
                raise InvalidInput("derived_from", f"memory {memory_id!r} cannot be derived from itself")
            parent = judge.row(parent_id)
            if parent is None:
                raise InvalidInput("derived_from", f"parent {parent_id!r} does not exist")
            decision = judge.decide(parent)
            if not decision.usable:
                raise InvalidInput(
                    "derived_from",
                    f"parent {parent_id!r} is not usable ({decision.reason}): nothing may be drawn from it",
                )
            if parent_id not in {r.memory_id for r in refs}:
                refs.append(ParentRef(memory_id=parent_id, version=parent["version"]))
        if memory_id in ancestors(conn, [r.memory_id for r in refs]):
            raise InvalidInput(
                "derived_from", f"a cycle: memory {memory_id!r} is already evidence for one of its parents"
            )
        return tuple(refs)

    def _expiry(
        self, kind: str, fetched: datetime, expires_at: datetime | str | None, ttl: timedelta | str | None
    ) -> datetime | None:
        if expires_at is not None and ttl is not None:
            raise InvalidInput("ttl", "give either expires_at or ttl, not both")
        if expires_at is not None:
            return _when("expires_at", expires_at)
        if ttl is not None:
            try:
                return fetched + (parse_duration(ttl) if isinstance(ttl, str) else ttl)
            except ValueError as exc:
                raise InvalidInput("ttl", str(exc)) from None
        rule_ttl = self.policy.ttl_for(kind) if isinstance(kind, str) else None
        return None if rule_ttl is None else fetched + rule_ttl

    def _refuse_if_revoked(self, conn: sqlite3.Connection, event: MemorySaved) -> None:
        """No resurrection: a fetch older than a revocation covering it is refused."""
        fetched = format_ts(event.fetched_at)
        candidate = {
            "memory_id": event.memory_id,
            "kind": event.kind,
            "source_url": event.source_url,
            **event.scope.model_dump(),
        }
        if event.cache_key and not candidate.get("tool"):
            candidate["tool"] = event.cache_key.tool
        for rev in load_revocations(conn):
            if revocation_blocks(rev["effective_at"], fetched) and selector_covers(rev["selector"], candidate):
                raise RevokedScope(event.memory_id, rev["revocation_id"], rev["effective_at"], fetched)

    # -- reading ------------------------------------------------------------------

    def get(self, memory_id: str, *, min_seq: int | None = None) -> MemoryView:
        """One memory with its content checked against its checksum now."""
        now = self.now()
        with self.reading(min_seq) as conn:
            row = fetch_row(conn, memory_id)
            if row is None:
                raise MemoryNotFound(memory_id)
            data = self.blobs.get_bytes(row["checksum"])
            policy_version = self._policy_version(conn, row["policy"])
            parents = Judge(conn, now, current_policies(conn)).parents(row)
        view, _ = self._judge(row, data, policy_version, now, parents)
        return view

    def _judge(
        self,
        row: dict[str, Any],
        data: bytes | None,
        policy_version: int,
        now: str | None = None,
        parents: Sequence[ParentState] = (),
    ) -> tuple[MemoryView, bool]:
        """Apply the gate to one row whose blob bytes were read (and whose
        evidence was judged); on a checksum mismatch, record it, quarantine,
        and try a resync."""
        now = now or self.now()
        if row["status"] in ("erased", "revoked"):
            decision = decide(row, now=now, policy_version=policy_version, parents=parents)
            return MemoryView.of(row, decision, None), True
        ok = actual_checksum(data) == row["checksum"]
        if not ok or row["status"] == "quarantined":
            row, ok, text = self._integrity(row, data, ok)
            decision = decide(row, now=now, policy_version=policy_version, content_ok=ok, parents=parents)
            return MemoryView.of(row, decision, text if ok else None), ok
        decision = decide(row, now=now, policy_version=policy_version, content_ok=True, parents=parents)
        return MemoryView.of(row, decision, data.decode("utf-8") if data is not None else None), True

    def _integrity(self, row: dict[str, Any], data: bytes | None, ok: bool) -> tuple[dict[str, Any], bool, str | None]:
        memory_id = row["memory_id"]
        if not ok and row["status"] != "quarantined":
            log.error("integrity_failed", memory_id=memory_id, expected=row["checksum"], actual=actual_checksum(data))
            with self.log.transaction() as tx:
                current = fetch_row(tx.conn, memory_id)
                if current is not None and current["status"] not in ("quarantined", "erased", "revoked"):
                    tx.append(
                        [
                            MemoryIntegrityFailed(
                                memory_id=memory_id,
                                version=current["version"],
                                expected_checksum=current["checksum"],
                                actual_checksum=actual_checksum(data),
                                actor="memwarden",
                            )
                        ]
                    )
        # Resync: the memory's own source may still hold the recorded text.
        try:
            text = self.fetchers.fetch(row)
        except FetchFailed as exc:
            log.warning("resync_failed", memory_id=memory_id, problem=str(exc))
            text = None
        if text is None and ok:
            text = data.decode("utf-8") if data is not None else None  # the blob was restored meanwhile
        with self.log.transaction() as tx:
            current = fetch_row(tx.conn, memory_id)
            if (
                text is not None
                and current is not None
                and content_checksum(text) == current["checksum"]
                and current["status"] == "quarantined"
            ):
                self.blobs.replace(current["checksum"], text)
                tx.append(
                    [
                        MemoryResynced(
                            memory_id=memory_id,
                            version=current["version"],
                            content_checksum=current["checksum"],
                            resynced_from=self.fetchers.describe(current),
                            actor="memwarden",
                        )
                    ]
                )
                log.info("memory_resynced", memory_id=memory_id)
                return fetch_row(tx.conn, memory_id) or current, True, text
        return current or row, False, None

    def query(
        self,
        *,
        tenant: str,
        project: str | None = None,
        permission: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        tool: str | None = None,
        kind: str | None = None,
        text: str | None = None,
        include_unusable: bool = False,
        limit: int = 100,
        min_seq: int | None = None,
        with_content: bool = True,
        ids: Sequence[str] | None = None,
    ) -> list[MemoryView]:
        """Usable memories in a scope, newest first; with ``include_unusable``,
        every memory in it and why it is not usable. ``ids`` narrows the
        scope to those memories (read-back uses it to ask about exactly the
        memories a revocation covers, through this same path)."""
        if not isinstance(tenant, str) or not tenant:
            raise InvalidInput("tenant", "is required")
        if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput("limit", f"must be between 1 and {MAX_LIMIT}")
        clauses = ["tenant = ?"]
        params: list[Any] = [tenant]
        for column, value in (
            ("project", project),
            ("permission", permission),
            ('"user"', user),
            ("agent", agent),
            ("tool", tool),
            ("kind", kind),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if ids is not None:
            ids = list(ids)
            if not ids or len(ids) > MAX_LIMIT:
                raise InvalidInput("ids", f"give between 1 and {MAX_LIMIT} ids")
            clauses.append(f"memory_id IN ({','.join('?' * len(ids))})")
            params.extend(ids)
        if text is not None:
            match = fts_query(text)
            clauses.append("mid IN (SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?)")
            params.append(match)
        now = self.now()
        if not include_unusable:
            # an index-friendly prefilter; the gate below still decides
            clauses.append("status = 'usable' AND (expires_at IS NULL OR expires_at > ?)")
            params.append(now)
        where = " AND ".join(clauses)
        views: list[MemoryView] = []
        offset = 0
        while len(views) < limit:
            page = max(limit - len(views), 16)
            with self.reading(min_seq) as conn:
                pairs = select_rows_with_text(
                    conn, where, [*params, page, offset], "ORDER BY m.last_seq DESC LIMIT ? OFFSET ?"
                )
                policies = current_policies(conn)
                judge = Judge(conn, now, policies)
                evidence = {r["memory_id"]: judge.parents(r) for r, _ in pairs if r["derived_from"] != "[]"}
            rows = [r for r, _ in pairs]
            for row, data in pairs:
                view, _ = self._judge(
                    row,
                    data,
                    policies.get(row["policy"], 1),
                    now,
                    evidence.get(row["memory_id"], ()),
                )
                if not with_content:
                    view = _without_content(view)
                if include_unusable or view.usable:
                    views.append(view)
                    if len(views) >= limit:
                        break
            if len(rows) < page:
                break
            offset += page
        return views

    def search_ids(self, text: str, *, tenant: str | None = None) -> list[str]:
        """Ids of memories whose summary or text match (any status): the raw
        text-index path, used by read-back to prove nothing leaks there."""
        with self.reading() as conn:
            sql = (
                "SELECT m.memory_id, m.status FROM memories_fts f JOIN memories m ON m.mid = f.rowid "
                "WHERE memories_fts MATCH ?"
            )
            params: list[Any] = [fts_query(text)]
            if tenant is not None:
                sql += " AND m.tenant = ?"
                params.append(tenant)
            return [r[0] for r in conn.execute(sql, params)]

    # -- revocation and policy ------------------------------------------------------

    def revoke(
        self,
        selector: Selector | dict[str, Any],
        *,
        reason: str,
        by: str = "security",
        effective_at: datetime | str | None = None,
    ) -> RevocationResult:
        """Take everything ``selector`` covers out of every read path, at commit."""
        sel = selector if isinstance(selector, Selector) else build(Selector, "selector", **selector)
        effective = _when("effective_at", effective_at) or self.clock.now()
        event = build(
            RevocationIssued,
            revocation_id=new_id("rev_"),
            selector=sel,
            reason=reason,
            issued_by=by,
            effective_at=effective,
            actor=by,
        )
        with self.log.transaction() as tx:
            seq = tx.append([event])[0]
            covered = tx.conn.execute(
                "SELECT covered FROM revocations WHERE revocation_id = ?", (event.revocation_id,)
            ).fetchone()[0]
            cascaded = sum(1 for r in tx.recorded if r.type == "memory.invalidated")
        log.warning(
            "revocation_issued", revocation_id=event.revocation_id, seq=seq, covered=covered, cascaded=cascaded, by=by
        )
        for listener in list(self.revocation_listeners):
            try:
                listener(event.revocation_id)
            except Exception:  # a listener must never undo or hide a committed revocation
                log.exception("revocation_listener_failed", revocation_id=event.revocation_id)
        return RevocationResult(event.revocation_id, seq, covered, format_ts(effective), cascaded)

    def revocation(self, revocation_id: str) -> dict[str, Any]:
        with self.reading() as conn:
            row = conn.execute(
                "SELECT revocation_id, seq, selector, reason, issued_by, effective_at, recorded_at, covered, "
                "readback_status, readback_seq, readback_latency_ms, still_visible, leaked_ids "
                "FROM revocations WHERE revocation_id = ?",
                (revocation_id,),
            ).fetchone()
        if row is None:
            raise RevocationNotFound(revocation_id)
        keys = (
            "revocation_id",
            "seq",
            "selector",
            "reason",
            "issued_by",
            "effective_at",
            "recorded_at",
            "covered",
            "readback_status",
            "readback_seq",
            "readback_latency_ms",
            "still_visible",
            "leaked_ids",
        )
        out = dict(zip(keys, row, strict=True))
        out["selector"] = json.loads(out["selector"])
        out["leaked_ids"] = json.loads(out["leaked_ids"]) if out["leaked_ids"] else []
        return out

    def set_policy(self, policy: str, version: int, *, actor: str = "security") -> int:
        """Make ``version`` current; memories under older versions stop being
        usable until re-verified. Versions only go up: lowering one would
        bring back what the raise took out."""
        with self.log.transaction() as tx:
            current = self._policy_version(tx.conn, policy)
            if not isinstance(version, int) or version <= current:
                raise InvalidInput(
                    "version", f"policy {policy!r} is at version {current}; the new version must be greater"
                )
            event = build(PolicyVersionChanged, policy=policy, version=version, previous_version=current, actor=actor)
            seq = tx.append([event])[0]
        log.warning("policy_version_changed", policy=policy, version=version, seq=seq)
        return seq

    def policies(self) -> dict[str, int]:
        with self.reading() as conn:
            return current_policies(conn)

    # -- erasure ------------------------------------------------------------------------

    def erase(
        self, *, memory_id: str | None = None, user: str | None = None, reason: str, actor: str = "security"
    ) -> int:
        """Destroy the text of a memory (or of all of a user's memories).

        The events stay (the chain still verifies, and explain shows that the
        memory existed and was erased); the text leaves the blob table, the
        text index, free pages (secure_delete) and the WAL (checkpoint).
        Memories holding the very same text are erased with it: it is one text.
        """
        if (memory_id is None) == (user is None):
            raise InvalidInput("memory_id", "give exactly one of memory_id or user")
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidInput("reason", "is required")
        with self.log.transaction() as tx:
            conn = tx.conn
            if memory_id is not None:
                rows = select_rows(conn, "memory_id = ?", [memory_id])
                if not rows:
                    raise MemoryNotFound(memory_id)
            else:
                rows = select_rows(conn, '"user" = ?', [user])
            checksums = {r["checksum"] for r in rows}
            for checksum in sorted(checksums):
                rows += select_rows(conn, "checksum = ?", [checksum])
            targets = {r["memory_id"]: r for r in rows if r["status"] != "erased"}
            events = [
                MemoryErased(memory_id=m, reason=reason, content_checksum=r["checksum"], actor=actor)
                for m, r in sorted(targets.items())
            ]
            tx.append(events)
            for checksum in checksums:
                self.blobs.delete(checksum)
            # deleted rows leave their terms in FTS segments until a merge
            conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        log.warning("memories_erased", count=len(events), memory_id=memory_id, user=user)
        return len(events)

    # -- tool-result cache -------------------------------------------------------------

    def cache_put(
        self,
        *,
        tool: str,
        tool_version: str,
        input_hash: str,
        scope: Scope | dict[str, Any],
        content: str,
        source_url: str,
        ttl: timedelta | str | None = None,
        kind: str = "tool_result",
        actor: str = "agent",
    ) -> SaveResult:
        """Store a tool result under its full cache key (tool, version, input, scope)."""
        scope_model = scope if isinstance(scope, Scope) else build(Scope, "scope", **(scope or {}))
        key = _cache_id(tool, tool_version, input_hash, scope_model)
        return self.save(
            memory_id=key,
            kind=kind,
            summary=f"{tool} {tool_version} result for {input_hash}",
            content=content,
            source_url=source_url,
            scope=scope_model,
            ttl=ttl,
            cache_key={"tool": tool, "tool_version": tool_version, "input_hash": input_hash},
            actor=actor,
        )

    def cache_get(
        self, *, tool: str, tool_version: str, input_hash: str, scope: Scope | dict[str, Any]
    ) -> tuple[bool, MemoryView | None, str]:
        """(hit, view, reason): a hit only if every key part matches and it is usable."""
        scope_model = scope if isinstance(scope, Scope) else build(Scope, "scope", **(scope or {}))
        key = _cache_id(tool, tool_version, input_hash, scope_model)
        try:
            view = self.get(key)
        except MemoryNotFound:
            return False, None, "miss"
        with self.reading() as conn:
            row = fetch_row(conn, key)
        expected = {
            **scope_model.model_dump(),
            "tool": scope_model.tool or tool,
            "tool_version": tool_version,
            "input_hash": input_hash,
        }
        if row is None or any(row[k] != v for k, v in expected.items()):
            return False, view, "key_mismatch"
        if not view.usable:
            return False, view, view.reason or "not_usable"
        return True, view, "hit"

    # -- reporting ----------------------------------------------------------------------

    def stats(self) -> list[dict[str, Any]]:
        with self.reading() as conn:
            return weekly(conn)

    def tail(self, n: int = 20) -> list[dict[str, Any]]:
        return [e.envelope() for e in self.log.tail(n)]

    def decide_row(self, row: dict[str, Any], *, now: str, policy_version: int) -> Decision:
        return decide(row, now=now, policy_version=policy_version)

    def transaction(self) -> Any:
        """A write transaction for callers composing several appends."""
        return self.log.transaction()

    # -- verification, history and audit (their own modules) ---------------------------

    def verify(self, memory_id: str, *, accept: bool = False) -> VerifyResult:
        return _verify.verify(self, memory_id, accept=accept)

    def verify_due(self, *, accept: bool = False, limit: int | None = None) -> list[VerifyResult]:
        return _verify.verify_due(self, accept=accept, limit=limit)

    def due(self, *, limit: int | None = None) -> list[DueItem]:
        return _verify.due(self, limit=limit)

    def import_records(self, path: str | Path) -> ImportResult:
        return _verify.import_records(self, path)

    def explain(self, memory_id: str, *, as_of: str | None = None) -> dict[str, Any]:
        return _history.explain(self, memory_id, as_of=as_of)

    def replay(
        self,
        *,
        as_of: str | None = None,
        seq: int | None = None,
        tenant: str | None = None,
        include_unusable: bool = False,
    ) -> dict[str, Any]:
        return _history.replay(self, as_of=as_of, seq=seq, tenant=tenant, include_unusable=include_unusable)

    def rebuild(self, *, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
        return _history.rebuild(self, progress=progress)

    def check_projections(self) -> CheckResult:
        return _history.check_projections(self)

    def audit_verify(self, against: str | None = None) -> dict[str, Any]:
        return _history.audit_verify(self, against)

    def audit_head(self) -> dict[str, Any]:
        return _history.audit_head(self)

    def export(self, path: str | Path) -> int:
        return _history.export_log(self, path)

    def import_log(self, path: str | Path) -> int:
        return _history.import_log(self, path)


def _when(field: str, value: datetime | str | None) -> datetime | None:
    if value is None:
        return None
    try:
        if isinstance(value, str):
            return parse_ts(value)
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValueError("naive datetime refused: give a timezone")
            return value
    except ValueError as exc:
        raise InvalidInput(field, str(exc)) from None
    raise InvalidInput(field, f"must be a timestamp, not {type(value).__name__}")


def _cache_id(tool: str, tool_version: str, input_hash: str, scope: Scope) -> str:
    from memwarden.events import canonical_json, sha256_hex

    for field, value in (("tool", tool), ("tool_version", tool_version), ("input_hash", input_hash)):
        if not isinstance(value, str) or not value:
            raise InvalidInput(field, "is required")
    digest = sha256_hex(canonical_json([tool, tool_version, input_hash, scope.model_dump()]))
    return f"cache:{digest[:40]}"


def _without_content(view: MemoryView) -> MemoryView:

    return view._replace(content=None)


def fts_query(text: str) -> str:
    """User text as an FTS5 query: every word must match as a prefix, so a
    Korean stem finds its inflected forms (서울 finds 서울에서)."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("text", "must be non-empty")
    words = [w for w in text.split() if w.strip('"')]
    if not words:
        raise InvalidInput("text", "has no searchable words")
    return " ".join('"' + w.replace('"', '""') + '"*' for w in words)
