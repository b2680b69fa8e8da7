"""A store's write transaction, as the engine sees it (``Write`` in ``_port``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from memwarden.events import Head, RecordedEvent, TextStore

from ._sql_view import SQLView

if TYPE_CHECKING:
    from memwarden.events import Event


class LogWrite:
    """One write transaction under the log's write lock: events appended
    here are folded into the view (and their consequences appended by the
    reactors) before it commits; ``view`` sees the transaction's own
    writes. The same for every backend: ``tx`` is its log's transaction."""

    def __init__(self, tx: Any, view: SQLView, texts: TextStore) -> None:
        self._tx = tx
        self.view = view
        self.texts = texts
        # set after the commit when it erased texts: whether their bytes
        # also left the files (the store's ``after_erasure``)
        self.erasure_cleared: bool | None = None

    @property
    def erased(self) -> bool:
        """Whether this transaction recorded an erasure."""
        return any(r.type == "memory.erased" for r in self._tx.recorded)

    @property
    def head(self) -> Head:
        return self._tx.head

    @property
    def recorded(self) -> list[RecordedEvent]:
        """Every event this transaction recorded so far, reactions included."""
        return self._tx.recorded

    def append(self, events: Iterable[Event], expected_version: int | dict[str, int] | None = None) -> list[int]:
        return self._tx.append(events, expected_version)

    def append_recorded(self, records: Sequence[RecordedEvent]) -> int:
        return self._tx.append_recorded(records)

    def holds(self, event_id: str) -> bool:
        return self._tx.holds(event_id)

    def held(self, event_ids: Sequence[str]) -> set[str]:
        return self._tx.held(event_ids)
