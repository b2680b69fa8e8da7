"""What a caller may see and touch: its tenants and, for a key bound to an
agent name, that agent's memories only.

The engine hands an ``Access`` to the store with every read and write that
names or lists memories; each backend confines its statement with it (the
SQLite store: ``SQLiteView.confine``), so a memory outside the caller's
rights is never read, and answers exactly as one that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Access:
    """``tenants`` None: every tenant (what the engine's rights give staff,
    the local operator and memwarden's own jobs: ``memwarden.engine._rights``).
    ``agent``: only memories whose scope names that agent; a bound key does
    not read its tenants' memories that name no agent. ``unsearchable``:
    the statuses whose texts the caller may not receive, so a text search
    never matches their words either (an agent rebuilt a revoked text
    letter by letter from which prefixes still found it)."""

    tenants: tuple[str, ...] | None = None
    agent: str | None = None
    unsearchable: tuple[str, ...] = ()

    def allows(self, tenant: str | None, agent: str | None) -> bool:
        if self.tenants is not None and tenant not in self.tenants:
            return False
        return self.agent is None or agent == self.agent

    def allows_tenant(self, tenant: str | None) -> bool:
        return self.tenants is None or tenant in self.tenants
