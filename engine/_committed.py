"""What a caller waiting on a committed revocation is answered
(``revoke --wait``, ``"wait": true``, the console): its read-back and its
sinks' lines as they stand, never an exception. The revocation is in force
whatever the read-back meets, and the scheduler goes on trying; a refusal
here would tell the caller its revocation failed when it did not."""

from __future__ import annotations

from typing import Any

from memwarden.events import get_logger

from ._answers import answer
from ._core import Core
from ._readback import ReadPath, read_back, revocation_of
from ._rights import Principal
from .sinks._ops import settle_sinks
from .sinks._worker import sink_line

log = get_logger("memwarden.readback")


def _problem(exc: Exception) -> dict[str, Any]:
    found = answer(exc)
    return found.body() if found is not None else {"error": "internal", "problem": str(exc)}


def read_back_committed(
    core: Core, revocation_id: str, *, caller: Principal, http: ReadPath | None = None
) -> dict[str, Any]:
    """The revocation's read-back record (the one another writer recorded
    first, when one did), or its state with the reason the read-back could
    not run now (``readback_error``)."""
    try:
        return read_back(core, revocation_id, caller=caller, http=http)
    except Exception as exc:
        log.error("readback_failed_to_run", revocation_id=revocation_id, error=str(exc))
        try:
            state = revocation_of(core, revocation_id)
        except Exception:
            state = {"revocation_id": revocation_id, "readback_status": None}
        return {**state, "readback_error": _problem(exc), "written": False}


def settle_committed(
    core: Core, revocation_id: str, *, caller: Principal, wait: float = 0.0
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Each sink's line after one try (``Warden.settle_sinks``), and None;
    when the try could not run, the lines as they stand and the reason."""
    try:
        return settle_sinks(core, revocation_id, wait=wait, caller=caller), None
    except Exception as exc:
        log.error("sink_settle_failed_to_run", revocation_id=revocation_id, error=str(exc))
        try:
            with core.reading() as view:
                lines = [sink_line(r) for r in view.outbox().readbacks(revocation_id)]
        except Exception:
            lines = []
        return lines, _problem(exc)
