"""What no append may do, whoever appends: the promises an import, a
migration or any future path must keep as a live write keeps them.

The engine checks a live write before it builds its events; these checks
run again on every append, in its transaction, before the view folds it
(the store's first subscriber), so a file of events (an export, crafted or
re-chained) is judged exactly like the writes that made it: an event that
would break a promise refuses the whole append, naming it.

* Policy versions: a change names the version that is current as its
  previous one, never makes a retired version current again, and a
  numbered version only goes up.

The rest is decided where it is kept: the times of imported events by the
log (``memwarden.events.check_imported``), revocation coverage and no
resurrection in the fold, erasure in the text store.
"""

from __future__ import annotations

from collections.abc import Sequence

from memwarden.events import RecordedEvent, version_key

from ._errors import AppendRefused
from ._rows import Connection

IMPLICIT = "1"  # every policy's version until it is first set


class AppendRules:
    """The checks, against the view as the transaction sees it."""

    def check(self, conn: Connection, events: Sequence[RecordedEvent]) -> None:
        policies: dict[str, str] = {}  # changes within this append, in order
        retired: set[tuple[str, str]] = set()
        for event in events:
            if event.type == "policy.version_changed":
                self._policy_change(conn, event, policies, retired)

    def _policy_change(
        self, conn: Connection, event: RecordedEvent, policies: dict[str, str], retired: set[tuple[str, str]]
    ) -> None:
        p = event.payload
        policy, version, previous = p["policy"], version_key(p["version"]), version_key(p["previous_version"])
        current = policies.get(policy) or _current(conn, policy)
        if previous != current:
            raise AppendRefused(event, f"policy {policy!r} is at version {current!r}, not {previous!r}")
        if version == current:
            raise AppendRefused(event, f"policy {policy!r} is already at version {version!r}")
        if (policy, version) in retired or _retired(conn, policy, version):
            raise AppendRefused(event, f"version {version!r} of policy {policy!r} was retired and never comes back")
        if version.isdigit() and current.isdigit() and int(version) < int(current):
            raise AppendRefused(event, f"policy {policy!r} is at version {current}; a numbered version only goes up")
        policies[policy] = version
        retired.add((policy, current))


def _current(conn: Connection, policy: str) -> str:
    row = conn.execute("SELECT version FROM policies WHERE policy = ?", (policy,)).fetchone()
    return str(row[0]) if row else IMPLICIT


def _retired(conn: Connection, policy: str, version: str) -> bool:
    found = conn.execute("SELECT 1 FROM retired_versions WHERE policy = ? AND version = ?", (policy, version))
    return found.fetchone() is not None
