"""The operator's policy file (TOML): time-to-live per kind of memory, what
fetches may connect to, and the limits on input.

[kinds.research_result]
ttl = "1h"
reverify = true          # the scheduler re-verifies these when due
[kinds.project_rule]
review = "30d"           # valid until an explicit review
[kinds.permission]
events_only = true       # never expires by time; only events end it

[fetch]
allow = ["10.20.0.0/16", "wiki.internal"]   # internal hosts or networks a source may name
timeout = 10             # seconds for a whole fetch, redirects included
max_bytes = 5242880
max_redirects = 5
backoff = 30             # seconds before the scheduler fetches again from a host that failed (doubles)

[limits]
max_content_bytes = 1048576
max_derivation_depth = 1000

[scheduler]              # seconds between runs of each job; a job not named runs every --scheduler-interval
expiry = 5
readback = 5
reverify = 60
erasure_purge = 300
sinks = 5

[sinks.NAME]             # a copy outside memwarden a revocation must reach (``sinks._config``)
kind = "redis"
url = "redis://127.0.0.1:6379/0"
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from memwarden.events import parse_duration

from ._addresses import AddressPolicy
from ._errors import InvalidInput
from ._fetchers import Fetchers
from ._limits import Limits
from .recall._embedders import Embedder, embedder_from_settings
from .sinks._config import SinkSpec, sinks_from_table

DEFAULTS: dict[str, dict[str, Any]] = {
    "research_result": {"ttl": "1h"},
    "external_fact": {"ttl": "6h"},
    "project_rule": {"review": "30d"},
    "permission": {"events_only": True},
    "tool_result": {"ttl": "1h"},
    "agent_memory": {"events_only": True},  # Memory API entries: until changed or revoked
    "store_item": {"events_only": True},  # a framework store's items (LangGraph): until their TTL, if they give one
}


# what a [kinds.KIND] table may hold, and the tables a policy file may have
KIND_KEYS = ("ttl", "review", "events_only", "reverify")
TABLES = ("embedder", "fetch", "kinds", "limits", "scheduler", "sinks")


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
        return PolicyFile.read(path).ttl

    def rule(self, kind: str) -> KindRule | None:
        return self.rules.get(kind)

    def ttl_for(self, kind: str) -> timedelta | None:
        """The TTL of ``kind``; None means events only. Unknown kinds are
        refused, so nothing is kept forever by accident."""
        rule = self.rules.get(kind)
        if rule is None:
            raise InvalidInput(
                "kind",  # the kind is what the policy does not know; a TTL given by hand is the way round
                f"kind {kind!r} has no TTL in the policy file; give --expires-at or --ttl, "
                f"or add [kinds.{kind}] to the policy (known: {', '.join(sorted(self.rules))})",
            )
        return rule.ttl


def _rule(kind: str, spec: dict[str, Any]) -> KindRule:
    if not isinstance(spec, dict):
        raise InvalidInput(f"kinds.{kind}", "must be a table")
    unknown = set(spec) - set(KIND_KEYS)
    if unknown:
        raise InvalidInput(f"kinds.{kind}", f"unknown keys {sorted(unknown)}")
    given = [k for k in ("ttl", "review", "events_only") if spec.get(k)]
    if len(given) != 1:
        raise InvalidInput(f"kinds.{kind}", "give exactly one of ttl, review or events_only = true")
    if spec.get("events_only"):
        return KindRule(kind, None, reverify=bool(spec.get("reverify")))
    key = given[0]  # "ttl" or "review": the key a bad duration is named by
    try:
        return KindRule(kind, parse_duration(spec[key]), review=key == "review", reverify=bool(spec.get("reverify")))
    except ValueError as exc:
        raise InvalidInput(f"kinds.{kind}.{key}", str(exc)) from None


FETCH_KEYS: dict[str, type[Any] | tuple[type[Any], ...]] = {
    "allow": list,
    "timeout": (int, float),
    "max_bytes": int,
    "max_redirects": int,
    "backoff": (int, float),
}


# the jobs, as the policy file's [scheduler] table names them: each runs on
# its own interval as a job of its own, so a slow one delays no other
JOBS = ("expiry", "readback", "reverify", "erasure_purge", "sinks")


def schedule_from_table(table: Mapping[str, Any]) -> dict[str, float]:
    """The [scheduler] table: seconds between runs of each job it names."""
    out: dict[str, float] = {}
    for job, seconds in table.items():
        if job not in JOBS:
            raise InvalidInput(f"scheduler.{job}", f"unknown job (known: {', '.join(JOBS)})")
        if not isinstance(seconds, int | float) or isinstance(seconds, bool) or not 0.1 <= seconds <= 86400:
            raise InvalidInput(f"scheduler.{job}", "must be seconds from 0.1 to 86400")
        out[job] = float(seconds)
    return out


@dataclass(frozen=True)
class PolicyFile:
    """Everything a policy file sets; a missing table keeps the defaults."""

    ttl: TtlPolicy = field(default_factory=TtlPolicy)
    fetch: dict[str, Any] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    sinks: tuple[SinkSpec, ...] = ()
    embedding: dict[str, Any] = field(default_factory=dict)  # the [embedder] table (``recall._embedders``)
    schedule: dict[str, float] = field(default_factory=dict)  # the [scheduler] table (``_scheduler``)

    @classmethod
    def read(cls, path: str | Path) -> PolicyFile:
        import tomllib  # with a file to read: a command run without one starts without the parser

        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise InvalidInput("policy_file", f"{path}: {exc}") from None
        unknown = set(data) - set(TABLES)
        if unknown:
            raise InvalidInput("policy_file", f"{path}: unknown tables {sorted(unknown)} (known: {', '.join(TABLES)})")
        tables = {}
        for name in TABLES:
            tables[name] = data.get(name, {})
            if not isinstance(tables[name], dict):
                raise InvalidInput("policy_file", f"{path}: [{name}] must be a table")
        settings = cls(
            TtlPolicy(tables["kinds"]),
            _fetch_settings(tables["fetch"]),
            Limits.from_settings(tables["limits"]),
            sinks_from_table(tables["sinks"]),
            tables["embedder"],
            schedule_from_table(tables["scheduler"]),
        )
        settings.embedder(settings.fetchers())  # a wrong [embedder] is named now, not at the first save
        return settings

    def fetchers(self, *, allow_local: bool = False) -> Fetchers:
        return Fetchers.from_settings(self.fetch, allow_local=allow_local)

    def embedder(self, fetchers: Fetchers) -> Embedder | None:
        return embedder_from_settings(self.embedding, fetchers)


def _fetch_settings(table: dict[str, Any]) -> dict[str, Any]:
    for key, value in table.items():
        kind = FETCH_KEYS.get(key)
        if kind is None:
            raise InvalidInput(f"fetch.{key}", f"unknown setting (known: {', '.join(sorted(FETCH_KEYS))})")
        if not isinstance(value, kind) or isinstance(value, bool):
            raise InvalidInput(f"fetch.{key}", "has the wrong type")
        if key != "allow" and not 0 < value <= 2**31:
            raise InvalidInput(f"fetch.{key}", "must be positive")
    if any(not isinstance(e, str) for e in table.get("allow", [])):
        raise InvalidInput("fetch.allow", "must be a list of host names and networks")
    try:
        AddressPolicy.of(table.get("allow", []))
    except ValueError as exc:
        raise InvalidInput("fetch.allow", str(exc)) from None
    return table
