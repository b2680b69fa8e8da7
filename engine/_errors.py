"""Errors the engine raises; each subclasses the built-in it resembles and
names the id or field at fault."""

from __future__ import annotations

from typing import Any


class InvalidInput(ValueError):
    """Bad input: names the field and the problem."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class ChecksumMismatch(InvalidInput):
    def __init__(self, field: str, given: str, actual: str) -> None:
        super().__init__(field, f"{given} does not match the content, whose checksum is {actual}")
        self.given = given
        self.actual = actual


class MemoryNotFound(LookupError):
    def __init__(self, memory_id: str, as_of: str | None = None) -> None:
        when = f" as of {as_of}" if as_of else ""
        super().__init__(f"memory {memory_id!r} not found{when}")
        self.memory_id = memory_id


class RevocationNotFound(LookupError):
    def __init__(self, revocation_id: str) -> None:
        super().__init__(f"revocation {revocation_id!r} not found")
        self.revocation_id = revocation_id


class RevokedScope(PermissionError):
    """A save that would bring back what a revocation took out."""

    def __init__(self, memory_id: str, revocation_id: str, effective_at: str, fetched_at: str) -> None:
        super().__init__(
            f"memory {memory_id!r} refused: revocation {revocation_id} covers its scope and took effect at "
            f"{effective_at}, not before its fetched_at {fetched_at}; only a fresh fetch made after the "
            "revocation, under the current policy version, can be saved"
        )
        self.memory_id = memory_id
        self.revocation_id = revocation_id
        self.field = "fetched_at"  # only a later fetch can be saved


class MemoryErased(PermissionError):
    def __init__(self, memory_id: str) -> None:
        super().__init__(f"memory {memory_id!r} was erased and cannot be saved or verified again")
        self.memory_id = memory_id


class StaleView(TimeoutError):
    """The view has not applied the seq the caller has been told about."""

    def __init__(self, have: int, need: int) -> None:
        super().__init__(f"min_seq: the view is at seq {have}, the caller needs at least seq {need}")
        self.have = have
        self.need = need


class FetchFailed(OSError):
    """A source could not be read. ``category`` is all a caller is shown
    (the detail could map the operator's network); the detail is logged."""

    CATEGORIES = frozenset(
        {"refused_address", "timeout", "too_large", "http_status", "unreachable", "not_text", "no_fetcher"}
    )

    def __init__(self, source: str, category: str, detail: str = "") -> None:
        assert category in self.CATEGORIES, category
        super().__init__(f"fetching {source}: {category}" + (f" ({detail})" if detail else ""))
        self.source = source
        self.category = category
        self.detail = detail

    @property
    def public(self) -> str:
        return f"fetch failed: {self.category}"


class AmbiguousMemory(InvalidInput):
    """An id the caller may see in more than one of its tenants."""

    def __init__(self, memory_id: str) -> None:
        super().__init__("tenant", f"memory {memory_id!r} exists in more than one of your tenants: name the tenant")
        self.memory_id = memory_id


class MemoryIdTaken(PermissionError):
    """A save by a key bound to one agent, of an id another agent of the
    tenant holds: tenants share their ids, and a bound key cannot take one over."""

    def __init__(self, memory_id: str) -> None:
        super().__init__(
            f"memory {memory_id!r}: this id is in use in the tenant and this key, bound to one agent, "
            "cannot write to it; choose another id"
        )
        self.memory_id = memory_id


class BatchRefused(ValueError):
    """A batch save refused whole: ``problems`` names each refused item
    (``index``, ``field``, ``problem``, ``error``); nothing was written."""

    def __init__(self, problems: list[dict[str, Any]]) -> None:
        first = problems[0]
        where = f"memories[{first['index']}]" if first["index"] is not None else "memories"
        field = f".{first['field']}" if first.get("field") else ""
        count = f"{len(problems)} refused; first: " if len(problems) > 1 else ""
        super().__init__(f"{count}{where}{field}: {first['problem']}")
        self.problems = problems
        self.field = "memories"
        self.problem = str(self)


class ScopeNotAllowed(PermissionError):
    """A write into a scope the caller's key does not cover: names the field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem
