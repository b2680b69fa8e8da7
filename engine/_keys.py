"""API keys with roles. A key is shown once; only its hash is stored."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

from memwarden.events import get_logger

from ._errors import InvalidInput
from ._rights import KEY_ROLES, Principal, authorize
from ._warden import Warden

log = get_logger("memwarden.keys")

ROLES = KEY_ROLES


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class KeyStore:
    def __init__(self, warden: Warden) -> None:
        self.warden = warden

    def create(
        self, role: str, *, tenants: tuple[str, ...] | list[str] = (), agent: str | None = None, caller: Principal
    ) -> tuple[str, Principal]:
        """A new key of ``role`` (shown once; only its hash is kept)."""
        authorize(caller, "operate")
        if role not in ROLES:
            raise InvalidInput("role", f"must be one of {', '.join(ROLES)}")
        tenants = tuple(dict.fromkeys(tenants))
        if role == "agent" and not tenants:
            raise InvalidInput("tenant", "an agent key is bound to at least one tenant")
        if role != "agent" and (tenants or agent):
            article = "an" if role[0] in "aeiou" else "a"
            raise InvalidInput(
                "tenant" if tenants else "agent",  # the one given
                f"{article} {role} key reads every tenant; --tenant and --agent are for agent keys",
            )
        for tenant in tenants:
            if not isinstance(tenant, str) or not tenant or any(c.isspace() or ord(c) < 32 for c in tenant):
                raise InvalidInput("tenant", f"{tenant!r} is not a valid tenant")
        if agent is not None and (not agent or any(c.isspace() or ord(c) < 32 for c in agent)):
            raise InvalidInput("agent", f"{agent!r} is not a valid agent name")
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
            row = next(iter(view.side().keys(key_id)), None)
        if row is None or row.revoked_at is not None or not hmac.compare_digest(row.key_hash or "", _hash(secret)):
            return None
        return Principal(key_id, row.role, row.tenants, row.agent)

    def principal(self, key_id: str) -> Principal | None:
        """Who an active key is, by its id (for a session that signed in with
        the key); None once the key is revoked."""
        with self.warden.reading() as view:
            row = next(iter(view.side().keys(key_id)), None)
        if row is None or row.revoked_at is not None:
            return None
        return Principal(key_id, row.role, row.tenants, row.agent)

    def list(self, *, caller: Principal) -> list[dict[str, Any]]:
        authorize(caller, "operate")
        with self.warden.reading() as view:
            listed = view.side().keys()
        return [
            {
                "key_id": k.key_id,
                "role": k.role,
                "tenants": list(k.tenants),
                "agent": k.agent,
                "created_at": k.created_at,
                "revoked_at": k.revoked_at,
            }
            for k in listed
        ]

    def revoke(self, key_id: str, *, caller: Principal) -> bool:
        authorize(caller, "operate")
        with self.warden.transaction() as tx:
            done = tx.view.revoke_key(key_id, self.warden.now())
        if done:
            log.warning("api_key_revoked", key_id=key_id)
        return bool(done)
