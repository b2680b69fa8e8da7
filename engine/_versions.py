"""Policy versions: which version of a policy is current, and the rule that
a version once left behind is retired for good.

A memory records the version of its policy it was checked under
(``revocation_version``); it is usable only while that is the policy's
current version. ``policy set`` names a new current version and retires the
one before it, so every memory checked under an older version leaves the
read paths until it is re-verified, and no later change can bring the old
version (and its memories) back. Numbered versions also only go up.

The first version named for a policy nobody has set (every policy starts
at the implicit version 1) becomes its current version: a save or an
import under ``policy-42-v7`` on a fresh database adopts it. Once a memory
is recorded under the implicit version, naming another would retire it:
that is ``policy set``'s to do, which says what it retires.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from memwarden.events import version_key, version_value
from memwarden.projections import CheckedUnder, ViewReader

from ._errors import Forbidden, InvalidInput

if TYPE_CHECKING:
    from memwarden.events import PolicyVersionChanged
    from pydantic import TypeAdapter


@functools.cache
def _version() -> TypeAdapter[int | str]:
    """The field type of a version, made when first asked: a read that
    names no version loads no pydantic."""
    from memwarden.events import PolicyVersion
    from pydantic import TypeAdapter

    return TypeAdapter(PolicyVersion)


def parse_version(value: Any, field: str) -> int | str:
    """A policy version as given (``7``, ``"7"``, ``"policy-42-v7"``), or refused."""
    from pydantic import ValidationError

    try:
        return _version().validate_python(value)
    except ValidationError:
        raise InvalidInput(
            field,
            f"{str(value)[:40]!r} is not a version: a number from 1 to 2**53, or a key of letters, digits "
            "and . _ : + - (up to 128, starting with a letter or digit)",
        ) from None


# every policy is at this version until it is first set
IMPLICIT_VERSION = 1


def current_version(view: ViewReader, policy: str) -> int | str | None:
    """The current version of ``policy``, or None if it was never set."""
    key = view.policy(policy).current
    return None if key is None else version_value(key)


def version_of(view: ViewReader, policy: str) -> int | str:
    """The version a memory of ``policy`` is checked under now."""
    current = current_version(view, policy)
    return IMPLICIT_VERSION if current is None else current


def in_force(policies: dict[str, str], policy: str) -> int | str:
    """``version_of`` from a map already read (``current_policies``)."""
    return policies.get(policy, IMPLICIT_VERSION)


def is_retired(view: ViewReader, policy: str, version: int | str) -> bool:
    """Whether ``version`` was left behind: once current and then replaced,
    or a number below the highest the policy was ever at."""
    version = parse_version(version, "revocation_version")
    found = view.policy(policy, version_key(version))
    if found.retired_seq is not None:
        return True
    highest = found.highest_numbered
    current = None if found.current is None else version_value(found.current)
    return isinstance(version, int) and highest is not None and version < highest and version != current


def change(
    view: ViewReader, policy: str, version: int | str, *, actor: str, field: str = "version"
) -> PolicyVersionChanged:
    """The event that makes ``version`` current (``policy set``)."""
    version = parse_version(version, field)
    current = current_version(view, policy)
    previous = IMPLICIT_VERSION if current is None else current
    problem = view.policy(policy, version_key(version)).problem  # the rule every append passes
    if problem is not None:
        raise InvalidInput(field, problem)
    return _event(policy, version, previous, actor, field)


def adopt(
    view: ViewReader,
    policy: str,
    version: int | str,
    *,
    actor: str,
    may_set: bool,
    field: str = "revocation_version",
) -> PolicyVersionChanged | None:
    """Check that a memory may be recorded under ``version`` of ``policy``.

    None: it is the current version. An event to append: the policy was never
    set and this first named version becomes current, which only a caller
    who may set policies (``may_set``) may do: a policy's version holds for
    every tenant. Refused: the version is retired, or another version is
    current (name it with ``policy set``).
    """
    version = parse_version(version, field)
    current = current_version(view, policy)
    if current is not None and version_key(version) == version_key(current):
        return None
    if current is None:
        if version_key(version) == version_key(IMPLICIT_VERSION):
            return None
        problem = view.policy(policy, version_key(version)).problem
        if problem is not None:
            raise InvalidInput(field, problem)
        if not may_set:
            raise Forbidden(
                f"policy {policy!r} is at its first version, 1; recording a memory under {version!r} would make "
                f"{version!r} current for every tenant, which only a security key does (`memwarden policy set`)",
                field=field,
            )
        if view.covered(CheckedUnder(policy, version_key(IMPLICIT_VERSION))):
            # (checked after may_set: they are every tenant's, of which an agent learns nothing)
            # adopting would retire them, for every tenant, inside a save's answer: that is a
            # policy change, made (and previewed with --dry-run) where it says what it retires
            raise InvalidInput(
                field,
                f"policy {policy!r} holds memories under its first version, 1: recording one under {version!r} "
                f"would retire them all; make {version!r} current with `memwarden policy set {policy} {version}` "
                "(--dry-run says what it retires), then save",
            )
        return _event(policy, version, IMPLICIT_VERSION, actor, field)
    if view.policy(policy, version_key(version)).retired_seq is not None:
        raise InvalidInput(
            field, f"version {version!r} of policy {policy!r} was retired; a retired version never comes back"
        )
    raise InvalidInput(
        field,
        f"policy {policy!r} is at version {current!r}, not {version!r}; a memory is recorded under the current "
        f"version (make {version!r} current with `memwarden policy set {policy} {version}`)",
    )


def _event(policy: str, version: int | str, previous: int | str, actor: str, field: str) -> PolicyVersionChanged:
    from memwarden.events import PolicyVersionChanged

    from ._validation import build

    return build(PolicyVersionChanged, policy=policy, version=version, previous_version=previous, actor=actor)
