"""The revocations a save and a fold check against, parsed once per store.

Every save asks whether a revocation covers it (no resurrection), twice:
the engine before it appends, the fold as it applies. Both read every
revocation ever issued and parse its selector, so a save would cost more
the more a store had revoked. The four columns read here
(id, selector, effective time, seq) never change once a revocation is written,
and revocations are only ever added, in seq order; a rebuild writes the
same rows again from the same log.

So the parsed list is kept per store, under the state of the table it was
read from: how many rows, the last seq and the last revocation's id (a
random token, so two states that agree on all three hold the same rows).
Each read asks that state in one indexed statement. The same state is a
hit; a longer table whose rows up to the cached last seq are the cached
ones is read from there on; anything else (a rolled-back revocation, a
rebuild under way, another transaction's snapshot) is read whole. A read
never trusts the cache further than the table it sees.

Each tenant's share is kept beside the whole list: a selector naming
another tenant never covers a memory, so a save checks only its tenant's
revocations and the ones that name none (``could_cover``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable

from ._rows import Connection
from ._selector import Revocation, could_cover

# (rows, last seq, last revocation id) of the revocations table
State = tuple[int, int | None, str | None]

_STATE = "SELECT count(*), max(seq), (SELECT revocation_id FROM revocations ORDER BY seq DESC LIMIT 1) FROM revocations"
_SINCE = "SELECT revocation_id, selector, effective_at, seq FROM revocations WHERE seq >= ? ORDER BY seq"
_ALL = "SELECT revocation_id, selector, effective_at, seq FROM revocations ORDER BY seq"
# states remembered: a writer's (with its uncommitted revocation) and the
# readers' beside it, without one evicting the other at every turn
_KEPT = 4


class _Parsed:
    """One state's revocations, oldest first, and each tenant's share."""

    def __init__(self, state: State, revocations: list[Revocation]) -> None:
        self.state = state
        self.revocations = revocations
        self._shares: dict[str, list[Revocation]] = {}

    def share(self, tenant: str) -> list[Revocation]:
        found = self._shares.get(tenant)
        if found is None:
            found = [r for r in self.revocations if could_cover(r.selector, tenant)]
            if len(self._shares) < 10_000:  # bounded: a store of many tenants
                self._shares[tenant] = found
        return found


def _revocation(revocation_id: str, selector: str, effective_at: str, seq: int) -> Revocation:
    return Revocation(revocation_id, json.loads(selector), effective_at, seq)


class RevocationCache:
    """Parsed revocations of one store, checked against its table at every read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[State, _Parsed] = {}

    def load(self, conn: Connection, tenant: str | None = None) -> list[Revocation]:
        """Every revocation (or every one that may cover ``tenant``'s
        memories), oldest first, as the table on ``conn`` holds them now.
        The list is the caller's; its revocations are shared (frozen; their selectors never changed)."""
        parsed = self._parsed(conn)
        return list(parsed.revocations if tenant is None else parsed.share(tenant))

    def load_shares(self, conn: Connection, tenants: Iterable[str]) -> dict[str, list[Revocation]]:
        """``load`` for each of ``tenants``, from one read of the table (a
        batch save of many tenants' memories)."""
        parsed = self._parsed(conn)
        return {tenant: list(parsed.share(tenant)) for tenant in tenants}

    def _parsed(self, conn: Connection) -> _Parsed:
        count, last_seq, last_id = conn.execute(_STATE).fetchone()
        state: State = (count, last_seq, last_id)
        with self._lock:
            hit = self._kept.get(state)
            if hit is not None:  # every save but the first after a revocation
                return hit
            base = max(
                (p for p in self._kept.values() if p.state[0] and p.state[0] < count),
                key=lambda p: p.state[0],
                default=None,
            )
        parsed = self._extended(conn, state, base) if base is not None else None
        if parsed is None:
            rows = conn.execute(_ALL).fetchall()
            parsed = _Parsed(state, [_revocation(*row) for row in rows])
        with self._lock:
            if len(self._kept) >= _KEPT:
                self._kept.pop(next(iter(self._kept)))
            self._kept[state] = parsed
        return parsed

    @staticmethod
    def _extended(conn: Connection, state: State, base: _Parsed) -> _Parsed | None:
        """``base`` and the rows after it, if the table still begins with it."""
        base_count, base_seq, base_id = base.state
        rows = conn.execute(_SINCE, (base_seq,)).fetchall()
        # the base's last row is still there, and exactly the rows after it
        # make up the rest: the table is the base plus those
        if not rows or rows[0][0] != base_id or base_count + len(rows) - 1 != state[0]:
            return None
        return _Parsed(state, base.revocations + [_revocation(*row) for row in rows[1:]])
