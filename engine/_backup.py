"""A backup of the store taken while the server writes.

SQLite: the online backup API copies a consistent snapshot page by page
while writers go on (WAL mode lets them). PostgreSQL: ``pg_dump`` is the
way (it takes a consistent snapshot too); this refuses and says so rather
than copy half a server."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from memwarden.events import private_file
from memwarden.projections import SQLiteStore

from ._core import Core, log
from ._errors import InvalidInput
from ._rights import Principal, operation

PG_DUMP = (
    "pg_dump --format=custom --file FILE URL (restore with pg_restore --dbname NEW_URL FILE, "
    "then memwarden --db NEW_URL reapply URL: a dump keeps texts erased since)"
)


@operation("operate")
def backup(core: Core, path: str | Path, *, caller: Principal) -> dict[str, Any]:
    """Copy the SQLite store to ``path`` (a new file) while it is in use;
    the copy opens as a store of its own, its chain and view intact."""
    source = core.path
    if "://" in str(source) or not isinstance(core.store, SQLiteStore):
        raise InvalidInput("db", f"a backup of a PostgreSQL store is taken with pg_dump: {PG_DUMP}")
    target = Path(path)
    if target.exists():
        raise InvalidInput("file", f"{target} exists: a backup goes to a new file")
    tmp = target.with_name(target.name + ".tmp")
    try:
        # its owner's alone (``private_file``): a leftover of a killed backup
        # is made again rather than written into with whatever mode it had
        tmp.unlink(missing_ok=True)
        private_file(tmp)
        head = core.store.backup(tmp)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InvalidInput("file", f"{target}: {exc}") from None
    os.replace(tmp, target)  # whole or not at all
    log.warning("backup_taken", file=str(target), head_seq=head)
    return {"file": str(target), "head_seq": head, "bytes": target.stat().st_size}
