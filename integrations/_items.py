"""How a framework store's items are memories: a namespace and key become a
memory id and a scope, a JSON value becomes a memory's content, and back.

The default mapping (``NamespaceScope``): the first label of a namespace is
the tenant, the second the project, the third the user; or, with a fixed
``tenant``, the first label is the project and the second the user. Deeper
labels live only in the memory id, which holds the whole namespace and the
key (each label percent-quoted, so no two items share an id):
``lg:<label>/<label>/...:<key>``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import quote, unquote

from memwarden.engine import InvalidInput
from memwarden.events import MAX_DURATION, canonical_json

PREFIX = "lg:"
KIND = "store_item"
MAX_ID = 512  # a memory id's length (memwarden.events Identifier)
MAX_SUMMARY = 4096
# the value fields whose text a memory's summary is taken from, first found
SUMMARY_FIELDS = ("summary", "content", "text", "memory", "title")

Namespace = tuple[str, ...]
ScopeOf = Callable[[Namespace], dict[str, str]]


# what ``quote(..., safe="")`` leaves as it is: a label of only these needs no quoting
_PLAIN = re.compile(r"[A-Za-z0-9_.~-]*")


def _quoted(label: str) -> str:
    # every get and put makes an id: most labels are plain, and matching one
    # costs a fraction of quote's encode, scan and join
    return label if _PLAIN.fullmatch(label) else quote(label, safe="")


def memory_id_of(namespace: Namespace, key: str) -> str:
    """The memory id of an item: its whole namespace and its key."""
    if not isinstance(key, str) or not key:
        raise ValueError("key: must be a non-empty string")
    memory_id = PREFIX + "/".join(map(_quoted, namespace)) + ":" + _quoted(key)
    if len(memory_id) > MAX_ID:
        raise ValueError(f"namespace and key: make an id of {len(memory_id)} characters; at most {MAX_ID}")
    return memory_id


def item_of(memory_id: str) -> tuple[Namespace, str] | None:
    """(namespace, key) of a memory id ``memory_id_of`` made; None for another id."""
    if not memory_id.startswith(PREFIX) or ":" not in memory_id[len(PREFIX) :]:
        return None
    labels, _, key = memory_id[len(PREFIX) :].rpartition(":")
    return tuple(unquote(label) for label in labels.split("/")) if labels else (), unquote(key)


def id_prefix(namespace_prefix: Namespace) -> str:
    """What the ids of every item under ``namespace_prefix`` start with."""
    if not namespace_prefix:
        return PREFIX
    return PREFIX + "/".join(quote(label, safe="") for label in namespace_prefix)


def under(memory_id: str, namespace_prefix: Namespace) -> bool:
    found = item_of(memory_id)
    return found is not None and found[0][: len(namespace_prefix)] == tuple(namespace_prefix)


@dataclass(frozen=True)
class NamespaceScope:
    """The documented default: labels to tenant, project and user."""

    tenant: str | None = None

    def __call__(self, namespace: Namespace) -> dict[str, str]:
        labels = list(namespace)
        if self.tenant is None:
            if not labels:
                raise ValueError("namespace: its first label names the tenant (or give the store a tenant)")
            scope = {"tenant": labels.pop(0)}
        else:
            scope = {"tenant": self.tenant}
        for name in ("project", "user"):
            if labels:
                scope[name] = labels.pop(0)
        return scope

    def filters(self, namespace_prefix: Namespace) -> tuple[str | None, dict[str, str]]:
        """(tenant or None for every tenant, scope filters) for a search
        under ``namespace_prefix``: what the query itself can narrow to."""
        scope = self(namespace_prefix) if (namespace_prefix or self.tenant is not None) else {}
        tenant = scope.pop("tenant", None)
        return tenant, scope


def summary_of(value: Mapping[str, Any], key: str) -> str:
    """A memory's summary from an item's value: its first text field of
    ``SUMMARY_FIELDS``, else the key. A NUL, which no store keeps as text,
    becomes U+FFFD here: the summary is only derived, and the value itself
    (JSON, where a NUL is ``\\u0000``) keeps it exactly, so an item that
    holds one is stored rather than refused for a field its writer never gave."""
    for name in SUMMARY_FIELDS:
        text = value.get(name)
        if isinstance(text, str) and text.strip():
            return text[:MAX_SUMMARY].replace("\x00", "\ufffd")
    return key


def ttl_of(minutes: float | None) -> timedelta | None:
    """A put's ``ttl`` (LangGraph's minutes) as the engine's duration, which
    the engine checks; one past any date is refused here in the same words."""
    if minutes is None:
        return None
    if isinstance(minutes, bool) or not isinstance(minutes, int | float) or math.isnan(minutes):
        raise InvalidInput("ttl", f"must be a number of minutes, not {minutes!r}")
    try:
        return timedelta(minutes=minutes)
    except OverflowError:
        raise InvalidInput("ttl", f"{minutes:g} minutes is longer than {MAX_DURATION.days}d (100 years)") from None


def content_of(value: Mapping[str, Any]) -> str:
    if not isinstance(value, Mapping):
        raise ValueError(f"value: must be a JSON object, not {type(value).__name__}")
    return canonical_json(dict(value))


def value_of(content: str | None) -> dict[str, Any] | None:
    if content is None:
        return None
    data = json.loads(content)
    return data if isinstance(data, dict) else {"value": data}


def matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """``filter`` as LangGraph documents it: exact matches (nested objects
    compared field by field, lists element by element) and the operators
    ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``."""
    return not filter or all(_compare(value.get(name), wanted) for name, wanted in filter.items())


def _compare(have: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            return all(_operator(have, op, operand) for op, operand in wanted.items())
        return isinstance(have, Mapping) and all(_compare(have.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(have, (list, tuple))
            and len(have) == len(wanted)
            and all(_compare(h, w) for h, w in zip(have, wanted, strict=True))
        )
    return have == wanted


def _operator(have: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return have == operand
    if op == "$ne":
        return have != operand
    if op in ("$gt", "$gte", "$lt", "$lte"):
        try:
            a, b = float(have), float(operand)
        except (TypeError, ValueError):
            return False
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise ValueError(f"filter: unsupported operator {op!r} (use $eq, $ne, $gt, $gte, $lt, $lte)")


def namespace_matches(namespace: Namespace, conditions: Sequence[Any]) -> bool:
    """Every ``MatchCondition`` (prefix or suffix, ``*`` a wildcard label)."""
    for condition in conditions:
        path = tuple(condition.path)
        if len(namespace) < len(path):
            return False
        # the namespace is at least as long as the path: compare the path's labels
        if condition.match_type == "prefix":
            pairs = zip(namespace[: len(path)], path, strict=True)
        else:
            pairs = zip(namespace[len(namespace) - len(path) :], path, strict=True)
        if any(want != "*" and have != want for have, want in pairs):
            return False
    return True
