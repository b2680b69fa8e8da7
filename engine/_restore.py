"""Restoring a backup without bringing back what was erased since.

A backup holds every text its store held when it was taken; an erasure
after that destroyed the texts in the store, not in the backup. So a
restore carries the erasures of the store it replaces into the restored
one before anything can read it: for each memory the replaced store
marks erased (``erasure_marks``: tenant, memory id, the last version
erased), a memory the backup holds at a version so erased gets a
``memory.erased`` event (the text store destroys its texts, the view and
its text index and vectors drop it, as any erasure does), and every other
mark is kept as it stood (the texts of those versions destroyed, and none
ever written for them again: an import of an older export is refused).

What a restore cannot bring back is everything written after the backup
(saves, revocations, read-backs, keys made since); what it cannot know
is an erasure recorded only in a store it does not replace (one lost
with its disk, one moved aside). A replaced store whose marks cannot be
read is a refusal that says so: nothing is restored over it.

SQLite: ``restore`` replaces the file, which no other process may hold
open. PostgreSQL: ``pg_restore`` into a new database, then
``reapply_erasures`` there from the database it replaces.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memwarden.events import Clock, MemoryErased, private_folder, redacted
from memwarden.projections import UnknownBackend, copy_store_file, sqlite_path

from ._core import Core, log
from ._errors import InvalidInput
from ._rights import SYSTEM, Principal, operation

PG_RESTORE = (
    "pg_restore --dbname NEW_URL FILE into a new database, then "
    "memwarden --db NEW_URL reapply-erasures OLD_URL (the store it replaces)"
)
# what a re-applied erasure's reason begins with (the original's follows)
REAPPLIED = "re-applied at restore: "
# (tenant, memory_id, the last version erased)
Mark = tuple[str, str, int]


class Erasures:
    """What a store knows was erased: its marks, each with the reason of
    the last erasure its log records for that memory."""

    def __init__(self, marks: Iterable[Mark], reasons: dict[tuple[str, str], str]) -> None:
        self.marks = list(marks)
        self.reasons = reasons

    @classmethod
    def of(cls, core: Core) -> Erasures:
        reasons: dict[tuple[str, str], str] = {}
        for event in core.log.read(types=("memory.erased",)):
            p = event.payload
            reasons[(p["tenant"], p["memory_id"])] = str(p.get("reason") or "")
        return cls(core.texts.erasure_marks(), reasons)


def reapply(core: Core, erasures: Erasures, *, replaced: str) -> dict[str, int]:
    """Carry ``erasures`` into ``core``'s store in one transaction: how
    many memories were erased again (events) and how many marks were
    carried for versions it holds no memory at (no event: its log never
    named them, or names later versions saved after the erasure)."""
    events: list[MemoryErased] = []
    carried = 0
    with core.transaction(size=max(len(erasures.marks), 1)) as tx:
        for tenant, memory_id, through in erasures.marks:
            if tx.texts.erased_through(tenant, memory_id) >= through:
                continue  # the restored store knew of it already
            rows = tx.view.named(memory_id, tenant=tenant, access=SYSTEM.access, limit=1)
            row = rows[0] if rows else None
            if row is not None and row["status"] != "erased" and row["version"] <= through:
                why = erasures.reasons.get((tenant, memory_id)) or "erased"
                events.append(
                    MemoryErased(
                        tenant=tenant,
                        memory_id=memory_id,
                        # said once, however many restores carried it
                        reason=(why if why.startswith(REAPPLIED) else f"{REAPPLIED}{why}")[:4096],
                        content_checksum=row["checksum"],
                        version=row["version"],
                        actor="restore",
                    )
                )
            else:
                tx.texts.erase_through(tenant, memory_id, through)
                carried += 1
        if events:
            tx.append(events)
            tx.view.purge_text_index()
    if carried and not events:
        core.store.after_erasure()  # the destroyed texts leave the files too (an erasure's commit does it)
    if events or carried:
        log.warning("erasures_reapplied", erased=len(events), marks=carried, replaced=replaced)
    return {"erasures_reapplied": len(events), "erasure_marks_carried": carried}


@operation("operate")
def reapply_erasures(core: Core, replaced: str, *, caller: Principal) -> dict[str, Any]:
    """Carry every erasure the store ``replaced`` names (a URL or path)
    knew of into this one: after a PostgreSQL database is restored from a
    dump (``pg_restore``) in place of ``replaced``, or a store is restored
    by hand, so the restore serves no text erased since its backup."""
    if str(replaced) == str(core.path):
        raise InvalidInput("replaced", "name the store this one replaces, not this store")
    erasures = _read_erasures(replaced, core.clock)
    return {"replaced": _shown(replaced), **reapply(core, erasures, replaced=_shown(replaced))}


def restore(store: str | Path, backup: str | Path, *, clock: Clock | None = None) -> dict[str, Any]:
    """Put the SQLite backup ``backup`` in place of the store ``store``,
    with every erasure ``store`` knew of applied to it first; the backup
    file is left as it was. Refused, and nothing changed, when ``store``
    is a PostgreSQL URL, is open in another process, or exists and its
    erasures cannot be read; or when ``backup`` is no memwarden store or
    its chain does not verify."""
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
    erasures = Erasures([], {})
    if replaced:
        erasures = _read_erasures(str(target), clock)
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
            done = reapply(core, erasures, replaced=str(target))
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


def _read_erasures(store: str, clock: Clock | None) -> Erasures:
    try:
        with Core(store, clock=clock) as old:
            return Erasures.of(old)
    except Exception as exc:
        raise InvalidInput(
            "db",
            f"the erasures of {_shown(store)}, the store a restore replaces, cannot be read ({exc}); "
            "nothing was restored: repair it, or move it aside knowing its erasures will not be re-applied",
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
