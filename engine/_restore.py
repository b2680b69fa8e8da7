"""Restoring a backup without bringing back what was taken out since.

A backup holds its store as it was when it was taken; what was taken out
after that (texts erased, scopes revoked, keys revoked, policy versions
retired) was taken out of the store, not the backup. So a restore first
reads everything the store it replaces took out and carries it into the
restored one before anything can read it (``_carry``): an erased memory
the backup holds is erased again, each revocation it lacks is issued
again (the same selector and effective time, its reason naming the
original), a memory invalidated there is invalidated again, each key
revoked there is revoked, each policy change past the backup's version
is made again.

What a restore cannot bring back is everything else written after the
backup (saves, read-backs, keys made since); what it cannot know is
something taken out only in a store it does not replace (one lost with
its disk, one moved aside). A replaced store that cannot be read is a
refusal that says so: nothing is restored over it.

SQLite: ``restore`` replaces the file, which no other process may hold
open. PostgreSQL: ``pg_restore`` into a new database, then ``reapply``
there from the database it replaces.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from memwarden.events import Clock, private_folder, redacted
from memwarden.projections import UnknownBackend, copy_store_file, sqlite_path

from ._carry import TakenOut, carry
from ._core import Core, log
from ._errors import InvalidInput
from ._rights import Principal, operation

PG_RESTORE = (
    "pg_restore --dbname NEW_URL FILE into a new database, then "
    "memwarden --db NEW_URL reapply OLD_URL (the store it replaces)"
)


@operation("operate")
def reapply(core: Core, replaced: str, *, caller: Principal) -> dict[str, Any]:
    """Carry everything the store ``replaced`` names (a URL or path) took
    out into this one (erasures, revocations, invalidations, key
    revocations, policy changes): after a PostgreSQL database is restored from a dump
    (``pg_restore``) in place of ``replaced``, or a store is restored by
    hand, so the restore serves nothing taken out since its backup."""
    if str(replaced) == str(core.path):
        raise InvalidInput("replaced", "name the store this one replaces, not this store")
    taken, _ = _read_taken_out(replaced, core.clock)
    return {"replaced": _shown(replaced), **carry(core, taken, replaced=_shown(replaced))}


# the name it had when it carried erasures alone
reapply_erasures = reapply


def restore(store: str | Path, backup: str | Path, *, clock: Clock | None = None) -> dict[str, Any]:
    """Put the SQLite backup ``backup`` in place of the store ``store``,
    with everything ``store`` took out carried into it first; the backup
    file is left as it was. Refused, and nothing changed, when ``store``
    is a PostgreSQL URL, is open in another process, or exists and cannot
    be read; or when ``backup`` is no memwarden store or its chain does
    not verify."""
    try:
        path = sqlite_path(store)
    except UnknownBackend as exc:
        raise InvalidInput("db", exc.problem) from None
    if path is None:
        raise InvalidInput("db", f"a PostgreSQL store is restored with {PG_RESTORE}")
    if path == ":memory:":
        raise InvalidInput("db", "a store in memory has no file to restore into")
    if "://" in str(backup):
        raise InvalidInput("backup", "is a file made by `memwarden backup`")
    target, source = Path(path), Path(backup)
    if not source.is_file():
        raise InvalidInput("backup", f"{source}: no such file")
    if target.exists() and target.resolve() == source.resolve():
        raise InvalidInput("backup", "is the store itself: name the backup to restore")
    replaced = target.exists()
    taken, began = TakenOut(), None
    if replaced:
        taken, began = _read_taken_out(str(target), clock)
        _check_unused(target)
    staged = target.with_name(target.name + ".restoring")
    _remove(staged)
    try:
        try:
            copy_store_file(source, staged)  # private before a page is copied
        except (OSError, ValueError) as exc:
            raise InvalidInput("backup", str(exc)) from None
        with Core(staged, clock=clock) as core:
            chain = core.log.verify_chain()
            if not chain.ok:
                raise InvalidInput(
                    "backup", f"{source}: its chain does not verify at seq {chain.first_bad_seq}: {chain.problem}"
                )
            first = core.log.get(1)
            if began is not None and (first is None or first.hash != began):
                # another store's log: in its place, the whole history of this one would be gone
                raise InvalidInput(
                    "backup",
                    f"{source} is no backup of {target}: its log does not begin with this store's first event; "
                    "nothing was restored (to put another store in its place, move this one aside first)",
                )
            done = carry(core, taken, replaced=str(target))
            head = core.log.head()
        shutil.rmtree(f"{staged}.vectors", ignore_errors=True)  # the staging store's own, made on opening
        _check_unused(target)  # nobody opened it meanwhile
        _remove(target, side_files_only=True)  # none after our close; a crash's would belong to the store replaced
        os.replace(staged, target)  # whole or not at all
    except BaseException:
        _remove(staged)
        shutil.rmtree(f"{staged}.vectors", ignore_errors=True)
        raise
    _fresh_vectors(target)
    log.warning("store_restored", file=str(target), backup=str(source), head_seq=head.seq, **done)
    return {
        "file": str(target),
        "backup": str(source),
        "head_seq": head.seq,
        "head_hash": head.hash,
        "replaced": replaced,
        **done,
    }


def _read_taken_out(store: str, clock: Clock | None) -> tuple[TakenOut, str | None]:
    """What the store a restore replaces took out, and the hash of its log's
    first event (None: an empty log, which any backup may replace)."""
    try:
        with Core(store, clock=clock) as old:
            first = old.log.get(1)
            return TakenOut.of(old), None if first is None else first.hash
    except Exception as exc:
        raise InvalidInput(
            "db",
            f"the erasures and revocations of {_shown(store)}, the store a restore replaces, cannot be read "
            f"({exc}); nothing was restored: repair it, or move it aside knowing that nothing it took out "
            "(erasures, revocations, invalidations, key revocations, policy changes) will be re-applied",
        ) from None


def _check_unused(target: Path) -> None:
    """SQLite removes a store's write-ahead files when its last connection
    closes (ours, just now): still there, another connection holds it."""
    for suffix in ("-wal", "-shm"):
        if Path(f"{target}{suffix}").exists():
            raise InvalidInput(
                "db",
                f"{target} is open in another process (a server, a scheduler): stop it, then restore; "
                "nothing was restored",
            )


def _remove(path: Path, *, side_files_only: bool = False) -> None:
    for suffix in ("-wal", "-shm", "-journal", *(() if side_files_only else ("",))):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _fresh_vectors(target: Path) -> None:
    """The vector index's files beside the store described the store
    replaced (its positions, its memories): gone, so the index is built
    again from the restored store, in a private folder made anew."""
    folder = Path(f"{target}.vectors")
    if folder.exists():
        shutil.rmtree(folder)
    private_folder(folder)


def _shown(store: str | Path) -> str:
    """A store as named in an answer: a URL without its secrets."""
    return redacted(str(store)) if "://" in str(store) else str(store)
