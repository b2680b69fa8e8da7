"""For auditors: replay as of a past point, explain a memory, rebuild and
check the projections, verify the chain, export and import the log."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from memwarden.events import (
    DATABASE_ERRORS,
    GENESIS_HASH,
    ChainReport,
    actual_checksum,
    memory_stream,
    read_texts,
    read_verified,
    verify_export,
    write_export,
)
from memwarden.projections import EVERYONE, Access, CheckResult, fold_memory, revoke_row

from ._core import Core
from ._derivation import Judge
from ._errors import InvalidInput, MemoryNotFound
from ._gate import decide
from ._reading import get
from ._versions import in_force
from ._views import MemoryView

_CONTEXT_TYPES = ("revocation.issued", "policy.version_changed")
T = TypeVar("T")


def resolve_point(warden: Core, *, as_of: str | None = None, seq: int | None = None) -> tuple[int, str]:
    """(seq, time) of a past point given either a time or a seq."""
    if (as_of is None) == (seq is None):
        raise InvalidInput("as_of", "give exactly one of as_of or seq")
    if seq is not None:
        head = warden.log.head().seq
        if not isinstance(seq, int) or seq < 0 or seq > head:
            raise InvalidInput("seq", f"must be between 0 and the head seq {head}")
        event = warden.log.get(seq) if seq else None
        return seq, event.recorded_at if event else warden.now()
    from memwarden.events import canonical_ts

    try:
        when = canonical_ts(as_of)  # type: ignore[arg-type]
    except ValueError as exc:
        raise InvalidInput("as_of", str(exc)) from None
    return warden.log.seq_at(when), when


def replay(
    warden: Core,
    *,
    as_of: str | None = None,
    seq: int | None = None,
    tenant: str | None = None,
    include_unusable: bool = False,
) -> dict[str, Any]:
    point, when = resolve_point(warden, as_of=as_of, seq=seq)
    with warden.store.as_of(point) as past:
        judge = Judge(past, when, past.policies())
        shown = [
            (row, decision)
            for row in past.every_row(tenant)
            if (decision := judge.decide(row)).usable or include_unusable
        ]
    # the past shows that a memory existed, never a text erased since
    with warden.reading() as live:
        labels = live.summaries([row for row, _ in shown])
    memories = []
    for row, decision in shown:
        view = MemoryView.of(row, decision, None, labels.get((row["tenant"], row["memory_id"]))).as_dict()
        view.pop("content")
        memories.append(view)
    return {"as_of": when, "seq": point, "memories": memories}


def explain(
    warden: Core,
    memory_id: str,
    *,
    tenant: str | None = None,
    access: Access = EVERYONE,
    as_of: str | None = None,
) -> dict[str, Any]:
    """The memory's history, the status after each step, and the gate's
    answer at ``as_of`` (default now). Uses the projection's own fold, so
    the story told here is the one the view was built from. The memory is
    found among those ``access`` allows, as every read finds it."""
    if as_of is not None:
        point, when = resolve_point(warden, as_of=as_of)
    else:
        point, when = warden.log.head().seq, warden.now()
    with warden.reading() as view:
        tenant = warden.find_row(view, memory_id, tenant=tenant, access=access)["tenant"]
    streams = (memory_stream(tenant, memory_id), memory_id)  # the second: its stream before schema 2
    row: dict[str, Any] | None = None
    revocations: list[dict[str, Any]] = []
    policies: dict[str, int] = {}
    history: list[dict[str, Any]] = []
    for event in warden.log.read_any(streams=streams, types=_CONTEXT_TYPES, until_seq=point):
        note: str | None = None
        if event.type.startswith("memory."):
            if event.payload["tenant"] != tenant:
                continue  # another tenant's memory of the same id, before schema 2
            row = fold_memory(row, event, revocations)
            note = _note(event)
        elif event.type == "revocation.issued":
            rev = {
                "revocation_id": event.payload["revocation_id"],
                "selector": event.payload["selector"],
                "effective_at": event.payload["effective_at"],
            }
            revocations.append(rev)
            changed = revoke_row(row, rev, event.seq) if row is not None else None
            if changed is None:
                continue
            row = changed
            note = f"{rev['revocation_id']}: {event.payload['reason']}"
        elif event.type == "policy.version_changed":
            policies[event.payload["policy"]] = event.payload["version"]
            if row is None or row["policy"] != event.payload["policy"]:
                continue
            note = f"policy {event.payload['policy']} now at version {event.payload['version']}"
        if row is None:
            continue
        history.append(
            {
                "seq": event.seq,
                "recorded_at": event.recorded_at,
                "occurred_at": event.occurred_at,
                "actor": event.actor,
                "event": event.type,
                "status_after": row["status"],
                "version": row["version"],
                "checksum": row["checksum"],
                "note": note,
            }
        )
    if row is None:
        raise MemoryNotFound(memory_id, as_of)
    # the evidence (and its own evidence) as the view stood at that point
    with warden.reading() if as_of is None else warden.store.as_of(point) as then:
        judge = Judge(then, when, then.policies())
        answer: Any = decide(
            row, now=when, policy_version=in_force(policies, row["policy"]), parents=judge.parents(row)
        )
        tree = judge.tree(row, access=access) if row["derived_from"] != "[]" else None
        drawn = judge.drawn(row, access=access)
    if as_of is None and answer.usable:
        answer = get(warden, memory_id, tenant=tenant)  # the live answer also checks the text
    out = _explained(memory_id, when, point, history, row, answer.usable, answer.reason, answer.action, answer.detail)
    out["tenant"] = tenant
    out["derivation"] = tree
    out["drawn_from_it"] = drawn
    return out


def _explained(
    memory_id: str,
    when: str,
    point: int,
    history: list[dict[str, Any]],
    row: dict[str, Any],
    usable: bool,
    reason: str | None,
    action: str,
    detail: str | None,
) -> dict[str, Any]:
    return {
        "memory_id": memory_id,
        "as_of": when,
        "seq": point,
        "usable": usable,
        "reason": reason,
        "action": action,
        "detail": detail,
        "status": row["status"],
        "version": row["version"],
        "checksum": row["checksum"],
        "fetched_at": row["fetched_at"],
        "expires_at": row["expires_at"],
        "history": history,
    }


def _note(event: Any) -> str | None:
    p = event.payload
    if event.type == "memory.saved":
        return f"version {p['version']} from {p['source_url']}, expires {p.get('expires_at') or 'never (events only)'}"
    if event.type == "memory.verified":
        return f"re-verified, expires {p.get('expires_at') or 'never'}"
    if event.type == "memory.verification_failed":
        return p["error"]
    if event.type == "memory.expired":
        return f"expired at {p['expires_at']}"
    if event.type == "memory.invalidated":
        return p["reason"] + (f": {p['detail']}" if p.get("detail") else "")
    if event.type == "memory.erased":
        return f"erased: {p['reason']}"
    if event.type == "memory.integrity_failed":
        return f"stored text hashed to {p.get('actual_checksum')}, expected {p['expected_checksum']}"
    if event.type == "memory.resynced":
        return f"text restored from {p['resynced_from']}"
    return None


def rebuild(warden: Core, *, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    started = time.perf_counter()
    count = warden.store.rebuild(progress=progress)
    seconds = time.perf_counter() - started
    return {"ok": True, "events": count, "seq": warden.log.head().seq, "seconds": round(seconds, 3)}


def check_projections(warden: Core) -> CheckResult:
    """Rebuild from the log apart from the live view and compare the two."""
    return warden.store.check()


def audit_verify(
    warden: Core, against: str | None = None, *, progress: Callable[[int], None] | None = None
) -> dict[str, Any]:
    """Check the whole chain; with ``against`` (``SEQ:HASH`` kept earlier),
    also prove that today's log still extends that head. ``progress`` is
    told of the events checked as each stretch of the chain passes."""
    anchor: tuple[int, str] | None = None
    if against is not None:
        seq_text, _, hash_text = against.partition(":")
        hash_text = hash_text.lower()
        if (
            not (seq_text.isascii() and seq_text.isdigit() and len(seq_text) <= 18)
            or len(hash_text) != 64
            or any(c not in "0123456789abcdef" for c in hash_text)
        ):
            raise InvalidInput("against", "must be SEQ:HASH, as printed by 'audit head' (seq up to 18 digits, 64 hex)")
        anchor = (int(seq_text), hash_text)
    damage = warden.file_problems()
    try:
        report = _verify_in_stretches(warden, progress) if progress else warden.log.verify_chain()
    except DATABASE_ERRORS as exc:
        return {
            "ok": False,
            "head_seq": None,
            "head_hash": None,
            "checked": 0,
            "first_bad_seq": None,
            "problem": f"database file damaged: {exc}",
            "against": against,
            "extends_anchor": None,
            "file_problems": damage or [str(exc)],
        }
    out = {
        **report.as_dict(),
        "against": against,
        "extends_anchor": None,
        "file_problems": damage,
        "texts_damaged": texts_damaged(warden),
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
            problem = f"the anchored seq {seq} is no longer in the log"
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


def texts_damaged(warden: Core) -> int:
    """How many memories' current texts no longer hash to their checksum.
    Not chain damage: each is quarantined and resynced when read, so it is
    reported, not failed on."""
    bad = 0
    with warden.store.reading() as view:  # no freshness asked: an audit reads a damaged view too
        for checksum, content in view.current_texts():
            if content is not None and actual_checksum(content) != checksum:
                bad += 1
    return bad


def audit_head(warden: Core) -> dict[str, Any]:
    head = warden.log.head()
    return {"seq": head.seq, "hash": head.hash, "recorded_at": head.recorded_at}


def export_log(warden: Core, path: str | Path, *, progress: Callable[[int], None] | None = None) -> int:
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


def import_log(warden: Core, path: str | Path, *, progress: Callable[[int], None] | None = None) -> int:
    """Verify the events and the chain first; then, in one transaction, the
    texts (each checked as it is read: a damaged one rolls everything back)
    and the events. Texts go in first, so the text index is built from
    them as the events apply. A damaged file writes nothing."""
    if not Path(path).is_file():
        raise InvalidInput("file", f"{path} does not exist")
    _, checksums = verify_export(path, texts=False)
    written = 0
    with warden.transaction() as tx:
        for texts in read_texts(path, checksums):
            tx.texts.put(*texts)
        batch: list[Any] = []
        for record in read_verified(path):
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
