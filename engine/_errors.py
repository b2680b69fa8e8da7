"""Errors the engine raises; each subclasses the built-in it resembles,
names the id or field at fault, and knows its own answer on every face
(``Refusal``: its code, HTTP status and exit code; ``_answers`` renders it)."""

from __future__ import annotations

from typing import Any

# the store's own errors (raised below the port in the driver's stead) are the engine's too
from memwarden.events import Refusal, StoreDamaged, StoreFailed, StoreUnavailable  # noqa: F401


class InvalidInput(Refusal, ValueError):
    """Bad input: names the field and the problem."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class ChecksumMismatch(InvalidInput):
    code = "checksum_mismatch"

    def __init__(self, field: str, given: str, actual: str) -> None:
        super().__init__(field, f"{given} does not match the content, whose checksum is {actual}")
        self.given = given
        self.actual = actual

    def details(self) -> dict[str, Any]:
        return {"given": self.given, "actual": self.actual}


class TooLarge(InvalidInput):
    """Input over a size limit (HTTP 413)."""

    code = "too_large"
    status = 413


class AmbiguousMemory(InvalidInput):
    """An id the caller may see in more than one of its tenants."""

    def __init__(self, memory_id: str) -> None:
        super().__init__("tenant", f"memory {memory_id!r} exists in more than one of your tenants: name the tenant")
        self.memory_id = memory_id


class MemoryNotFound(Refusal, LookupError):
    """No such memory, or one the caller may not see: the same words either way."""

    code = "not_found"
    status = 404
    exit_code = 1
    field = "memory_id"

    def __init__(self, memory_id: str, as_of: str | None = None) -> None:
        when = f" as of {as_of}" if as_of else ""
        super().__init__(f"memory {memory_id!r} not found{when}")
        self.memory_id = memory_id

    def details(self) -> dict[str, Any]:
        return {"memory_id": self.memory_id}


class UserNotFound(Refusal, LookupError):
    """An erasure naming a user none of the caller's memories name (a typo
    in a deletion request is said, never passed over as "0 erased")."""

    code = "not_found"
    status = 404
    exit_code = 1
    field = "user"

    def __init__(self, user: str, tenant: str | None = None) -> None:
        where = f" in tenant {tenant!r}" if tenant else ""
        super().__init__(f"no memories of user {user!r}{where}")
        self.user = user


class RevocationNotFound(Refusal, LookupError):
    code = "not_found"
    status = 404
    exit_code = 1
    field = "revocation_id"

    def __init__(self, revocation_id: str) -> None:
        super().__init__(f"revocation {revocation_id!r} not found")
        self.revocation_id = revocation_id

    def details(self) -> dict[str, Any]:
        return {"revocation_id": self.revocation_id}


class RevokedScope(Refusal, PermissionError):
    """A save that would bring back what a revocation took out."""

    code = "revoked_scope"
    status = 409
    field = "fetched_at"  # only a later fetch can be saved

    def __init__(self, memory_id: str, revocation_id: str, effective_at: str, fetched_at: str) -> None:
        super().__init__(
            f"memory {memory_id!r} refused: revocation {revocation_id} covers its scope and took effect at "
            f"{effective_at}, not before its fetched_at {fetched_at}; only a fresh fetch made after the "
            "revocation, under the current policy version, can be saved"
        )
        self.memory_id = memory_id
        self.revocation_id = revocation_id

    def details(self) -> dict[str, Any]:
        return {"revocation_id": self.revocation_id}


class MemoryErased(Refusal, PermissionError):
    """A write of what an erasure destroyed: a version's text, or a
    re-verification of an erased memory."""

    code = "erased"
    status = 409
    field = "memory_id"

    def __init__(self, memory_id: str, what: str = "was erased and cannot be verified or restored") -> None:
        super().__init__(f"memory {memory_id!r} {what}")
        self.memory_id = memory_id


class StaleView(Refusal, TimeoutError):
    """The view has not applied the seq the caller has been told about
    (worth retrying shortly: HTTP answers ``Retry-After``), or, ``ahead``,
    the seq is beyond the log's head, which no wait brings (a store
    restored from a backup older than the write). For a caller given
    tokens (``_tokens``) neither seq is told: the view's position would
    count every tenant's writes."""

    code = "stale_view"
    status = 409
    exit_code = 1
    field = "min_seq"
    # as a client raises it again from an answer that did not tell them
    have: int | None = None
    need: int | None = None
    ahead: bool = False

    def __init__(self, have: int | None, need: int | None, *, ahead: bool = False) -> None:
        if have is None or need is None:
            told = "the view has not applied the write this token stands for"
        else:
            told = f"the view is at seq {have}, the caller needs at least seq {need}"
        if ahead:
            told += "; the log holds no such write (a store restored from an older backup?): no wait brings it"
        super().__init__(f"min_seq: {told}")
        self.have = have
        self.need = need
        self.ahead = ahead

    def details(self) -> dict[str, Any]:
        known = {"have": self.have, "need": self.need} if self.have is not None else {}
        return {**known, "ahead": self.ahead}


class FetchFailed(Refusal, OSError):
    """A source could not be read. ``category`` is all a caller is shown
    (the detail could map the operator's network); the detail is logged."""

    code = "fetch_failed"
    status = 502
    exit_code = 1
    field = "source_url"

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

    @property
    def problem(self) -> str:
        return self.__dict__.get("_problem") or self.public

    @problem.setter
    def problem(self, value: str) -> None:
        self.__dict__["_problem"] = value

    def details(self) -> dict[str, Any]:
        return {"category": self.category}


class MemoryIdTaken(Refusal, PermissionError):
    """A save by a key bound to one agent, of an id another agent of the
    tenant holds: tenants share their ids, and a bound key cannot take one over."""

    code = "id_taken"
    status = 409
    field = "memory_id"

    def __init__(self, memory_id: str) -> None:
        super().__init__(
            f"memory {memory_id!r}: this id is in use in the tenant and this key, bound to one agent, "
            "cannot write to it; choose another id"
        )
        self.memory_id = memory_id


class BatchRefused(Refusal, ValueError):
    """A batch save refused whole: ``problems`` names each refused item
    (``index``, ``field``, ``problem``, ``error``); nothing was written."""

    code = "batch_refused"
    field = "memories"

    def __init__(self, problems: list[dict[str, Any]]) -> None:
        first = problems[0]
        where = f"memories[{first['index']}]" if first["index"] is not None else "memories"
        field = f".{first['field']}" if first.get("field") and first["index"] is not None else ""
        count = f"{len(problems)} refused; first: " if len(problems) > 1 else ""
        super().__init__(f"{count}{where}{field}: {first['problem']}")
        self.problems = problems

    def details(self) -> dict[str, Any]:
        return {"errors": self.problems}

    @classmethod
    def from_answer(cls, body: dict[str, Any]) -> BatchRefused:
        errors = body.get("errors") or [{"index": None, "field": None, "problem": body.get("problem", "")}]
        return cls(list(errors))


class Forbidden(Refusal, PermissionError):
    """The caller's role may not do this, or its key is not bound to the
    tenant or agent it names (``_rights`` decides)."""

    code = "forbidden"
    status = 403

    def __init__(self, problem: str, *, field: str | None = None, role: str | None = None) -> None:
        super().__init__(problem)
        self.field = field
        self.role = role


class ScopeNotAllowed(Forbidden):
    """A write into a scope the caller's key does not cover: names the field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem, field=field)


class Unauthorized(Refusal, PermissionError):
    """No key, or one that is unknown or revoked."""

    code = "unauthorized"
    status = 401
    field = "x-api-key"

    def __init__(self, problem: str = "a valid x-api-key header is required") -> None:
        super().__init__(problem)


class TooManyWaiters(Refusal, RuntimeError):
    """A key holds as many open long-polls as one key may: a waiter costs
    no thread, but each holds a connection the server counts."""

    code = "too_many_waiters"
    status = 429
    field = "wait"

    def __init__(self, limit: int) -> None:
        super().__init__(f"this key already holds {limit} waiting requests; ask again without wait, or later")


class ServerRefused(Refusal, RuntimeError):
    """A refusal a server answered that this client knows no class for (a
    newer server's): its code, status, field and problem as they came."""

    def __init__(self, code: str, status: int, problem: str, field: str | None = None) -> None:
        super().__init__(problem)
        self.code = code  # type: ignore[misc]
        self.status = status  # type: ignore[misc]
        self.field = field


class SinkNotFound(Refusal, LookupError):
    """No sink of that name in the policy file, or no notice of that id."""

    field: str  # always named
    code = "not_found"
    status = 404
    exit_code = 1

    def __init__(self, field: str, name: str) -> None:
        what = "sink" if field == "sink" else "notice"
        super().__init__(f"{what} {name!r} not found")
        self.field = field
        self.name = name

    def details(self) -> dict[str, Any]:
        return {self.field: self.name}


class SinkUnavailable(Refusal, ConnectionError):
    """A sink could not take a notice or answer a read-back now: the outbox
    keeps the notice and tries again (the detail names what failed)."""

    code = "sink_unavailable"
    status = 502
    exit_code = 1
    field = "sink"

    def __init__(self, sink: str, detail: str) -> None:
        super().__init__(f"sink {sink!r}: {detail}")
        self.sink = sink
        self.detail = detail


class AckRefused(Refusal, PermissionError):
    """A sink's acknowledgement that memwarden does not accept: its
    signature does not verify with the sink's secret (forged, tampered, or
    older than Standard Webhooks' five minutes), or it was received before
    (a replay). ``field`` names the header or body field at fault."""

    code = "ack_refused"
    status = 401
    exit_code = 1

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
