"""API keys with roles. A key is shown once; only its hash is stored."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Any

import structlog
from memwarden.projections import EVERYONE, Access

from ._errors import InvalidInput
from ._warden import Warden

log = structlog.get_logger("memwarden.keys")

ROLES = ("agent", "security", "auditor")


@dataclass(frozen=True)
class Principal:
    """Who is asking. Agents are bound to their tenants (and agent name)."""

    key_id: str
    role: str
    tenants: tuple[str, ...] = ()
    agent: str | None = None
    internal: bool = field(default=False, compare=False)

    @property
    def access(self) -> Access:
        """What this key may see: security and auditor keys every tenant; an
        agent key its tenants, and if bound to an agent name, only that
        agent's memories."""
        if self.role in ("security", "auditor"):
            return EVERYONE
        return Access(self.tenants, self.agent)

    def reads_tenant(self, tenant: str | None) -> bool:
        return self.access.allows_tenant(tenant)

    def as_dict(self) -> dict[str, Any]:
        return {"key_id": self.key_id, "role": self.role, "tenants": list(self.tenants), "agent": self.agent}


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class KeyStore:
    def __init__(self, warden: Warden) -> None:
        self.warden = warden

    def create(
        self, role: str, *, tenants: tuple[str, ...] | list[str] = (), agent: str | None = None
    ) -> tuple[str, Principal]:
        if role not in ROLES:
            raise InvalidInput("role", f"must be one of {', '.join(ROLES)}")
        tenants = tuple(dict.fromkeys(tenants))
        if role == "agent" and not tenants:
            raise InvalidInput("tenant", "an agent key is bound to at least one tenant")
        if role != "agent" and (tenants or agent):
            article = "an" if role[0] in "aeiou" else "a"
            raise InvalidInput(
                "tenant", f"{article} {role} key reads every tenant; --tenant and --agent are for agent keys"
            )
        for tenant in tenants:
            if not tenant or any(c.isspace() for c in tenant):
                raise InvalidInput("tenant", f"{tenant!r} is not a valid tenant")
        key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(24)
        with self.warden.transaction() as tx:
            tx.view.add_key(key_id, _hash(secret), role, list(tenants), agent, self.warden.now())
        log.info("api_key_created", key_id=key_id, role=role, tenants=list(tenants), agent=agent)
        return f"mw_{key_id}_{secret}", Principal(key_id, role, tenants, agent)

    def authenticate(self, key: str | None) -> Principal | None:
        # keys are ASCII; compare_digest refuses to compare anything else
        if not key or not key.isascii() or not key.startswith("mw_") or key.count("_") < 2:
            return None
        key_id, _, secret = key[3:].partition("_")
        with self.warden.reading() as view:
            row = view.key(key_id)
        if row is None or row["revoked_at"] is not None or not hmac.compare_digest(row["key_hash"], _hash(secret)):
            return None
        return Principal(key_id, row["role"], tuple(row["tenants"]), row["agent"])

    def principal(self, key_id: str) -> Principal | None:
        """Who an active key is, by its id (for a session that signed in with
        the key); None once the key is revoked."""
        with self.warden.reading() as view:
            row = view.key(key_id)
        if row is None or row["revoked_at"] is not None:
            return None
        return Principal(key_id, row["role"], tuple(row["tenants"]), row["agent"])

    def list(self) -> list[dict[str, Any]]:
        with self.warden.reading() as view:
            return view.keys()

    def revoke(self, key_id: str) -> bool:
        with self.warden.transaction() as tx:
            done = tx.view.revoke_key(key_id, self.warden.now())
        if done:
            log.warning("api_key_revoked", key_id=key_id)
        return bool(done)
