"""What a backend of the contract suite offers a test (``tests/backends.py``
lists them): the store a test names, and the damage it may do to one behind
the engine's back."""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

# what a test names a store by: a file for SQLite, a URL for PostgreSQL
Db = str | Path


class Backend(ABC):
    """One store behind the port, with the hooks a contract test needs."""

    name: str

    def available(self) -> str | None:
        """Why this backend cannot run here (None: it can)."""
        return None

    def close(self) -> None:  # noqa: B027 (most backends leave nothing behind)
        """Clean up after the session."""

    def module_ended(self) -> None:  # noqa: B027 (a file per store needs nothing back)
        """A test module ended: what its stores held may be lent again."""

    def erase_without_waiting(self, warden: Any) -> None:  # noqa: B027 (SQLite's erasure waits for nothing)
        """Let ``warden``'s erasures rewrite the files at once, for a test
        that asks nothing of the erased bytes leaving them (tests/test_erase.py
        does): an erasure may otherwise wait for transactions elsewhere."""

    @abstractmethod
    def db(self, tmp_path: Path, name: str = "memwarden.db") -> Any:
        """What ``--db`` names for a fresh store of this backend (the same
        store for the same ``tmp_path`` and ``name``)."""

    @abstractmethod
    def scratch(self, tmp_path: Path, name: str = "scratch") -> Any:
        """A store as new, for one example of a property test: every call
        with the same ``tmp_path`` and ``name`` empties the same one (its
        wardens closed first), never makes a store anew."""

    @abstractmethod
    def stored_text(self, db: Db, checksum: str) -> bytes | None:
        """The stored content whose bytes hash to ``checksum``."""

    @abstractmethod
    def text_versions(self, db: Db) -> int:
        """How many memory versions have texts stored."""

    @abstractmethod
    def replace_text(self, db: Db, checksum: str, stored: Any) -> None:
        """Overwrite the stored content that hashes to ``checksum`` (bytes,
        text, None, or a value of another type where the backend allows)."""

    @abstractmethod
    def replace_summary(self, db: Db, memory_id: str, stored: str) -> None:
        """Overwrite the stored summary of ``memory_id``'s texts behind the engine's back."""

    def flip_text(self, db: Db, checksum: str) -> None:
        """Flip one bit of the stored content that hashes to ``checksum``."""
        data = bytearray(self.stored_text(db, checksum) or b"")
        data[0] ^= 0x01
        self.replace_text(db, checksum, bytes(data))

    @abstractmethod
    def set_view(self, db: Db, memory_id: str, **columns: Any) -> None:
        """Rewrite columns of a memory's view row: a view gone stale or edited."""

    @abstractmethod
    def rewrite_payload(self, db: Db, seq: int, payload: bytes) -> None:
        """Replace a logged event's payload bytes (its hash left as it was)."""

    @abstractmethod
    def count_events(self, db: Db, event_type: str) -> int:
        """Committed events of ``event_type``, read by a separate connection."""

    @abstractmethod
    def copy_store(self, db: Db, to: Db) -> None:
        """Copy the whole store as it stands to a new one at ``to`` (an
        operator's backup, restored later as it was)."""

    @abstractmethod
    def bytes_at_rest(self, db: Db) -> bytes:
        """Every byte the store keeps on disk for ``db``, after making it
        write out what it buffers (where erased words must not remain)."""

    @abstractmethod
    def statements(self, warden: Any) -> AbstractContextManager[list[str]]:
        """The SQL of every statement ``warden``'s writer sends while the
        context is open (this thread's; each execution of one SQLite runs
        many times, each call of PostgreSQL's: a round trip)."""

    @abstractmethod
    def driver_failure(self) -> Exception:
        """An error as this backend's driver raises it when the database
        fails under a statement (a disk error, a server gone)."""

    def fail_under(self, view: Any, failure: Exception) -> None:
        """Make every statement ``view`` runs from now on fail with ``failure``."""
        view.conn = Failing(failure)

    @abstractmethod
    def sever(self, view: Any) -> None:
        """Close the driver's connection under ``view``, as a server gone
        or a file closed would leave it."""


class Failing:
    """A connection every use of which fails with ``failure``, as the
    backend's driver fails when the database does under a statement."""

    def __init__(self, failure: Exception) -> None:
        self.failure = failure

    def __getattr__(self, name: str) -> Any:
        raise self.failure
