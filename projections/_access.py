"""What a caller may see and touch: its tenants and, for a key bound to an
agent name, that agent's memories only.

The engine hands an ``Access`` to the store with every read and write that
names or lists memories (a required parameter of each such read of the
port, so an unconfined read cannot be written by leaving it out: it is
``Access.system()``); each backend confines its statement with it, in its
WHERE clause (``SQLView.confine``), so a memory outside the caller's
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

    tenants: tuple[str, ...] | None  # required: an unconfined read is written as such
    agent: str | None = None
    unsearchable: tuple[str, ...] = ()

    @classmethod
    def system(cls) -> Access:
        """Every tenant's memories, every agent's: memwarden's own jobs (the
        scheduler, the cascade, a replay), staff and the local operator. Named,
        so that a read no caller's rights confine says so where it is written."""
        return cls(None)

    def allows(self, tenant: str | None, agent: str | None) -> bool:
        if self.tenants is not None and tenant not in self.tenants:
            return False
        return self.agent is None or agent == self.agent

    def allows_tenant(self, tenant: str | None) -> bool:
        return self.tenants is None or tenant in self.tenants
