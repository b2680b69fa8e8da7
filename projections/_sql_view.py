"""The view's questions in SQL both backends speak: every question the
engine asks of the usable view, on one connection (a snapshot, or the open
write transaction), written with ``?`` marks (PostgreSQL's connection is
wrapped to take them). Each method is named for what it answers;
``ViewReader`` in ``_port`` is the same list in backend-neutral words.

A backend's view subclasses ``SQLView`` and gives what its SQL spells its
own way: the text index (``MATCHING``, ``match_query``), how a stored text
is read (``TEXTS``), and the purge of erased words. The agent query's SQL
is ``SQLView.agent_query``; a caller's confinement (``Access``) becomes SQL
in ``SQLView.confine`` and nowhere else. The questions of other tables are
mixins, one module each: revocations and policies (``_sql_revocations``),
the derivation graph (``_sql_graph``), the vectors (``_vector_reads``),
what made them (``_embedding_reads``) and the side tables of keys and
back-offs (``_sql_side``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Self, Unpack

from . import _rows
from ._access import Access
from ._agent_page import AgentQuery
from ._content_tests import ContentTest
from ._embedding_reads import EmbeddingReads
from ._named import DueRow, Expiring, ViewRow
from ._reads import TextRow, Version, WeekRow
from ._rows import (
    TEXT_JOIN,
    VIEW_COLUMNS,
    Connection,
    Key,
    MemoryRow,
    rows_with_text_sql,
    select_rows,
)
from ._runner import Projector
from ._sql_graph import GraphReads
from ._sql_outbox import Outbox
from ._sql_revocations import RevocationReads
from ._sql_side import SideTables
from ._stats import weekly
from ._usable_schema import RECHECK
from ._vector_reads import VectorReads

# the scope filters of the agent query: argument name -> column
SCOPE_FILTERS = (
    ("project", "project"),
    ("permission", "permission"),
    ("user", '"user"'),
    ("agent", "agent"),
    ("tool", "tool"),
    ("kind", "kind"),
    ("status", "status"),
)


def prefix_range(prefix: str) -> tuple[str, str]:
    """(low, high): the strings that start with ``prefix`` are those from
    low up to, not including, high (``prefix`` is not empty)."""
    stem = prefix.rstrip(chr(0x10FFFF))
    if not stem:  # nothing after the last code point: every string from prefix on
        return prefix, chr(0x10FFFF) * (len(prefix) + 1)
    return prefix, stem[:-1] + chr(ord(stem[-1]) + 1)


class SQLView(GraphReads, SideTables, VectorReads, EmbeddingReads, RevocationReads, ABC):
    """The usable view as one connection sees it."""

    # a version's summary (text), and its summary and stored content
    # (bytes), over ``texts t``
    SUMMARY: str
    TEXTS: str
    # ids (``mid``) of memories whose texts match one ``?``: the text index
    MATCHING: str
    # status, spelled so the planner walks another index than status's own
    STATUS_UNINDEXED = "status"
    # a column compared without leading the planner to an index on it
    # (SQLite: a unary plus; PostgreSQL plans from its statistics)
    UNINDEXED = "{}"
    # how the outbox takes a row no other node is taking (``Outbox``)
    ROW_LOCK = ""

    def __init__(self, conn: Connection, projector: Projector) -> None:
        self.conn = conn
        self._projector = projector

    def outbox(self) -> Outbox:
        """The sinks' notices and read-backs, in this connection's transaction."""
        return Outbox(self.conn, self.ROW_LOCK)

    def position(self) -> int:
        """The seq every projection has applied (the view's freshness)."""
        return self._projector.position(self.conn)

    def vectors(self) -> Self:
        """The vector projection's questions, on this connection (``VectorReads``)."""
        return self

    def side(self) -> Self:
        """The tables beside the view, on this connection (``SideTables``)."""
        return self

    # -- confinement ---------------------------------------------------------------------

    @staticmethod
    def confine(access: Access, alias: str = "") -> tuple[str, list[Any]]:
        """``access`` as a WHERE term over ``memories`` (``alias.`` before each column)."""
        at = f"{alias}." if alias else ""
        clauses: list[str] = []
        params: list[Any] = []
        if access.tenants is not None:
            clauses.append(f"{at}tenant IN ({','.join('?' * len(access.tenants))})" if access.tenants else "FALSE")
            params.extend(access.tenants)
        if access.agent is not None:
            clauses.append(f"{at}agent = ?")
            params.append(access.agent)
        return (" AND ".join(clauses) or "TRUE"), params

    # -- memories ------------------------------------------------------------------------

    def rows(self, access: Access, keys: Sequence[Key]) -> dict[Key, MemoryRow]:
        """The rows of the memories ``keys`` name that ``access`` allows (the others left out)."""
        return _rows.fetch_rows(self.conn, keys, *self.confine(access, "memories"))

    def memories(
        self,
        access: Access,
        *,
        tenant: str | None = None,
        memory_id: str | None = None,
        user: str | None = None,
        limit: int | None = None,
    ) -> list[MemoryRow]:
        """The memories ``access`` allows, by tenant and id: of ``tenant``,
        with id ``memory_id`` (one per tenant holding it), whose scope names
        ``user`` (erasure by user), each when given; up to ``limit``."""
        allowed, args = self.confine(access)
        clauses = [allowed]
        for column, value in (("tenant", tenant), ("memory_id", memory_id), ('"user"', user)):
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(value)
        tail = "ORDER BY tenant, memory_id"
        if limit is not None:
            tail += " LIMIT ?"
            args.append(limit)
        return select_rows(self.conn, " AND ".join(clauses), args, tail)

    def tenant_names(self, access: Access, limit: int = 1000) -> list[str]:
        """The tenants holding memories that ``access`` lets the caller read."""
        allowed, params = self.confine(access, "m")
        return [
            r[0]
            for r in self.conn.execute(
                f"SELECT DISTINCT m.tenant FROM memories m WHERE {allowed} ORDER BY m.tenant LIMIT ?",
                [*params, limit],
            )
        ]

    def erasures(self, keys: Sequence[Key]) -> dict[Key, int]:
        """Which of the memories ``keys`` name had texts erased (a version's,
        or all of them), each with the last version whose texts were erased
        (0: none marked, the memory erased), a statement per few hundred."""
        found: dict[Key, int] = {}
        for chunk in _rows.chunks(list(dict.fromkeys(keys)), 400):
            flat = [part for key in chunk for part in key]
            marks = _rows.value_marks(chunk, 2)
            for tenant, memory_id, through in self.conn.execute(
                f"WITH k(t, m) AS (VALUES {marks}) SELECT k.t, k.m, e.through_version FROM k "
                "LEFT JOIN erased_texts e ON e.tenant = k.t AND e.memory_id = k.m WHERE e.tenant IS NOT NULL OR "
                "EXISTS (SELECT 1 FROM memories x WHERE x.tenant = k.t AND x.memory_id = k.m AND x.status = 'erased')",
                flat,
            ):
                found[(tenant, memory_id)] = int(through or 0)
        return found

    def texts(self, access: Access, versions: Sequence[Version] | None = None) -> Iterator[TextRow]:
        """The texts of the memories ``access`` allows: of the (tenant,
        memory_id, version) ``versions`` named (a version whose texts were
        erased left out), a statement per few hundred; otherwise of every
        memory's current version not erased. Each with the memory's current
        checksum."""
        if versions is None:
            allowed, params = self.confine(access, "m")
            for found in self.conn.execute(
                f"SELECT m.tenant, m.memory_id, m.version, m.checksum, {self.TEXTS} FROM memories m {TEXT_JOIN} "
                f"WHERE m.status <> 'erased' AND {allowed}",
                params,
            ):
                yield TextRow.of(*found)
            return
        allowed, params = self.confine(access, "m")
        for chunk in _rows.chunks(list(dict.fromkeys(versions)), 300):
            # a join from the keys, so both backends seek the texts' key
            marks = ", ".join("(?, ?, CAST(? AS INTEGER))" for _ in chunk)
            for found in self.conn.execute(
                f"WITH k (tenant, memory_id, version) AS (VALUES {marks}) "
                f"SELECT k.tenant, k.memory_id, k.version, m.checksum, {self.TEXTS} FROM k "
                "JOIN memories m ON m.tenant = k.tenant AND m.memory_id = k.memory_id "
                "JOIN texts t ON t.tenant = k.tenant AND t.memory_id = k.memory_id AND t.version = k.version "
                f"WHERE {allowed}",
                [*(v for key in chunk for v in key), *params],
            ):
                yield TextRow.of(*found)

    def agent_query(self, **query: Unpack[AgentQuery]) -> list[ViewRow]:
        """One page of the agent query (``agent_query_sql``)."""
        sql, params = self.agent_query_sql(**query)
        return [ViewRow._make(values) for values in self.conn.execute(sql, params).fetchall()]

    def agent_query_sql(
        self,
        *,
        tenant: str | None,
        access: Access,
        filters: dict[str, str | None],
        ids: list[str] | None,
        id_prefixes: list[str] | None,
        match: Sequence[str] | None,
        content: list[ContentTest] | None,
        usable_at: str | None,
        limit: int,
        offset: int,
    ) -> tuple[str, list[Any]]:
        """One page of the agent query, newest first, as ``VIEW_COLUMNS`` rows
        with their texts: a tenant's memories (with ``tenant`` None, any
        tenant's, by id then tenant) that ``access`` lets the caller read, narrowed by scope
        ``filters``, ``ids``, ids starting with one of ``id_prefixes``, the
        words of a text-index ``match`` (each a prefix of a word in the
        summary or content) and ``content`` tests on the stored text read
        as JSON (``_content_tests``); with ``usable_at``, only rows the view
        holds usable and unexpired then (an index-friendly prefilter: the
        gate still decides). The statement and its parameters."""
        allowed, allowed_params = self.confine(access, "m")
        clauses = [allowed]
        params: list[Any] = list(allowed_params)
        if tenant is not None:
            clauses.insert(0, "m.tenant = ?")
            params.insert(0, tenant)
        for name, column in SCOPE_FILTERS:
            if filters.get(name) is not None:
                # given a project, the covering index on (tenant, project,
                # last_seq) serves the page in order: another scope column
                # must not lead the planner to its own index and a sort
                led = name != "project" and filters.get("project") is not None
                clauses.append(f"{self.UNINDEXED.format(column) if led else column} = ?")
                params.append(filters[name])
        if ids is not None:
            clauses.append(f"m.memory_id IN ({','.join('?' * len(ids))})")
            params.extend(ids)
        if id_prefixes is not None:
            # a range of the id, which both backends compare code point by
            # code point (SQLite's BINARY, PostgreSQL's "C"): the key's own index serves it
            ranges = [prefix_range(p) for p in id_prefixes]
            clauses.append("(" + " OR ".join("(m.memory_id >= ? AND m.memory_id < ?)" for _ in ranges) + ")")
            params.extend(bound for low_high in ranges for bound in low_high)
        if content:
            sql, args = self.content_terms(content)
            clauses.append(sql)
            params.extend(args)
        if match is not None:
            clauses.append(f"mid IN ({self.MATCHING})")
            # the caller's tenants' words only (and a bound key's agent's): a
            # search does no work for memories the caller may not see
            params.extend(self.match_query(match, [tenant] if tenant is not None else access.tenants, access.agent))
        if access.unsearchable and (match is not None or content):
            # a test of a text (its words, or its JSON's fields with their
            # ranges) answers whether it holds a guess: a withheld text is
            # never tested, or its content could be rebuilt guess by guess
            clauses.append(f"m.status NOT IN ({','.join('?' * len(access.unsearchable))})")
            params.extend(access.unsearchable)
        if usable_at is not None:
            clauses.append("status = 'usable' AND (expires_at IS NULL OR expires_at > ?)")
            params.append(usable_at)
        # one id, in a tenant or across them (a memory named by id: ``get``):
        # a row per tenant holding it at most, read off the id's index unsorted
        one_id = tenant is None or (ids is not None and len(ids) == 1)
        order = "m.memory_id, m.tenant" if one_id else "m.last_seq DESC"
        sql = rows_with_text_sql(
            VIEW_COLUMNS, " AND ".join(clauses), f"ORDER BY {order} LIMIT ? OFFSET ?", texts=self.TEXTS
        )
        return sql, [*params, limit, offset]

    @abstractmethod
    def content_terms(self, tests: Sequence[ContentTest]) -> tuple[str, list[Any]]:
        """``tests`` as one WHERE term over the texts' content (``t.content``)."""

    @abstractmethod
    def match_query(self, words: Sequence[str], tenants: Sequence[str] | None, agent: str | None = None) -> list[Any]:
        """The parameters of ``MATCHING`` for ``words`` in the text index's
        own query language: each a prefix of a word of one of ``tenants``
        (every tenant's, if None), and given an ``agent``, of that agent's
        memories (where the index keys them apart: SQLite's)."""

    def text_matches(self, access: Access, match: Sequence[str], tenant: str | None = None) -> list[str]:
        """Ids of memories whose texts match (any status): the raw text index."""
        allowed, allowed_params = self.confine(access, "m")
        sql = f"SELECT m.memory_id FROM memories m WHERE m.mid IN ({self.MATCHING}) AND {allowed}"
        # the index's words of the tenants the search may see, no other's
        tenants = [tenant] if tenant is not None else access.tenants
        args: list[Any] = [*self.match_query(match, tenants, access.agent), *allowed_params]
        if access.unsearchable:
            sql += f" AND m.status NOT IN ({','.join('?' * len(access.unsearchable))})"
            args.extend(access.unsearchable)
        if tenant is not None:
            sql += " AND m.tenant = ?"
            args.append(tenant)
        return [r[0] for r in self.conn.execute(sql, args)]

    @abstractmethod
    def purge_text_index(self) -> bool:
        """Rewrite the text index so erased words leave its pages too (True
        if it was rebuilt whole)."""

    # -- what the scheduler and re-verification look for ----------------------------------

    def past_expiry(
        self, access: Access, now: str, limit: int, after: tuple[str, str, str] | None = None
    ) -> list[Expiring]:
        """(tenant, memory_id, version, expires_at) of usable memories at or past
        their expiry, the earliest first, after the (expires_at, tenant,
        memory_id) ``after``: a sweep pages on from where it stopped rather
        than walking again past what it already expired. In the expiry
        index's own order (an entry ends with the row's key, tenant and
        memory_id), so a page is read off the index, not sorted."""
        allowed, params = self.confine(access)
        where, args = f" AND {allowed}", [now, *params]
        if after is not None:
            where += " AND (expires_at, tenant, memory_id) > (?, ?, ?)"
            args.extend(after)
        found = self.conn.execute(
            # the expiry index, not the status index, drives this
            f"SELECT tenant, memory_id, version, expires_at FROM memories WHERE {self.STATUS_UNINDEXED} = 'usable' "
            f"AND expires_at IS NOT NULL AND expires_at <= ?{where} ORDER BY expires_at, tenant, memory_id LIMIT ?",
            (*args, limit),
        ).fetchall()
        return [Expiring._make(values) for values in found]

    def due(self, access: Access, now: str, kinds: Iterable[str] | None = None) -> list[DueRow]:
        """(tenant, memory_id, source_url, reason) of what must be re-verified,
        in precedence (a memory may come more than once: the first counts):
        invalidated as ``revoked``, past expiry, failed checks, older policy
        versions; every statement confined to ``access`` and, given
        ``kinds``, to memories of those kinds."""
        allowed, params = self.confine(access)
        if kinds is not None:
            wanted = sorted(kinds)
            allowed += f" AND kind IN ({','.join('?' * len(wanted))})" if wanted else " AND FALSE"
            params = [*params, *wanted]
        found: list[DueRow] = []

        def add(sql: str, args: list[Any], reason: str) -> None:
            found.extend(
                DueRow(tenant, memory_id, url, reason)
                for tenant, memory_id, url in self.conn.execute(
                    f"SELECT tenant, memory_id, source_url FROM memories WHERE {sql} AND {allowed}", [*args, *params]
                )
            )

        add(f"status = 'invalidated' AND {RECHECK}", [], "revoked")
        # STATUS_UNINDEXED: walk the expiry index (the few past due), not a status
        # index; memories marked expired come from the recheck index. Separate
        # statements, not a UNION: the caller drops the overlap for free.
        waiting = f"{self.STATUS_UNINDEXED} IN ('usable', 'expired', 'unknown')"
        add(f"expires_at <= ? AND {waiting}", [now], "expired")
        add(f"status = 'expired' AND {RECHECK}", [], "expired")
        add(f"status = 'unknown' AND {RECHECK}", [], "unknown")
        for policy, version in self.conn.execute("SELECT policy, version FROM policies").fetchall():
            add(
                f"policy = ? AND revocation_version != ? AND {waiting}",
                [policy, version],
                "policy_changed",
            )
        return found

    def weekly(self) -> list[WeekRow]:
        """The counters per ISO week."""
        return weekly(self.conn)
