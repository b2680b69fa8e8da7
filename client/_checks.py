"""What the client checks of a server's answer before it believes it.

A client is a guest of whatever answers at its base URL: a proxy in front
of the server, a server of another version, one that was taken over. So an
answer is taken only as what was asked for: the tenant a request named is
the tenant every memory answered is in, the id asked for is the id
answered, each record has the fields the engine's type needs, and a
position (``seq``) is a consistency token or a seq in the range a server
can issue. Anything else is ``UntrustedAnswer``, naming the field, and
nothing of it is kept (no position it gave is sent again).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from memwarden.engine import MemoryView
from memwarden.engine._tokens import MAX_POSITION, Position, is_token
from memwarden.events import Refusal

T = TypeVar("T")


class UntrustedAnswer(Refusal, ValueError):
    """An answer the client refuses to believe: not what was asked for, or
    not in a shape any memwarden server answers (a 502, as a proxy calls an
    upstream's bad answer)."""

    code = "untrusted_answer"
    status = 502
    exit_code = 1

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"the server's answer is refused: {field} {problem}")
        self.field = field
        self.problem = problem


def obj(answer: Any, where: str = "answer") -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise UntrustedAnswer(where, "is not a JSON object")
    return answer


def items(answer: Any, key: str) -> list[Any]:
    found = obj(answer).get(key)
    if not isinstance(found, list):
        raise UntrustedAnswer(key, "is not a list")
    return found


def counts(answer: Any, field: str) -> dict[str, int]:
    """Counts by name (a search's ``hidden``): whole numbers, 0 or more."""
    if not isinstance(answer, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0 for k, v in answer.items()
    ):
        raise UntrustedAnswer(field, "is not counts by reason")
    return dict(answer)


def record(cls: Callable[..., T], answer: Any, where: str = "answer") -> T:
    """``cls`` made from the answer's fields of that name (a newer server's
    other fields are left out); a field it needs and lacks is refused."""
    data = obj(answer, where)
    if dataclasses.is_dataclass(cls):
        fields = {f.name: f.default is dataclasses.MISSING for f in dataclasses.fields(cls)}
    else:  # a named tuple
        defaults = getattr(cls, "_field_defaults", {})
        fields = {name: name not in defaults for name in cls._fields}  # type: ignore[attr-defined]
    missing = [name for name, needed in fields.items() if needed and name not in data]
    if missing:
        raise UntrustedAnswer(f"{where}.{missing[0]}", "is missing")
    return cls(**{name: data[name] for name in fields if name in data})


def position(value: Any, field: str = "seq") -> Position:
    """A position a server may issue: a consistency token, or a seq of the
    range every backend holds (a larger one would hold every later read)."""
    if is_token(value):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_POSITION:
        return value
    raise UntrustedAnswer(field, f"is not a consistency token or a seq a server can issue: {str(value)[:80]!r}")


def same(answer: Mapping[str, Any], field: str, asked: Any, where: str = "answer") -> None:
    """The answer names what was asked for at ``field``."""
    if asked is not None and answer.get(field) != asked:
        raise UntrustedAnswer(f"{where}.{field}", f"is {str(answer.get(field))[:80]!r}, not the {asked!r} asked for")


def view(answer: Any, *, tenant: str | None, memory_id: str | None = None, where: str = "answer") -> MemoryView:
    """A memory as the engine's ``MemoryView``: in the tenant asked for (when
    one was), with the id asked for (when one was)."""
    found = record(MemoryView, answer, where)
    scope = found.scope
    if not isinstance(scope, dict) or not isinstance(scope.get("tenant"), str):
        raise UntrustedAnswer(f"{where}.scope.tenant", "is missing")
    same(scope, "tenant", tenant, f"{where}.scope")
    same(answer, "memory_id", memory_id, where)
    if found.last_seq is not None:
        position(found.last_seq, f"{where}.last_seq")
    return found


def views(answers: Iterable[Any], *, tenant: str | None, ids: Iterable[str] | None, key: str) -> list[MemoryView]:
    """A page of memories, each in the tenant asked for and among the ids asked for."""
    wanted = set(ids) if ids is not None else None
    out = []
    for index, answer in enumerate(answers):
        found = view(answer, tenant=tenant, where=f"{key}[{index}]")
        if wanted is not None and found.memory_id not in wanted:
            raise UntrustedAnswer(f"{key}[{index}].memory_id", f"{found.memory_id!r} is not among the ids asked for")
        out.append(found)
    return out
