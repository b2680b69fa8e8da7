"""What no append may do, whoever appends: the promises an import, a
migration or any future path must keep as a live write keeps them.

The engine checks a live write before it builds its events; these checks
run again on every append, in its transaction, before the view folds it
(the store's first subscriber), so a file of events (an export, crafted or
re-chained) is judged exactly like the writes that made it: an event that
would break a promise refuses the whole append, naming it.

* Policy versions (``policy_problem``, which the engine also asks before it
  builds a change): a change names the version that is current as its
  previous one, never makes a retired version current again, and a
  numbered version only goes up, past every numbered version the policy
  was ever at.
* A revocation id names one revocation.

The rest is decided where it is kept: the times of imported events by the
log (``memwarden.events.check_imported``), revocation coverage and no
resurrection in the fold, erasure in the text store.
"""

from __future__ import annotations

from collections.abc import Sequence

from memwarden.events import RecordedEvent, version_key, version_number

from ._errors import AppendRefused
from ._rows import Connection

IMPLICIT = "1"  # every policy's version until it is first set


def highest_numbered(conn: Connection, policy: str) -> int | None:
    """The highest numbered version ``policy`` has ever been at (current or
    retired): a numbered version only goes up, past every one before it,
    whatever key versions came between."""
    found = [version_number(str(v)) for (v,) in conn.execute(_VERSIONS, (policy, policy))]
    return max((n for n in found if n is not None), default=None)


_VERSIONS = (
    "SELECT version FROM policies WHERE policy = ? UNION ALL SELECT version FROM retired_versions WHERE policy = ?"
)


def policy_problem(
    conn: Connection,
    policy: str,
    version: str,
    previous: str | None = None,
    pending: dict[str, str] | None = None,
    retiring: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
) -> str | None:
    """Why ``policy`` may not be made current at ``version`` (a version
    key), or None: the one rule of policy versions, which the engine asks
    before it builds a change and every append asks again. ``previous``,
    when given, must be the current version; ``pending`` and ``retiring``
    are the changes earlier in the same append."""
    current = (pending or {}).get(policy) or _current(conn, policy)
    if previous is not None and previous != current:
        return f"policy {policy!r} is at version {current!r}, not {previous!r}"
    if version == current:
        return f"policy {policy!r} is already at version {version!r}"
    if (policy, version) in retiring or _retired(conn, policy, version):
        return f"version {version!r} of policy {policy!r} was retired and never comes back"
    seen = [version_number(v) for p, v in retiring if p == policy] + [version_number(current)]
    seen.append(highest_numbered(conn, policy))
    highest = max((n for n in seen if n is not None), default=None)
    number = version_number(version)
    if number is not None and highest is not None and number <= highest:
        return f"policy {policy!r} has been at version {highest}; a numbered version only goes up"
    return None


class AppendRules:
    """The checks, against the view as the transaction sees it."""

    def check(self, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        policies: dict[str, str] = {}  # changes within this append, in order
        retiring: set[tuple[str, str]] = set()
        for event in events:
            p = event.payload
            if event.type == "policy.version_changed":
                policy, version = p["policy"], version_key(p["version"])
                previous = version_key(p["previous_version"])
                problem = policy_problem(conn, policy, version, previous, policies, retiring)
                if problem is not None:
                    raise AppendRefused(event, problem)
                policies[policy] = version
                retiring.add((policy, previous))
            elif event.type == "revocation.issued" and _revocation_exists(conn, p["revocation_id"]):
                raise AppendRefused(event, f"revocation {p['revocation_id']!r} was issued already")


def _current(conn: Connection, policy: str) -> str:
    row = conn.execute("SELECT version FROM policies WHERE policy = ?", (policy,)).fetchone()
    return str(row[0]) if row else IMPLICIT


def _retired(conn: Connection, policy: str, version: str) -> bool:
    found = conn.execute("SELECT 1 FROM retired_versions WHERE policy = ? AND version = ?", (policy, version))
    return found.fetchone() is not None


def _revocation_exists(conn: Connection, revocation_id: str) -> bool:
    found = conn.execute("SELECT 1 FROM revocations WHERE revocation_id = ?", (revocation_id,))
    return found.fetchone() is not None
