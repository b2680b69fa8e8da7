"""Read-back confirmation: after a revocation, ask every read path an agent
uses whether any memory the revocation covers is still returned."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from memwarden.events import ReadbackConfirmed, ReadbackFailed, get_logger, parse_ts
from memwarden.projections import Access, LineageQuery, RevocationQuery, RevokedBy, search_tokens

from . import _metrics
from ._core import Core
from ._derivation import rows_for
from ._errors import RevocationNotFound
from ._limits import MAX_PAGE
from ._reading import query
from ._revoking import revocation as _revocation
from ._rights import SYSTEM, Principal, operation

log = get_logger("memwarden.readback")

# tenant, ids -> the (id, version) pairs among them that path still returns as usable
ReadPath = Callable[[str, list[str]], list[tuple[str, int]]]
CHUNK = 500
OWN_TYPES = ("readback.confirmed", "readback.failed")
SINK_TYPE = "sink.readback_recorded"
FTS_SAMPLE = 50


def covered_ids(warden: Core, revocation: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Every memory the revocation covers, and every memory drawn from
    those, by tenant, each with the latest version it covers (whatever its
    status now: an erased or earlier-revoked memory must stay invisible too).
    A version saved after these, from a fetch after the revocation, is not
    covered: serving it is no leak."""
    by_tenant: dict[str, dict[str, int]] = defaultdict(dict)
    with warden.reading() as view:
        query = RevokedBy(
            revocation["revocation_id"], revocation["seq"], revocation["effective_at"], revocation["selector"]
        )
        direct = [c.key for c in view.covered(query)]
        below = {k.key for k in view.lineage(LineageQuery("down", tuple(direct)))} - set(direct)
        for row in rows_for(view, sorted(set(direct) | below)):
            by_tenant[row.tenant][row.memory_id] = row.version
    return by_tenant


def revocation_of(warden: Core, revocation_id: str) -> dict[str, Any]:
    return _revocation(warden, revocation_id, caller=SYSTEM)


def python_path(warden: Core) -> ReadPath:
    def visible(tenant: str, ids: list[str]) -> list[tuple[str, int]]:
        # with contents, as an agent reads them: paged on where an answer stops at its size bound
        served: list[tuple[str, int]] = []
        offset = 0
        while True:
            found = query(
                warden, tenant=tenant, ids=ids, limit=len(ids), offset=offset, with_content=True, caller=SYSTEM
            )
            served.extend((v.memory_id, v.version) for v in found)
            if not found.truncated:
                return served
            offset = found.next_offset or offset + len(found)

    return visible


def fts_path(warden: Core) -> Callable[[str, str], set[tuple[str, int]]]:
    """What a text search for ``word`` returns in ``tenant`` (the query agents run)."""

    def visible(tenant: str, word: str) -> set[tuple[str, int]]:
        found = query(warden, tenant=tenant, text=word, limit=MAX_PAGE, with_content=False, caller=SYSTEM)
        return {(v.memory_id, v.version) for v in found}

    return visible


def _leaks(served: Iterable[tuple[str, int]], covered: dict[str, int]) -> set[str]:
    # a version up to the one covered leaks; a later one was saved fresh after the revocation
    return {memory_id for memory_id, version in served if memory_id in covered and version <= covered[memory_id]}


# the longest word the read-back searches for: a search's text is capped
# (``search_words``), and a prefix this long finds the word just as well
SAMPLE_WORD = 100


def _first_word(summary: str) -> str | None:
    """The summary's first word as the text index holds it: letters and
    digits only, so no control character or quote an agent put in a summary
    can make the read-back's own search refused."""
    return next((t[:SAMPLE_WORD] for t in search_tokens(summary)), None)


@operation("confirm")
def read_back(warden: Core, revocation_id: str, *, caller: Principal, http: ReadPath | None = None) -> dict[str, Any]:
    """Check every read path and record the outcome as an event.

    Returns the record written (or the one already there): a confirmed
    read-back is written once; a failed one again only when what leaks
    changes, so a scheduler retrying it does not flood the log.
    """
    revocation = revocation_of(warden, revocation_id)
    by_tenant = covered_ids(warden, revocation)
    covered = sum(len(ids) for ids in by_tenant.values())
    paths: dict[str, ReadPath] = {"python_query": python_path(warden)}
    if http is not None:
        paths["http_query"] = http
    leaked: set[str] = set()
    for tenant, versions in by_tenant.items():
        ids = list(versions)
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            for visible in paths.values():
                leaked |= _leaks(visible(tenant, chunk), versions)
    # the text index, through the same query agents run, for a sample of the covered
    fts = fts_path(warden)
    sampled = 0
    picked = [(tenant, m) for tenant, versions in by_tenant.items() for m in versions][:FTS_SAMPLE]
    with warden.reading() as view:
        rows = rows_for(view, picked)
        sample = [
            (text.memory_id, text.tenant, text.summary)
            for text in view.texts(Access.system(), [(r.tenant, r.memory_id, r.version) for r in rows])
            if text.summary is not None
        ]
    # one search per distinct (tenant, word): whatever it returns of the covered leaks
    searches = {(tenant, word) for _, tenant, summary in sample if (word := _first_word(summary))}
    for tenant, word in sorted(searches):
        sampled += 1
        leaked |= _leaks(fts(tenant, word), by_tenant.get(tenant, {}))
    checked = [*paths, "fts_text_search"]
    latency_ms = max((warden.clock.now() - parse_ts(revocation["recorded_at"])).total_seconds() * 1000, 0.0)
    with warden.transaction() as tx:
        found = tx.view.revocation_records(RevocationQuery(revocation_id))
        if not found:
            raise RevocationNotFound(revocation_id)
        current = found[0]
        status = current.readback_status
        if status == "confirmed" or (
            status == "failed" and leaked and json.loads(current.leaked_ids or "[]") == sorted(leaked)
        ):
            return {**revocation_of(warden, revocation_id), "written": False}
        if leaked:
            event: Any = ReadbackFailed(
                revocation_id=revocation_id,
                paths_checked=tuple(checked),
                covered=covered,
                still_visible=len(leaked),
                leaked_ids=tuple(sorted(leaked)),
                latency_ms=latency_ms,
                actor="memwarden",
            )
        else:
            event = ReadbackConfirmed(
                revocation_id=revocation_id,
                paths_checked=tuple(checked),
                covered=covered,
                latency_ms=latency_ms,
                actor="memwarden",
            )
        tx.append([event])
    _metrics.READBACK.observe(latency_ms / 1000)
    if leaked:
        log.error("readback_failed", revocation_id=revocation_id, leaked_ids=sorted(leaked)[:20], count=len(leaked))
    else:
        log.info(
            "readback_confirmed",
            revocation_id=revocation_id,
            covered=covered,
            latency_ms=round(latency_ms, 1),
            fts_sampled=sampled,
        )
    return {**revocation_of(warden, revocation_id), "written": True}


@operation("review")
def readback_records(warden: Core, revocation_id: str, *, caller: Principal) -> dict[str, Any]:
    """The read-back events recorded for a revocation, oldest first."""
    revocation_of(warden, revocation_id)  # raises if unknown
    records: list[dict[str, Any]] = []
    sink_records: list[dict[str, Any]] = []
    for e in warden.log.read(streams=[revocation_id], types=(*OWN_TYPES, SINK_TYPE)):
        (sink_records if e.type == SINK_TYPE else records).append(
            {"seq": e.seq, "recorded_at": e.recorded_at, "type": e.type, **e.payload}
        )
    return {
        "revocation_id": revocation_id,
        "confirmed": any(r["type"] == "readback.confirmed" for r in records),
        "records": records,
        # each sink's outcomes outside memwarden (confirmed, leaks found, its state at the deadline)
        "sink_records": sink_records,
    }
