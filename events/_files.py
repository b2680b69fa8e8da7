"""Files and folders that hold memories, made readable by their owner alone.

A store, its write-ahead files, its vector folder, a backup and an export
hold every text memwarden keeps. Each is created with its mode given
(0600 for a file, 0700 for a folder) and set again at once with ``chmod``,
before a byte is written: the process's umask narrows a mode given to
``open`` but cannot widen it, and a umask that strips the owner's own bits
would leave a file its owner cannot open. The umask itself is never
touched: memwarden is a guest in its users' processes, and the umask is
theirs (other threads create files under it).

SQLite creates a database's ``-wal``, ``-shm`` and ``-journal`` with the
database file's own mode, so a store created here keeps its write-ahead
files private too. A file or folder that already exists is left as its
owner set it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

FILE_MODE = 0o600
FOLDER_MODE = 0o700

__all__ = ["FILE_MODE", "FOLDER_MODE", "private_file", "private_folder", "write_private"]


def private_file(path: str | Path) -> bool:
    """Create ``path`` empty and private unless it exists; whether it was created."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    except FileExistsError:
        return False
    try:
        _chmod(fd, path)
    finally:
        os.close(fd)
    return True


def private_folder(path: str | Path) -> bool:
    """Create the folder ``path`` private unless it exists (its parents as
    the umask makes them); whether it was created."""
    folder = Path(path)
    if folder.is_dir():
        return False
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        folder.mkdir(FOLDER_MODE)
    except FileExistsError:
        return False
    os.chmod(folder, FOLDER_MODE)
    return True


def write_private(path: str | Path) -> IO[bytes]:
    """``path`` opened to be written from its start, private whether it is
    new or was there (its previous mode does not carry over to a file that
    replaces a store's contents)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    try:
        _chmod(fd, path)
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


def _chmod(fd: int, path: str | Path) -> None:
    if hasattr(os, "fchmod"):  # by the descriptor: no other file can be put in its place meanwhile
        os.fchmod(fd, FILE_MODE)
    else:
        os.chmod(path, FILE_MODE)
