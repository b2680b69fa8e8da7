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
from dataclasses import dataclass

from memwarden.events import RecordedEvent, version_key, version_number

from ._errors import AppendRefused
from ._rows import Connection

IMPLICIT = "1"  # every policy's version until it is first set


@dataclass(frozen=True, slots=True)
class Versions:
    """What the view holds of one policy's versions, read in one statement."""

    current: str | None  # None: never set
    seq: int | None  # the seq that made ``current`` current
    retired: dict[str, int]  # each retired version key -> the seq that retired it

    @property
    def highest_numbered(self) -> int | None:
        """The highest numbered version it has ever been at (current or
        retired): a numbered version only goes up, past every one before
        it, whatever key versions came between."""
        found = [version_number(v) for v in (*self.retired, *([self.current] if self.current else []))]
        return max((n for n in found if n is not None), default=None)


_VERSIONS = (
    "SELECT version, seq, 0 FROM policies WHERE policy = ? "
    "UNION ALL SELECT version, retired_seq, 1 FROM retired_versions WHERE policy = ?"
)


def versions_of(conn: Connection, policy: str) -> Versions:
    current: str | None = None
    seq: int | None = None
    retired: dict[str, int] = {}
    for version, at, was_retired in conn.execute(_VERSIONS, (policy, policy)):
        if was_retired:
            retired[str(version)] = int(at)
        else:
            current, seq = str(version), int(at)
    return Versions(current, seq, retired)


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
    return problem_of(versions_of(conn, policy), policy, version, previous, pending, retiring)


def problem_of(
    known: Versions,
    policy: str,
    version: str,
    previous: str | None = None,
    pending: dict[str, str] | None = None,
    retiring: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
) -> str | None:
    """``policy_problem`` of what the view holds of the policy (``known``)."""
    current = (pending or {}).get(policy) or known.current or IMPLICIT
    if previous is not None and previous != current:
        return f"policy {policy!r} is at version {current!r}, not {previous!r}"
    if version == current:
        return f"policy {policy!r} is already at version {version!r}"
    if (policy, version) in retiring or version in known.retired:
        return f"version {version!r} of policy {policy!r} was retired and never comes back"
    seen = [version_number(v) for p, v in retiring if p == policy] + [version_number(current)]
    seen.append(known.highest_numbered)
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


def _revocation_exists(conn: Connection, revocation_id: str) -> bool:
    found = conn.execute("SELECT 1 FROM revocations WHERE revocation_id = ?", (revocation_id,))
    return found.fetchone() is not None
