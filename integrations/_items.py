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

from langgraph.store.base import InvalidNamespaceError
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


def id_prefixes(namespace_prefix: Namespace) -> list[str]:
    """What the ids of the items under ``namespace_prefix`` start with: its
    own items' and its deeper namespaces' (every item, for no prefix). A
    label is quoted, so neither ``/`` nor ``:`` is ever part of one."""
    if not namespace_prefix:
        return [PREFIX]
    labels = PREFIX + "/".join(map(_quoted, namespace_prefix))
    return [labels + ":", labels + "/"]


# a scope value is an identifier: no whitespace, no control character
_SCOPE_PLAIN = re.compile(r"[^\s\x00-\x1f%]+")


def scope_label(label: str) -> str:
    """A namespace label as a scope value (project, user): itself where a
    scope may hold it, else percent-quoted (a label with a space, a
    trailing newline), as are labels that hold ``%``, so no two labels
    share a scope value."""
    return label if _SCOPE_PLAIN.fullmatch(label) else quote(label, safe="")


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
                scope[name] = scope_label(labels.pop(0))
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
    """An item's value from a memory's content: a JSON object, else None
    (a memory of another writer under an item's id is no item)."""
    if content is None:
        return None
    try:
        data = json.loads(content)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


# LangGraph's stores refuse a filter key outside ``[a-zA-Z0-9_.-]``; this is
# the same rule for the letters and digits of every script, so a Korean key
# filters as an English one does
_FILTER_KEY = re.compile(r"[\w.-]+")


def checked_filter(filter: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A search's ``filter`` as memwarden's query takes it (``where``: the
    same language, dotted keys as paths); ``ValueError`` for a key that is
    not a path of letters, digits, ``_``, ``-`` and ``.``, as LangGraph's own
    stores refuse it."""
    if not filter:
        return None
    for key in filter:
        if not isinstance(key, str) or not _FILTER_KEY.fullmatch(key):
            raise ValueError(
                f"Invalid filter key: '{key}'. Filter keys must contain only letters, digits, "
                "underscores, dots, and hyphens."
            )
    return dict(filter)


def check_labels(labels: Sequence[Any]) -> None:
    """Namespace labels as LangGraph's ``BaseStore`` methods check them, for
    an operation handed to ``batch`` directly: each a non-empty string
    without ``.`` or NUL (``InvalidNamespaceError``, before anything runs)."""
    for label in labels:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r} found in {tuple(labels)}: a label is a non-empty "
                "string without periods ('.') or NUL bytes"
            )


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
