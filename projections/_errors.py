"""What goes wrong with a read model: it is damaged, and rebuilt from the log."""

from __future__ import annotations

from typing import Any

from memwarden.events import Refusal


class ProjectionDamaged(Refusal, ValueError):
    """A read model holds what no event could have put there (a file edited
    by hand). The log is the truth: ``memwarden rebuild`` replays it."""

    code = "projection_damaged"
    status = 503

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"projection damaged: {where}: {problem} (run 'memwarden rebuild')")
        self.where = where


class AppendRefused(Refusal, ValueError):
    """An append (an import, most often) holding an event that would break
    a promise: the whole append is refused, naming the event."""

    code = "import_refused"
    field = "file"

    def __init__(self, event: Any, problem: str) -> None:
        super().__init__(f"event seq {event.seq} ({event.type}): {problem}; nothing was written")
        self.seq = event.seq
        self.event_type = event.type
