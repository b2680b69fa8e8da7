"""Time-to-live per kind of memory, from a TOML policy file.

[kinds.research_result]
ttl = "1h"
reverify = true          # the scheduler re-verifies these when due
[kinds.project_rule]
review = "30d"           # valid until an explicit review
[kinds.permission]
events_only = true       # never expires by time; only events end it
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from memwarden.events import parse_duration

from ._errors import InvalidInput

DEFAULTS: dict[str, dict[str, Any]] = {
    "research_result": {"ttl": "1h"},
    "external_fact": {"ttl": "6h"},
    "project_rule": {"review": "30d"},
    "permission": {"events_only": True},
    "tool_result": {"ttl": "1h"},
    "agent_memory": {"events_only": True},  # Memory API entries: until changed or revoked
}


@dataclass(frozen=True)
class KindRule:
    kind: str
    ttl: timedelta | None  # None: events only
    review: bool = False
    reverify: bool = False


class TtlPolicy:
    def __init__(self, kinds: dict[str, dict[str, Any]] | None = None) -> None:
        merged = {**DEFAULTS, **(kinds or {})}
        self.rules = {kind: _rule(kind, spec) for kind, spec in merged.items()}

    @classmethod
    def from_file(cls, path: str | Path) -> TtlPolicy:
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise InvalidInput("policy_file", f"{path}: {exc}") from None
        kinds = data.get("kinds", {})
        if not isinstance(kinds, dict):
            raise InvalidInput("policy_file", f"{path}: [kinds] must be a table")
        return cls(kinds)

    def rule(self, kind: str) -> KindRule | None:
        return self.rules.get(kind)

    def ttl_for(self, kind: str) -> timedelta | None:
        """The TTL of ``kind``; None means events only. Unknown kinds are
        refused, so nothing is kept forever by accident."""
        rule = self.rules.get(kind)
        if rule is None:
            raise InvalidInput(
                "expires_at",
                f"kind {kind!r} has no TTL in the policy file; give --expires-at or --ttl, "
                f"or add [kinds.{kind}] to the policy (known: {', '.join(sorted(self.rules))})",
            )
        return rule.ttl


def _rule(kind: str, spec: dict[str, Any]) -> KindRule:
    if not isinstance(spec, dict):
        raise InvalidInput(f"kinds.{kind}", "must be a table")
    unknown = set(spec) - {"ttl", "review", "events_only", "reverify"}
    if unknown:
        raise InvalidInput(f"kinds.{kind}", f"unknown keys {sorted(unknown)}")
    given = [k for k in ("ttl", "review", "events_only") if spec.get(k)]
    if len(given) != 1:
        raise InvalidInput(f"kinds.{kind}", "give exactly one of ttl, review or events_only = true")
    try:
        if spec.get("events_only"):
            return KindRule(kind, None, reverify=bool(spec.get("reverify")))
        if spec.get("review"):
            return KindRule(kind, parse_duration(spec["review"]), review=True, reverify=bool(spec.get("reverify")))
        return KindRule(kind, parse_duration(spec["ttl"]), reverify=bool(spec.get("reverify")))
    except ValueError as exc:
        raise InvalidInput(f"kinds.{kind}", str(exc)) from None
