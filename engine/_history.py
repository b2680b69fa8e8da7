"""For auditors: rebuild and check the projections, verify the chain,
export and import the log (the past itself is asked in ``_past``)."""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from memwarden.events import (
    GENESIS_HASH,
    ChainReport,
    LogDamaged,
    StoreDamaged,
    actual_checksum,
    content_checksum,
    read_texts,
    read_verified,
    verify_export,
    write_export,
)
from memwarden.projections import Access, CheckResult, TextRow

from ._core import Core
from ._errors import InvalidInput
from ._rights import Principal, operation

T = TypeVar("T")


@operation("operate")
def rebuild(warden: Core, *, caller: Principal, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    started = time.perf_counter()
    count = warden.store.rebuild(progress=progress)
    seconds = time.perf_counter() - started
    return {"ok": True, "events": count, "seq": warden.log.head().seq, "seconds": round(seconds, 3)}


@operation("review")
def check_projections(warden: Core, *, caller: Principal) -> CheckResult:
    """Rebuild from the log apart from the live view and compare the two."""
    return warden.store.check()


@operation("review")
def audit_verify(
    warden: Core,
    against: str | None = None,
    *,
    caller: Principal,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Check the whole chain; with ``against`` (``SEQ:HASH`` kept earlier),
    also prove that today's log still extends that head. ``progress`` is
    told of the events checked as each stretch of the chain passes."""
    anchor = kept_head(against) if against is not None else None
    # one check of the files and the chain at a time per server: a request
    # arriving meanwhile joins it (the anchor, cheap, is checked per request)
    damage, report, texts = warden.chain_check.run(lambda advance: _check(warden, advance), progress)
    if isinstance(report, StoreDamaged):
        exc = report
        return {
            "ok": False,
            "head_seq": None,
            "head_hash": None,
            "checked": 0,
            "first_bad_seq": None,
            "problem": f"database file damaged: {exc.detail}",
            "against": against,
            "extends_anchor": None,
            "file_problems": damage or [exc.detail],
        }
    out = {
        **report.as_dict(),
        "against": against,
        "extends_anchor": None,
        "file_problems": damage,
        "texts_damaged": texts,
    }
    if damage:
        out["ok"] = False
        out["problem"] = out["problem"] or f"database file damaged: {damage[0]}"
    if anchor is not None:
        seq, expected = anchor
        event = warden.log.get(seq) if seq > 0 else None
        if seq == 0 and expected != GENESIS_HASH:
            # the empty log's head is the genesis hash, and nothing else
            out.update(ok=False, extends_anchor=False)
            if report.ok:
                out.update(first_bad_seq=0, problem=f"the head at seq 0 is {GENESIS_HASH}, not the anchored {expected}")
        elif seq > 0 and event is None:
            head = warden.log.head().seq
            problem = (
                f"the log ends at seq {head}, before the anchored seq {seq}: events after seq {head} were removed"
                " since the anchor was taken (or the anchor is another store's)"
                if seq > head
                else f"the anchored seq {seq} is no longer in the log"
            )
            out.update(ok=False, extends_anchor=False)
            if report.ok:
                out.update(first_bad_seq=seq, problem=problem)
        elif seq > 0 and event is not None and event.hash != expected:
            out.update(ok=False, extends_anchor=False)
            if report.ok or (report.first_bad_seq or 0) > seq:
                out.update(
                    first_bad_seq=seq,
                    problem=f"seq {seq} has hash {event.hash}, not the anchored {expected}: history was rewritten",
                )
        else:
            out["extends_anchor"] = report.ok or (report.first_bad_seq or 0) > seq
    return out


def _check(warden: Core, advance: Callable[[int], None]) -> tuple[list[str], ChainReport | StoreDamaged, int]:
    """The files, the chain and the texts checked once: what every joined
    ``audit_verify`` reads its answer from. A file that cannot be read is
    the answer (damage found); a store that cannot be reached (a server
    down) is raised, ``StoreUnavailable``: nothing was checked, nothing is
    known to be damaged."""
    damage = warden.file_problems()
    try:
        report = _verify_in_stretches(warden, advance)
    except StoreDamaged as exc:
        return damage, exc, 0
    # the summaries are checked against the events only where the chain holds: a damaged
    # event is the answer already, and may not even decode
    return damage, report, texts_damaged(warden, summaries=report.ok)


def kept_head(against: str) -> tuple[int, str]:
    """(seq, hash) of a head kept elsewhere, given as ``SEQ:HASH``."""
    seq_text, _, hash_text = str(against).partition(":")
    hash_text = hash_text.lower()
    if (
        not (seq_text.isascii() and seq_text.isdigit() and len(seq_text) <= 18)
        or len(hash_text) != 64
        or any(c not in "0123456789abcdef" for c in hash_text)
    ):
        raise InvalidInput("against", "must be SEQ:HASH, as printed by 'audit head' (seq up to 18 digits, 64 hex)")
    return int(seq_text), hash_text


def _verify_in_stretches(warden: Core, progress: Callable[[int], None]) -> ChainReport:
    """The chain checked a stretch at a time, so a caller can show progress.
    Each stretch checks its first event's link to the stored hash before
    it, which the stretch before proved, so the stretches together prove
    what one pass does; the last runs to the end, where rows missing from
    the end are found."""
    head = warden.log.head().seq
    stretch = max(50_000, head // 20)
    start, checked = 1, 0
    while True:
        last = start + stretch - 1
        report = warden.log.verify_chain(start, None if last >= head else last)
        checked += report.checked
        progress(report.checked)
        if not report.ok or last >= head:
            return dataclasses.replace(report, checked=checked)
        start = last + 1


def texts_damaged(warden: Core, *, summaries: bool = True) -> int:
    """How many memories' current texts no longer match what their events
    recorded: a content hashing to another checksum, a summary to another
    ``summary_checksum``, or texts gone while the memory is not erased. Not
    chain damage (the events keep the true checksums): a changed content is
    quarantined and resynced when read, so it is reported, not failed on."""
    bad = 0
    with warden.store.reading() as view:  # no freshness asked: an audit reads a damaged view too
        rows = view.texts(Access.system())
        while chunk := list(itertools.islice(rows, 2000)):
            recorded = _summary_checksums(warden, chunk) if summaries else {}
            for text in chunk:
                expected = recorded.get((text.tenant, text.memory_id, text.version))
                bad += (
                    text.content is None
                    or text.summary is None
                    or actual_checksum(text.content) != text.checksum
                    or (expected is not None and content_checksum(text.summary) != expected)
                )
    return bad


def _summary_checksums(warden: Core, texts: list[TextRow]) -> dict[tuple[str, str, int], str]:
    """The summary checksum each of these versions' save recorded (a save
    from before summaries were hashed recorded the summary itself)."""
    out: dict[tuple[str, str, int], str] = {}
    for event in warden.log.memories_events(sorted({(t.tenant, t.memory_id) for t in texts})):
        p = event.payload
        if event.type == "memory.saved":
            recorded = p.get("summary_checksum") or (content_checksum(p["summary"]) if p.get("summary") else None)
            if recorded is not None:
                out[(p["tenant"], p["memory_id"], p["version"])] = recorded
    return out


@operation("review")
def audit_head(warden: Core, *, caller: Principal) -> dict[str, Any]:
    head = warden.log.head()
    return {"seq": head.seq, "hash": head.hash, "recorded_at": head.recorded_at}


def _extends(path: str | Path, seq: int, expected: str) -> None:
    """The file's event at ``seq`` is the one a kept head names, or LogDamaged."""
    found = next((r.hash for r in read_verified(path) if r.seq == seq), None) if seq else GENESIS_HASH
    if found != expected:
        where = f"seq {seq} has hash {found}" if found else f"the file holds no seq {seq}"
        raise LogDamaged(f"{where}, not the kept head's {expected}: the file does not extend it", seq=seq)


@operation("operate")
def export_log(
    warden: Core, path: str | Path, *, caller: Principal, progress: Callable[[int], None] | None = None
) -> int:
    """The log and every text not erased, in one file: a backup that
    ``import_log`` restores into an empty database. ``progress`` is told
    of each event written."""
    with warden.store.reading():  # one state for the events and the texts; the view is not read
        head = warden.log.head().seq
        events = warden.log.read(until_seq=head)
        return write_export(_counted(events, progress) if progress else events, path, warden.texts.all())


def _counted(items: Iterable[T], progress: Callable[[int], None]) -> Iterator[T]:
    for item in items:
        progress(1)
        yield item


@operation("operate")
def import_log(
    warden: Core,
    path: str | Path,
    *,
    caller: Principal,
    against: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Verify the events and the chain first (with ``against``, a head kept
    elsewhere, also that the file extends it); then, in one transaction, the
    texts (each checked as it is read: a damaged one rolls everything back)
    and the events, each judged as a live write is (the store's append
    rules, the fold, the text store). Texts go in first, so the text index
    is built from them as the events apply. A file refused writes nothing."""
    if not Path(path).exists():
        raise InvalidInput("file", f"{path} does not exist")
    if not Path(path).is_file():  # a pipe: the file is read three times, its chain checked before any write
        raise InvalidInput("file", f"{path} is not a file: an import verifies the whole export before it writes")
    anchor = kept_head(against) if against is not None else None
    longest = warden.limits.longest_line  # a longer line is refused before it is read whole
    events, checksums = verify_export(path, texts=False, max_line=longest)
    if anchor is not None:
        _extends(path, *anchor)
    written = 0
    with warden.transaction(size=events) as tx:
        texts: list[Any] = []
        for version_texts in read_texts(path, checksums, max_line=longest):
            texts.append(version_texts)
            if len(texts) >= 5000:
                tx.texts.put_many(texts)  # one statement: on a server, not a round trip a text
                texts = []
        tx.texts.put_many(texts)
        batch: list[Any] = []
        for record in read_verified(path, max_line=longest):
            batch.append(record)
            if len(batch) >= 5000:
                written += tx.append_recorded(batch)
                if progress:
                    progress(len(batch))
                batch = []
        written += tx.append_recorded(batch)
        if progress:
            progress(len(batch))
    return written
