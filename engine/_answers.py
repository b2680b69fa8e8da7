"""Every error as its answer: the one place a refusal becomes the JSON
``{error, field, problem, ...}``, an HTTP status and an exit code.

The CLI, HTTP, MCP and the console all render an exception through
``answer``, so the same request is refused in the same words on every face.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from memwarden.events import Refusal
from pydantic import ValidationError

from ._validation import field_error


@dataclass(frozen=True)
class Answer:
    """An error as a face shows it."""

    code: str
    status: int
    exit_code: int
    field: str | None
    problem: str
    message: str  # the one line for a terminal (the field named in it)
    # dataclasses.field: the attribute above is named ``field``
    details: dict[str, Any] = dataclasses.field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "field": self.field, "problem": self.problem, **self.details}


def answer(exc: BaseException) -> Answer | None:
    """The answer for ``exc``, or None for an error that is a fault of
    memwarden itself (a bug: 500, and a traceback in the log)."""
    if isinstance(exc, Refusal):
        message = exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], str) else str(exc)
        return Answer(
            exc.code,
            exc.status,
            exc.exit_code,
            exc.field,
            exc.problem,
            message,
            exc.details(),
        )
    if isinstance(exc, ValidationError):  # a model checked outside the engine's own checks
        return answer(field_error(exc))
    # what the standard library raises for bad input reaching it, as the
    # kind of refusal it resembles (a bug shows as its own type in the log)
    if isinstance(exc, ValueError):
        return Answer("invalid_input", 422, 2, None, str(exc), str(exc))
    return None


def _known() -> list[type[Refusal]]:
    from memwarden.events import EventIdReused, LogDamaged, StorageError, TextErased, VersionConflict
    from memwarden.projections import AppendRefused, ProjectionDamaged

    from . import _errors as e

    # a code several classes share is told apart by the field; where none
    # names it, the first listed with the code (the general one) is chosen
    return [
        e.InvalidInput,
        e.ChecksumMismatch,
        e.TooLarge,
        e.BatchRefused,
        e.MemoryNotFound,
        e.RevocationNotFound,
        e.UserNotFound,
        e.RevokedScope,
        e.MemoryErased,
        TextErased,
        e.StaleView,
        e.FetchFailed,
        e.MemoryIdTaken,
        e.Unauthorized,
        e.ScopeNotAllowed,
        e.Forbidden,
        e.StoreUnavailable,
        e.TooManyWaiters,
        EventIdReused,
        VersionConflict,
        AppendRefused,
        LogDamaged,
        StorageError,
        ProjectionDamaged,
    ]


def refusal_from(status: int, body: Any) -> Exception:
    """The error a server's answer stands for, as the engine's own class
    (what ``answer`` rendered, raised again on the client's side)."""
    from ._errors import ScopeNotAllowed, ServerRefused

    if not isinstance(body, dict) or not isinstance(body.get("error"), str):
        return ServerRefused("error", status, str(body)[:500])
    code, field = body["error"], body.get("field")
    candidates = [cls for cls in _known() if cls.code == code]
    if code == "forbidden" and isinstance(field, str) and field.startswith("scope."):
        candidates = [ScopeNotAllowed]
    chosen = next((cls for cls in candidates if cls.field == field), candidates[0] if candidates else None)
    if chosen is None:
        return ServerRefused(code, status, str(body.get("problem") or ""), field)
    return chosen.from_answer(body)
