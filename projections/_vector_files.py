"""The vector index on disk: one file per (tenant, vector length), with the
log position it has applied.

A file is a header (``MAGIC``, the length of the metadata), the metadata
as JSON (the tenant, the length, each agent's part: its kind, memory ids
and their scopes; the position and the hash of the event at it, the
payload's sha256) and the payload: each part's exact rows, or usearch's
serialised HNSW graph, back to back. It is written whole to a temporary
name, synced and renamed over the old one, so a process killed while
saving leaves the previous file (and a stray temporary, removed by the
next holder of the lock). A file that does not verify (bytes damaged,
another database's log, a position ahead of the view, an older format)
is not an error: the index is built again from the view and the log,
which is what every file is a cache of.

No vector outlives its file on disk: the file a save replaces, one an
erasure deletes and a stray temporary are each overwritten with zeros
(and synced) before they are let go, so their blocks are not returned to
the filesystem holding vectors an erasure has since destroyed (an
unlinked file's bytes stay on the disk, and in every other name a hard
link or a snapshot tool gave it). A copy-on-write filesystem or a
flash drive's wear levelling may keep old blocks whatever a program
writes over them: there only the disk's own encryption answers.

The processes on one database that share a folder (the server and a
``memwarden erase`` beside it) take an exclusive ``flock`` on ``.lock``
to write or delete, so an erasure's deletion is never overtaken by a
save that had read the view before it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memwarden.events import private_file, private_folder, write_private

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: one process per folder is the operator's to keep
    fcntl = None  # type: ignore[assignment]

MAGIC = b"MWVEC2\n"  # 2: parts by agent, with their scopes (1 is rebuilt from the view)
_LENGTH = struct.Struct("<Q")


@dataclass(frozen=True)
class Saved:
    """What a file holds: its metadata (``meta``) and its payload bytes."""

    meta: dict[str, Any]
    payload: bytes


class IndexFiles:
    """The index files in one folder."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, tenant: str, dims: int) -> Path:
        # a tenant's name may hold anything a file name may not: its digest names the file
        digest = hashlib.sha256(tenant.encode("utf-8")).hexdigest()[:40]
        return self.directory / f"{digest}-{dims}.vec"

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        private_folder(self.directory)
        private_file(self.directory / ".lock")
        with open(self.directory / ".lock", "a+b") as fh:
            if fcntl is not None:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                self._remove_strays()
                yield
            finally:
                if fcntl is not None:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def _remove_strays(self) -> None:
        """Temporaries of saves that never finished (under the lock no save
        is under way): they may hold vectors an erasure has since destroyed."""
        for stray in self.directory.glob("*.vec.tmp*"):
            _destroyed(stray)

    def write(self, tenant: str, dims: int, meta: dict[str, Any], payload: bytes) -> None:
        """Replace the file of (tenant, dims), atomically (under ``locked``)."""
        target = self.path(tenant, dims)
        meta = {**meta, "tenant": tenant, "dims": dims, "payload_sha256": hashlib.sha256(payload).hexdigest()}
        head = json.dumps(meta, separators=(",", ":")).encode("utf-8")
        tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
        with write_private(tmp) as fh:  # vectors are derived from memories' text: private as the store is
            fh.write(MAGIC + _LENGTH.pack(len(head)) + head)
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            old = open(target, "r+b")  # held across the rename, closed below
        except FileNotFoundError:
            old = None
        try:
            os.replace(tmp, target)
            _sync_dir(self.directory)
            if old is not None:  # the new file is in place: the one it replaced is overwritten
                _zeroed(old)
        finally:
            if old is not None:
                old.close()

    def read(self, tenant: str, dims: int) -> Saved | None:
        """The file of (tenant, dims) if it is there and whole (None otherwise)."""
        try:
            data = self.path(tenant, dims).read_bytes()
        except OSError:
            return None
        try:
            if not data.startswith(MAGIC):
                return None
            (length,) = _LENGTH.unpack_from(data, len(MAGIC))
            start = len(MAGIC) + _LENGTH.size
            meta = json.loads(data[start : start + length])
            payload = data[start + length :]
        except (struct.error, ValueError):
            return None
        if (
            not isinstance(meta, dict)
            or meta.get("tenant") != tenant
            or meta.get("dims") != dims
            or meta.get("payload_sha256") != hashlib.sha256(payload).hexdigest()
        ):
            return None
        return Saved(meta, payload)

    def remove(self, tenant: str) -> None:
        """Delete every file of ``tenant`` (every vector length; under ``locked``)."""
        if not self.directory.exists():
            return
        digest = self.path(tenant, 0).name.split("-")[0]
        for path in self.directory.glob(f"{digest}-*.vec*"):
            _destroyed(path)
        _sync_dir(self.directory)


_ZEROS = bytes(1 << 20)


def _zeroed(fh: Any) -> None:
    """Overwrite the open file ``fh`` with zeros, its whole length, and sync it."""
    fh.seek(0, os.SEEK_END)
    size = fh.tell()
    fh.seek(0)
    while size > 0:
        size -= fh.write(_ZEROS[: min(size, len(_ZEROS))])
    fh.flush()
    os.fsync(fh.fileno())


def _destroyed(path: Path) -> None:
    """``path`` overwritten with zeros, then unlinked."""
    try:
        with open(path, "r+b") as fh:
            _zeroed(fh)
    except FileNotFoundError:
        return
    path.unlink(missing_ok=True)


def _sync_dir(directory: Path) -> None:
    """A rename or unlink is durable only once the folder itself is synced."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
