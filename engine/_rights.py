"""Who may do what: the one place that decides rights.

Every ``Warden`` operation names its caller, a ``Principal``, and asks
here before it does anything: whether the caller's role may do that kind
of thing (``authorize``), which tenants and agent its reads and writes are
confined to (``Principal.access``, which every statement that names or
lists memories carries into its WHERE), and what of a memory it may not
use it still receives (``shows_text``). No operation has a default caller,
and no face checks a role or narrows a tenant itself: a face only says who
asks, so a new face inherits these rules and cannot re-implement them.

Roles: ``agent`` keys read and write their own tenants (and, bound to an
agent name, that agent's memories only); ``security`` keys revoke, erase,
set policies and read everything; ``auditor`` keys read everything and
write nothing. Two principals are no key: ``OPERATOR``, the local user of
the command line (the file's owner, who could open the database itself),
and ``SYSTEM``, memwarden's own jobs (the scheduler).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from memwarden.projections import Access

from ._errors import Forbidden, InvalidInput, ScopeNotAllowed

if TYPE_CHECKING:  # the gate counts its decisions in Prometheus: a command line needs neither to start
    from ._gate import Decision, ParentState

KEY_ROLES = ("agent", "security", "auditor")
STAFF = frozenset({"security", "auditor", "operator", "system"})

# what each kind of operation needs: the roles that may do it
RIGHTS: Mapping[str, frozenset[str]] = {
    # saving memories: an agent in its own scope; the local operator anywhere
    "save": frozenset({"agent", "operator"}),
    # reading the usable view (agents: their own tenants and agent)
    "read": frozenset({"agent", "security", "auditor", "operator", "system"}),
    # re-checking against the source writes events, so not for auditors
    "verify": frozenset({"agent", "security", "operator", "system"}),
    # taking memories out
    "revoke": frozenset({"security", "operator"}),
    # destroying a memory's texts: staff anywhere; an agent key its own memories
    # only (every erasure is confined to what the caller may see), as a
    # framework store's delete asks
    "erase": frozenset({"agent", "security", "operator"}),
    "set_policy": frozenset({"security", "operator"}),
    # the record of what happened: revocations, read-backs, the past, the chain, counters, the feed
    "review": frozenset({"security", "auditor", "operator", "system"}),
    # the read-back's own record: memwarden's jobs and the staff who revoke
    "confirm": frozenset({"security", "operator", "system"}),
    # the store itself: rebuild, export, import, migrate, record files, keys
    "operate": frozenset({"operator"}),
}


@dataclass(frozen=True)
class Principal:
    """Who is asking: a key's id and role, and for an agent key the tenants
    (and agent name) it is bound to."""

    key_id: str
    role: str
    tenants: tuple[str, ...] = ()
    agent: str | None = None
    internal: bool = False  # this server's own calls to itself (the read-back over HTTP)

    @property
    def access(self) -> Access:
        """What this caller may see and touch, as the store's queries take
        it: staff every tenant; an agent key its tenants, and bound to an
        agent name, only that agent's memories."""
        if self.role in STAFF:
            return Access.system()
        return Access(self.tenants, self.agent, unsearchable=tuple(sorted(WITHHELD)))

    @property
    def is_staff(self) -> bool:
        return self.role in STAFF

    @property
    def actor(self) -> str:
        """How events this caller appends name it."""
        if self.role == "operator":
            return "operator"
        if self.role == "system":
            return "memwarden"
        return f"key:{self.key_id}"

    def as_dict(self) -> dict[str, Any]:
        return {"key_id": self.key_id, "role": self.role, "tenants": list(self.tenants), "agent": self.agent}


OPERATOR = Principal("local", "operator")
SYSTEM = Principal("memwarden", "system")


def authorize(caller: Principal, action: str, *, field: str | None = None) -> Principal:
    """``caller`` if its role may do ``action``; otherwise ``Forbidden``
    (naming ``field`` when a field of the request asks for the right)."""
    if not isinstance(caller, Principal):
        raise TypeError(f"caller must be a Principal, not {type(caller).__name__}")
    allowed = RIGHTS[action]
    if caller.role not in allowed:
        needs = " or ".join(sorted(r for r in allowed if r in KEY_ROLES)) or "the local operator"
        raise Forbidden(f"the {caller.role} role may not do this (needs {needs})", field=field, role=caller.role)
    return caller


def may(caller: Principal, action: str) -> bool:
    """Whether ``caller`` may do ``action`` (what a page offers it)."""
    return caller.role in RIGHTS[action]


P = ParamSpec("P")
R = TypeVar("R")


def operation(action: str) -> Callable[[Callable[Concatenate[Any, P], R]], Callable[Concatenate[Any, P], R]]:
    """A ``Warden`` operation of kind ``action``: it takes ``caller`` (no
    default), and runs only once ``authorize`` has allowed it."""

    def wrap(fn: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]:
        @functools.wraps(fn)
        def run(core: Any, *args: P.args, **kwargs: P.kwargs) -> R:
            if "caller" not in kwargs:
                raise TypeError(f"{fn.__name__}() needs caller=: every operation names who asks")
            authorize(kwargs["caller"], action)  # type: ignore[arg-type]
            return fn(core, *args, **kwargs)

        run.action = action  # type: ignore[attr-defined]
        return run

    return wrap


# -- narrowing: which tenant and agent a caller's request is confined to --------------------


def confine_tenant(caller: Principal, tenant: str | None) -> None:
    """A listing of ``tenant`` is refused (403) unless the caller may read it."""
    if not caller.access.allows_tenant(tenant):
        raise Forbidden(f"this key is not bound to tenant {tenant!r}", field="tenant")


def confine_agent(caller: Principal, agent: str | None) -> str | None:
    """The agent a listing is narrowed to: a bound key's own (naming
    another is refused, 403), else what the caller asked for."""
    if caller.agent is None:
        return agent
    if agent not in (None, caller.agent):
        raise Forbidden(f"this key reads only agent {caller.agent!r}", field="agent")
    return caller.agent


def scope_for_save(caller: Principal, scope: Mapping[str, Any]) -> dict[str, Any]:
    """The scope a caller saves into: a bound key's agent filled in where
    the scope names none; another tenant or agent refused (403, naming the
    field). Everything else about the scope is the event model's to check."""
    out = dict(scope)
    tenant = out.get("tenant")
    if isinstance(tenant, str) and not caller.access.allows_tenant(tenant):
        raise ScopeNotAllowed("scope.tenant", f"this key is not bound to tenant {tenant!r}")
    if caller.agent is not None:
        if out.get("agent") is None:
            out["agent"] = caller.agent
        elif out["agent"] != caller.agent:
            raise ScopeNotAllowed("scope.agent", f"this key saves only as agent {caller.agent!r}")
    return out


def tenants_seen(caller: Principal, holding: Sequence[str]) -> list[str]:
    """The tenants ``caller`` may see, of those ``holding`` memories it may
    read: staff every such tenant; an agent key every tenant it is bound
    to, one with no memory yet included (it is still the key's to use)."""
    if caller.is_staff:
        return list(holding)
    return sorted({*holding, *caller.tenants})


def one_tenant(caller: Principal, tenant: str | None) -> str:
    """The tenant a call that names no tenant is in: the caller's only one
    (a Memory API call, an agent's listing)."""
    if tenant is None:
        if caller.is_staff:
            raise InvalidInput("tenant", f"is required for {_article(caller.role)} key")
        if len(caller.tenants) != 1:
            raise InvalidInput("tenant", "this key has several tenants: name one")
        tenant = caller.tenants[0]
    confine_tenant(caller, tenant)
    return tenant


# -- what a caller receives of a memory it may not use ---------------------------------------

# A memory taken out (revoked), found altered (quarantined) or erased: its
# words are what was taken out, so an agent receives neither its summary
# nor its content; staff keep the summary, to see what they act on.
WITHHELD = frozenset({"revoked", "quarantined", "erased"})


def shows_text(caller: Principal, status: str) -> bool:
    """Whether ``caller`` receives the summary of a memory in ``status``."""
    if status == "erased":
        return False
    return caller.is_staff or status not in WITHHELD


def _article(role: str) -> str:
    return f"{'an' if role[:1] in 'aeiou' else 'a'} {role}"


def told_of(caller: Principal, tenant: str, decision: Decision, parents: Sequence[ParentState]) -> Decision:
    """``decision`` as ``caller`` is told it: where it names a parent the
    caller may not see (a bound key's memory drawn from another agent's),
    the detail says only that its evidence may not be used, never that
    parent's version or state, which would tell of a memory that answers,
    to this caller, as one that does not exist."""
    if decision.parent is None or caller.agent is None:
        return decision
    named = next((p for p in parents if p.memory_id == decision.parent), None)
    if named is not None and caller.access.allows(tenant, named.agent):
        return decision
    return replace(decision, detail="a memory it was drawn from may not be used now", parent=None)
