"""The view's questions about revocations and policies, in SQL both
backends speak (a mixin of ``SQLView``): what a revocation covered and
would cover, its read-back, and each policy's versions. Apart from the
memories' questions (``_sql_view``) because these read the revocation and
policy tables and the fold's own selectors, never a memory's texts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from . import _rows
from ._fold import TERMINAL_SQL
from ._reads import (
    CheckedUnder,
    CoveredRow,
    Covering,
    PolicyRow,
    RevocationQuery,
    RevocationRow,
    RevokedBy,
    Selected,
    TakenAt,
)
from ._rows import Connection
from ._rules import problem_of, versions_of
from ._runner import Projector
from ._selector import COVERED_SQL, Revocation, selector_sql

REVOCATION_FIELDS = (
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


class RevocationReads:
    """Revocations and policies as one connection sees them."""

    conn: Connection
    _projector: Projector

    def revocations(self, tenants: Iterable[str]) -> dict[str, list[Revocation]]:
        """Each of ``tenants``' revocations (those whose selector may cover
        its memories: id, selector, effective time and seq), oldest first,
        in one read: what a save is checked against (the fold's parsed list,
        kept per store: ``_revocation_cache``)."""
        return self._projector.revocation_shares(self.conn, tenants)

    def revocation_records(self, query: RevocationQuery) -> list[RevocationRow]:
        """Revocations as the view holds them (selector and leaked ids as JSON
        text): one by id, the unconfirmed oldest first, or a page newest first."""
        select = f"SELECT {', '.join(REVOCATION_FIELDS)} FROM revocations"
        args: list[Any] = []
        if query.revocation_id is not None:
            sql = f"{select} WHERE revocation_id = ?"
            args.append(query.revocation_id)
        elif query.unconfirmed:
            sql = f"{select} WHERE readback_status IS NULL OR readback_status = 'failed' ORDER BY seq"
        else:
            sql = f"{select} ORDER BY seq DESC"
        if query.limit is not None:
            sql += " LIMIT ? OFFSET ?"
            args.extend((query.limit, query.offset))
        return [RevocationRow(*row) for row in self.conn.execute(sql, args).fetchall()]

    def covered(self, query: Covering) -> list[CoveredRow]:
        """The memories a selector, a revocation or a policy version covers,
        found with the fold's own WHERE (``_selector``)."""
        match query:
            case Selected(selector=selector):
                # what a revocation issued now would take out
                where, params = selector_sql(selector)
                sql = f"WHERE ({where}) AND status NOT IN {TERMINAL_SQL} ORDER BY tenant, memory_id"
            case RevokedBy():
                where, params = selector_sql(query.selector)
                sql = f"WHERE ({where}) AND {COVERED_SQL} ORDER BY memory_id, tenant"
                params = [*params, query.revocation_id, query.seq, query.effective_at]
            case TakenAt():
                # found the way its UPDATE found it, so the cost follows its
                # size; a later change of a memory is an event of its own
                where, params = selector_sql(query.selector)
                sql = f"m WHERE ({where}) AND m.revoked_by = ? AND m.last_seq = ? AND m.status = 'revoked'"
                params = [*params, query.revocation_id, query.seq]
                if query.tenant is not None:
                    sql += " AND m.tenant = ?"
                    params.append(query.tenant)
                if query.evidence:
                    sql += (
                        " AND EXISTS (SELECT 1 FROM derivations d WHERE d.tenant = m.tenant "
                        "AND d.parent_id = m.memory_id)"
                    )
                sql += " ORDER BY m.tenant, m.memory_id"
            case CheckedUnder(policy=policy, version=version):
                sql = (
                    f"WHERE policy = ? AND revocation_version = ? AND status NOT IN {TERMINAL_SQL} "
                    "ORDER BY tenant, memory_id"
                )
                params = [policy, version]
        return [
            CoveredRow(*row) for row in self.conn.execute(f"SELECT tenant, memory_id, kind FROM memories {sql}", params)
        ]

    def policies(self) -> dict[str, str]:
        """Each policy ever set and its current version key."""
        return _rows.current_policies(self.conn)

    def policy(self, policy: str, version: str | None = None) -> PolicyRow:
        """``policy`` as the view holds it; with ``version`` (a version key),
        whether that version was retired and why it may not be made current
        now (the rule every append passes: ``_rules.policy_problem``)."""
        known = versions_of(self.conn, policy)  # one statement, whatever is asked
        found = PolicyRow(policy, known.current, known.seq, known.highest_numbered)
        if version is None:
            return found
        problem = problem_of(known, policy, version)
        return replace(found, version=version, retired_seq=known.retired.get(version), problem=problem)
