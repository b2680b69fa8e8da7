"""The view's questions about revocations and policies, in SQL both
backends speak (a mixin of ``SQLView``): what a revocation covered and
would cover, its read-back, and each policy's versions. Apart from the
memories' questions (``_sql_view``) because these read the revocation and
policy tables and the fold's own selectors, never a memory's texts."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import _rows
from ._fold import TERMINAL_SQL
from ._named import ReadbackState, Retiring, TenantCount
from ._rows import Connection, Key
from ._rules import highest_numbered, policy_problem
from ._runner import Projector
from ._selector import COVERED_SQL, selector_sql

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

    def revocations(self, tenant: str | None = None) -> list[dict[str, Any]]:
        """Every revocation's id, selector and effective time, oldest first;
        with ``tenant``, only those whose selector may cover its memories."""
        return self._projector.revocations(self.conn, tenant)

    def revocation_shares(self, tenants: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
        """``revocations(tenant)`` for each of ``tenants``, in one read."""
        return self._projector.revocation_shares(self.conn, tenants)

    def revocation(self, revocation_id: str) -> dict[str, Any] | None:
        """A revocation as the view holds it (selector and leaked ids as JSON text)."""
        row = self.conn.execute(
            f"SELECT {', '.join(REVOCATION_FIELDS)} FROM revocations WHERE revocation_id = ?", (revocation_id,)
        ).fetchone()
        return dict(zip(REVOCATION_FIELDS, row, strict=True)) if row else None

    def revocation_list(self, limit: int, offset: int = 0) -> list[dict[str, Any]]:
        """Revocations as the view holds them, newest first (selector and
        leaked ids as JSON text)."""
        rows = self.conn.execute(
            f"SELECT {', '.join(REVOCATION_FIELDS)} FROM revocations ORDER BY seq DESC LIMIT ? OFFSET ?",
            (limit, offset),
        ).fetchall()
        return [dict(zip(REVOCATION_FIELDS, row, strict=True)) for row in rows]

    def would_revoke(self, selector: dict[str, Any]) -> list[TenantCount]:
        """(tenant, count) of the memories a revocation of ``selector``
        issued now would take out: the fold's own WHERE, counted."""
        where, params = selector_sql(selector)
        return [
            TenantCount(tenant, count)
            for tenant, count in self.conn.execute(
                f"SELECT tenant, count(*) FROM memories WHERE ({where}) "
                f"AND status NOT IN {TERMINAL_SQL} GROUP BY tenant ORDER BY tenant",
                params,
            )
        ]

    def would_revoke_keys(self, selector: dict[str, Any]) -> list[Key]:
        """(tenant, memory_id) of what ``would_revoke`` counts."""
        where, params = selector_sql(selector)
        return self.conn.execute(
            f"SELECT tenant, memory_id FROM memories WHERE ({where}) AND status NOT IN {TERMINAL_SQL}", params
        ).fetchall()

    def would_retire(self, policy: str, version: str) -> list[Retiring]:
        """(tenant, count, Memory API count) of the memories a change of
        ``policy`` away from ``version`` (its current version key) would
        retire: those checked under it that are not already out for good."""
        return [
            Retiring(tenant, count, memory_api)
            for tenant, count, memory_api in self.conn.execute(
                "SELECT tenant, count(*), sum(CASE WHEN kind = 'agent_memory' THEN 1 ELSE 0 END) FROM memories "
                f"WHERE policy = ? AND revocation_version = ? AND status NOT IN {TERMINAL_SQL} "
                "GROUP BY tenant ORDER BY tenant",
                (policy, version),
            )
        ]

    def checked_under(self, policy: str, version: str) -> list[Key]:
        """(tenant, memory_id) of the memories checked under ``version`` of
        ``policy`` and not out for good: what a change away from it retires."""
        return self.conn.execute(
            f"SELECT tenant, memory_id FROM memories WHERE policy = ? AND revocation_version = ? "
            f"AND status NOT IN {TERMINAL_SQL} ORDER BY tenant, memory_id",
            (policy, version),
        ).fetchall()

    def unconfirmed_revocations(self) -> list[str]:
        """Revocations with no read-back yet, or a failed one, oldest first."""
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT revocation_id FROM revocations WHERE readback_status IS NULL OR readback_status = 'failed' "
                "ORDER BY seq"
            )
        ]

    def readback_state(self, revocation_id: str) -> ReadbackState | None:
        """(readback_status, leaked_ids JSON) of a revocation; None if there is none."""
        row = self.conn.execute(
            "SELECT readback_status, leaked_ids FROM revocations WHERE revocation_id = ?", (revocation_id,)
        ).fetchone()
        return ReadbackState(row[0], row[1]) if row else None

    def revoked_by(self, revocation: dict[str, Any]) -> list[Key]:
        """(tenant, memory_id) of what ``revocation`` covers, by memory id."""
        where, params = selector_sql(revocation["selector"])
        return self.conn.execute(
            f"SELECT tenant, memory_id FROM memories WHERE ({where}) AND {COVERED_SQL} ORDER BY memory_id",
            [*params, revocation["revocation_id"], revocation["seq"], revocation["effective_at"]],
        ).fetchall()

    def policies(self) -> dict[str, str]:
        """Each policy ever set and its current version key."""
        return _rows.current_policies(self.conn)

    def policy_version(self, policy: str) -> str | None:
        """The current version key of ``policy``, or None if it was never set."""
        row = self.conn.execute("SELECT version FROM policies WHERE policy = ?", (policy,)).fetchone()
        return row[0] if row else None

    def policy_seq(self, policy: str) -> int | None:
        """The seq that made the current version of ``policy`` current."""
        row = self.conn.execute("SELECT seq FROM policies WHERE policy = ?", (policy,)).fetchone()
        return row[0] if row else None

    def policy_problem(self, policy: str, version: str) -> str | None:
        """Why ``policy`` may not be made current at ``version`` now (the
        rule every append passes: ``_rules.policy_problem``), or None."""
        return policy_problem(self.conn, policy, version)

    def highest_numbered(self, policy: str) -> int | None:
        """The highest numbered version ``policy`` has ever been at."""
        return highest_numbered(self.conn, policy)

    def retired_version(self, policy: str, version: str) -> int | None:
        """The seq that retired ``version`` of ``policy``; None if it never was."""
        return _rows.retired_version(self.conn, policy, version)
