"""Sinks as the policy file names them: the copies outside memwarden that a
revocation must reach (a Redis cache, a webhook receiver in front of an
index), what each receives and how it is read back.

[sinks.agent-cache]
kind = "redis"
url = "redis://127.0.0.1:6379/0"
prefix = "memwarden:"          # keys are PREFIX + tenant + ":" + memory_id
ttl = "1h"                     # a filled entry's TTL when its memory has no expires_at

[sinks.support-index]
kind = "webhook"
url = "https://index.internal/memwarden/notices"
probe_url = "https://index.internal/memwarden/probe"
secret_env = "SUPPORT_INDEX_SECRET"   # or secret_file = "/run/secrets/support-index"
tenants = ["acme"]                    # default: every tenant
events = ["revocation.issued", "memory.erased"]   # default: all four
readback_deadline = "15m"             # read back until confirmed or this long after the revocation
max_attempts = 10                     # then the notice is a dead letter

[sinks.vector-db]
kind = "webhook"
url = "https://vectors.internal/memwarden/notices"
ack = true                            # instead of probe_url: a signed acknowledgement read-back
secret_env = "VECTOR_DB_SECRET"

[sinks.vectors]
kind = "index"                        # the engine's own vector index, read back through recall

A webhook sink is read back one of two ways, exactly one named:
``probe_url`` (memwarden asks, signed, which covered ids it still holds) or
``ack = true`` (the sink acknowledges a notice, in its answer to the
delivery or later by ``POST /v1/sinks/NAME/ack`` / ``Warden.sink_ack``,
with a body ``{"type": "ack", "notice_id", "removed": {tenant: [ids]}}``
signed as Standard Webhooks specifies with the sink's own secret; an
acknowledgement that does not verify, is more than five minutes old or
was received before is refused, and the covered ids it does not name as
removed are the ones that leak).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from memwarden.events import parse_duration
from standardwebhooks import Webhook

from .._errors import InvalidInput

NOTICE_TYPES = ("revocation.issued", "memory.erased", "memory.invalidated", "policy.version_changed")
KINDS = ("webhook", "redis", "index")
INDEX_URL = "memwarden:vector-index"  # an index sink's address: the engine's own vector projection
COMMON = {
    "kind",
    "url",
    "tenants",
    "events",
    "readback_deadline",
    "max_attempts",
    "retry_base",
    "retry_ceiling",
    "timeout",
    "lease",
}
BY_KIND = {"webhook": {"probe_url", "ack", "secret_env", "secret_file"}, "redis": {"prefix", "ttl"}, "index": set()}


@dataclass(frozen=True)
class SinkSpec:
    name: str
    kind: str
    url: str
    tenants: frozenset[str] | None = None  # None: every tenant
    events: tuple[str, ...] = NOTICE_TYPES
    readback_deadline: timedelta = timedelta(minutes=15)
    max_attempts: int = 10
    retry_base: float = 1.0  # seconds before the first retry; doubled each failure
    retry_ceiling: float = 300.0
    timeout: float = 10.0
    lease: float = 30.0  # how long a node holds a notice it is delivering before another may take it
    probe_url: str | None = None
    ack: bool = False  # read back by the sink's signed acknowledgement, not a probe
    secret_env: str | None = None
    secret_file: str | None = None
    prefix: str = "memwarden:"
    ttl: timedelta = timedelta(hours=1)

    def receives(self, notice_type: str) -> bool:
        return notice_type in self.events

    def covers(self, tenant: str) -> bool:
        return self.tenants is None or tenant in self.tenants

    def secret(self) -> str:
        """The signing secret, read when it is used (never stored, never logged)."""
        field = f"sinks.{self.name}"
        if self.secret_env:
            where, value = f"{field}.secret_env", os.environ.get(self.secret_env, "").strip()
            if not value:
                raise InvalidInput(where, f"environment variable {self.secret_env} is not set")
        else:
            assert self.secret_file is not None
            where = f"{field}.secret_file"
            try:
                value = Path(self.secret_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise InvalidInput(where, f"{self.secret_file}: {exc.strerror or exc}") from None
        try:
            Webhook(value)  # Standard Webhooks' own reading: whsec_ and base64, or base64
        except Exception:
            raise InvalidInput(where, "is not a Standard Webhooks secret (whsec_ followed by base64)") from None
        return value

    def describe(self) -> dict[str, Any]:
        """What the console and ``sinks list`` show (no secret, no password)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "url": _no_password(self.url),
            "probe_url": self.probe_url,
            "readback": self.kind if self.kind != "webhook" else ("ack" if self.ack else "probe"),
            "tenants": sorted(self.tenants) if self.tenants is not None else None,
            "events": list(self.events),
            "readback_deadline_s": self.readback_deadline.total_seconds(),
            "max_attempts": self.max_attempts,
        }


def _no_password(url: str) -> str:
    """``url`` as shown: its password and its query's values (a token may ride there) masked."""
    parts = urlsplit(url)
    if parts.query:
        masked = "&".join(f"{name}=***" for name, _ in parse_qsl(parts.query, keep_blank_values=True))
        parts = parts._replace(query=masked)
    if parts.password is None:
        return parts.geturl()
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=netloc).geturl()


def sinks_from_table(table: dict[str, Any]) -> tuple[SinkSpec, ...]:
    """The ``[sinks.NAME]`` tables of a policy file, each checked; a bad one
    is refused naming its field (``sinks.NAME.KEY``)."""
    return tuple(_sink(name, spec) for name, spec in sorted(table.items()))


def _sink(name: str, spec: Any) -> SinkSpec:
    field = f"sinks.{name}"
    if not name or not all(c.isalnum() or c in "-_." for c in name) or len(name) > 64:
        raise InvalidInput(field, "a sink's name is letters, digits, '-', '_' or '.', at most 64")
    if not isinstance(spec, dict):
        raise InvalidInput(field, "must be a table")
    kind = spec.get("kind")
    if kind not in KINDS:
        raise InvalidInput(f"{field}.kind", f"must be one of {', '.join(KINDS)}")
    unknown = set(spec) - COMMON - BY_KIND[kind]
    if unknown:
        raise InvalidInput(f"{field}.{sorted(unknown)[0]}", f"unknown setting for a {kind} sink")
    if kind == "index":
        if "url" in spec:
            raise InvalidInput(f"{field}.url", "an index sink is memwarden's own vector index: it takes no url")
        url = INDEX_URL
    else:
        url = _url(f"{field}.url", spec.get("url"), kind)
    out: dict[str, Any] = {"name": name, "kind": kind, "url": url}
    if "tenants" in spec:
        tenants = spec["tenants"]
        if not isinstance(tenants, list) or not tenants or not all(isinstance(t, str) and t for t in tenants):
            raise InvalidInput(f"{field}.tenants", "must be a non-empty list of tenant names")
        out["tenants"] = frozenset(tenants)
    if "events" in spec:
        events = spec["events"]
        if not isinstance(events, list) or not events or any(e not in NOTICE_TYPES for e in events):
            raise InvalidInput(f"{field}.events", f"must be a non-empty list of {', '.join(NOTICE_TYPES)}")
        out["events"] = tuple(e for e in NOTICE_TYPES if e in events)
    for key in ("readback_deadline", "ttl"):
        if key in spec:
            try:
                out[key] = parse_duration(spec[key])
            except ValueError as exc:
                raise InvalidInput(f"{field}.{key}", str(exc)) from None
    for key, low, high in (
        ("max_attempts", 1, 1000),
        ("retry_base", 0.01, 86400),
        ("retry_ceiling", 0.01, 86400),
        ("timeout", 0.1, 600),
        ("lease", 1, 3600),
    ):
        if key in spec:
            value = spec[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
                raise InvalidInput(f"{field}.{key}", f"must be a number from {low} to {high}")
            out[key] = int(value) if key == "max_attempts" else float(value)
    if kind == "webhook":
        ack = spec.get("ack", False)
        if not isinstance(ack, bool):
            raise InvalidInput(f"{field}.ack", "must be true or false")
        if ack and "probe_url" in spec:
            raise InvalidInput(f"{field}.probe_url", "give probe_url or ack = true (signed acknowledgements), not both")
        if ack:
            out["ack"] = True
        elif not spec.get("probe_url"):
            raise InvalidInput(f"{field}.probe_url", "is required (or ack = true: a signed acknowledgement read-back)")
        else:
            out["probe_url"] = _url(f"{field}.probe_url", spec["probe_url"], kind)
        given = [k for k in ("secret_env", "secret_file") if spec.get(k)]
        if len(given) != 1:
            raise InvalidInput(f"{field}.secret_env", "give exactly one of secret_env or secret_file")
        if not isinstance(spec[given[0]], str):
            raise InvalidInput(f"{field}.{given[0]}", "must be a string")
        out[given[0]] = spec[given[0]]
    elif kind == "redis" and "prefix" in spec:
        if not isinstance(spec["prefix"], str) or len(spec["prefix"]) > 200:
            raise InvalidInput(f"{field}.prefix", "must be a string of at most 200 characters")
        out["prefix"] = spec["prefix"]
    return SinkSpec(**out)


def _url(field: str, value: Any, kind: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInput(field, "is required")
    schemes = ("http", "https") if kind == "webhook" else ("redis", "rediss", "unix")
    scheme = urlsplit(value).scheme
    if scheme not in schemes:
        raise InvalidInput(field, f"must be a {' or '.join(s + '://' for s in schemes)} URL")
    return value
