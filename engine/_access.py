"""What a caller may see and touch: its tenants and, for a key bound to an
agent name, that agent's memories only.

Every read and write that names or lists memories narrows its SQL with
``Access.where``, so a memory outside the caller's rights is never read,
and answers exactly as one that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Access:
    """``tenants`` None: every tenant (security staff, auditors, the local
    operator). ``agent``: only memories whose scope names that agent; a bound
    key does not read its tenants' memories that name no agent."""

    tenants: tuple[str, ...] | None = None
    agent: str | None = None

    def allows(self, tenant: str | None, agent: str | None) -> bool:
        if self.tenants is not None and tenant not in self.tenants:
            return False
        return self.agent is None or agent == self.agent

    def allows_tenant(self, tenant: str | None) -> bool:
        return self.tenants is None or tenant in self.tenants

    def where(self, alias: str = "") -> tuple[str, list[Any]]:
        """A WHERE term over ``memories`` (``alias.`` before each column)."""
        at = f"{alias}." if alias else ""
        clauses: list[str] = []
        params: list[Any] = []
        if self.tenants is not None:
            clauses.append(f"{at}tenant IN ({','.join('?' * len(self.tenants))})" if self.tenants else "0")
            params.extend(self.tenants)
        if self.agent is not None:
            clauses.append(f"{at}agent = ?")
            params.append(self.agent)
        return (" AND ".join(clauses) or "1"), params

    def naming(self, column: str, value: Any, tenant: str | None = None, alias: str = "") -> tuple[str, list[Any]]:
        """``column = value``, in ``tenant`` when given, among the memories
        this caller may see: how a caller's request names memories."""
        at = f"{alias}." if alias else ""
        allowed, params = self.where(alias)
        sql = f'{at}"{column}" = ? AND {allowed}'
        args: list[Any] = [value, *params]
        if tenant is not None:
            sql += f" AND {at}tenant = ?"
            args.append(tenant)
        return sql, args


EVERYONE = Access()
