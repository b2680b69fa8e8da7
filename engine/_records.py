"""Memory records as operators keep them (one JSON object a line): importing
them into the log, and scanning a file of them as the article's own scan does.

A record's ``revocation_version`` is a version of the policy named by its
``policy`` field (``"default"`` when absent), compared with that policy's
current version (``_versions``). On import, for each policy:

* a record under the current version is imported;
* a policy that was never set adopts the one version its records name (with
  numbered versions only, the highest); records naming two different keys
  for such a policy refuse the file, since nothing says which is current;
* a record under a retired version (or a number below the current one) is
  imported as history: not usable (``policy_changed``) until re-verified,
  exactly like a memory the policy change found in the log;
* a record under any other version is refused and reported (the file is
  ahead of this database: ``memwarden policy set`` first), as is a record
  fetched before a revocation that covers it.

A file with an invalid line is refused whole and nothing is written; valid
records are each imported or refused, and the refusals are reported.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from memwarden.events import (
    Event,
    MemoryInvalidated,
    MemorySaved,
    PolicyVersion,
    Scope,
    Texts,
    canonical_json,
    content_checksum,
    format_ts,
    get_logger,
    sha256_hex,
    version_key,
)
from memwarden.events._types import Identifier, NonEmptyStr, UTCDateTime
from memwarden.projections import Access, Revocation, ViewReader, Write, blocking_revocation
from pydantic import BaseModel, ConfigDict, ValidationError

from ._core import Core
from ._errors import InvalidInput
from ._limits import MAX_BATCH, check_source_url
from ._rights import Principal, operation
from ._saving import expiry, fetch_time
from ._validation import build, field_error
from ._versions import adopt, current_version, is_retired
from ._views import DueItem, ImportResult

log = get_logger("memwarden.records")


class MemoryRecord(BaseModel):
    """One line of a memory-record file."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # built by the first record file read
    memory_id: Identifier
    kind: Identifier
    summary: NonEmptyStr
    source_url: NonEmptyStr
    fetched_at: UTCDateTime
    expires_at: UTCDateTime | None = None
    scope: Scope
    policy: Identifier = "default"
    revocation_version: PolicyVersion = 1
    invalidation_reason: str | None = None
    verified_at: UTCDateTime | None = None
    content: str | None = None


Line = tuple[int, MemoryRecord, str]  # line number, record, digest of its bytes


def read_records(path: str | Path | BinaryIO) -> list[Line]:
    """Every record of the file (or of a binary stream, read once: a pipe),
    or InvalidInput naming the first bad line."""
    if isinstance(path, str | Path):
        try:
            fh: BinaryIO = open(path, "rb")
        except OSError as exc:
            raise InvalidInput("file", f"{path}: {exc.strerror or exc}") from None
    else:
        fh = path
    records: list[Line] = []
    with fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                data = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                raise InvalidInput(f"line {number}", f"not valid JSON: {exc}") from None
            if not isinstance(data, dict):
                raise InvalidInput(f"line {number}", "a record must be a JSON object")
            try:
                record = MemoryRecord.model_validate(data)
            except ValidationError as exc:
                raise field_error(exc, f"line {number}") from None
            records.append((number, record, sha256_hex(canonical_json(data))))
    return records


def scan_records(path: str | Path | BinaryIO, now: datetime) -> list[DueItem]:
    """The article's scan, in file order: a record with an
    ``invalidation_reason`` is ``revoked``; else one at or past its
    ``expires_at`` is ``expired``. Nothing is written anywhere."""
    due: list[DueItem] = []
    for _, record, _ in read_records(path):
        if record.invalidation_reason:
            due.append(DueItem(record.memory_id, record.source_url, "revoked", record.scope.tenant))
        elif record.expires_at is not None and record.expires_at <= now:
            due.append(DueItem(record.memory_id, record.source_url, "expired", record.scope.tenant))
    return due


@operation("operate")
def import_records(
    warden: Core, path: str | Path | BinaryIO, *, caller: Principal, progress: Callable[[int], None] | None = None
) -> ImportResult:
    """Turn a file of memory records into events.

    A record has no separate content: its summary is its text unless a
    ``content`` field is given. Re-importing the same file is a no-op
    (event ids come from each record's bytes). ``progress`` is told of
    each record handled. The records commit a batch save's worth
    (``MAX_BATCH``) at a time, each batch appended in one pass.
    """
    records = read_records(path)
    now = warden.clock.now()
    urls: dict[int, str] = {}  # each record's source as it is recorded, by line
    for at, (number, record, digest) in enumerate(records):  # the file is refused whole before anything is written
        if "expires_at" not in record.model_fields_set:
            # a record naming no expiry lives as its kind's rule says, as a save does (an
            # explicit null is the article's "never by time"); an unknown kind is refused
            try:
                expires = expiry(warden, record.kind, record.fetched_at, None, None)
            except InvalidInput as exc:
                raise InvalidInput(
                    f"line {number}.kind", exc.problem.replace("--expires-at or --ttl", "expires_at")
                ) from None
            records[at] = (number, record.model_copy(update={"expires_at": expires}), digest)
        fetch_time(record.fetched_at, now, f"line {number}.fetched_at")
        if record.verified_at is not None:
            fetch_time(record.verified_at, now, f"line {number}.verified_at")
        text = record.content if record.content is not None else record.summary
        warden.limits.check_text(f"line {number}.content", text, "max_content_bytes")
        urls[number] = check_source_url(f"line {number}.source_url", record.source_url)
    tick = progress or (lambda n: None)
    refused: list[dict[str, Any]] = []
    imported = skipped = 0
    with warden.transaction() as tx:  # the policies this file makes current, before any record
        adoptions = list(_adoptions(tx.view, records))
        if adoptions:
            tx.append(adoptions)
    # then the records a batch at a time, each batch one transaction as a
    # batch save is (``MAX_BATCH``): an import holds the write lock no longer
    # than a batch does, and one stopped part way is finished by running it
    # again (each record's event id comes from its bytes)
    for start in range(0, len(records), MAX_BATCH):
        chunk = records[start : start + MAX_BATCH]
        with warden.transaction(size=len(chunk)) as tx:
            done = _import_chunk(warden, tx, chunk, urls, now, refused, tick)
        imported += done[0]
        skipped += done[1]
    if refused:
        log.warning("records_refused", count=len(refused))
    return ImportResult(imported, refused, skipped)


def _import_chunk(
    warden: Core,
    tx: Write,
    chunk: list[Line],
    urls: dict[int, str],
    now: datetime,
    refused: list[dict[str, Any]],
    tick: Callable[[int], None],
) -> tuple[int, int]:
    """One batch of records judged and appended in one pass: their texts,
    then their events. (imported, skipped); refusals go to ``refused``."""
    imported = skipped = 0
    keys = [(r.scope.tenant, r.memory_id) for _, r, _ in chunk]
    revocations = tx.view.revocations({tenant for tenant, _ in keys})  # each tenant's that may cover it
    versions: dict[tuple[str, str], dict[str, Any] | None] = {}
    erased = set(tx.view.erasures(keys))
    held = tx.held([f"rec_{digest[:40]}" for _, _, digest in chunk])
    rows = tx.view.rows(Access.system(), [key for key in dict.fromkeys(keys) if key not in erased])
    # what this batch appends, ahead of the view: a record repeated in it
    # is skipped, one more version of a memory takes the next number
    pending: set[str] = set()
    latest: dict[tuple[str, str], int] = {}
    texts: list[Texts] = []
    events: list[Event] = []
    for number, record, digest in chunk:
        tick(1)
        event_id = f"rec_{digest[:40]}"
        key = (record.scope.tenant, record.memory_id)
        if key in erased:
            # whether this very record was imported before must not tell
            # which words an erased memory held: every record of it is refused alike
            refused.append({"line": number, "memory_id": record.memory_id, "reason": "erased"})
            continue
        if event_id in pending or event_id in held:
            skipped += 1  # this very record was imported before
            continue
        refusal = _refusal(tx.view, record, urls[number], revocations[record.scope.tenant], versions, now)
        if refusal is not None:
            refused.append({"line": number, "memory_id": record.memory_id, **refusal})
            continue
        row = rows.get(key)
        version = latest[key] = latest.get(key, row.version if row else 0) + 1
        text, saved = _record_events(warden, record, urls[number], event_id, f"line {number}", version, events)
        texts.append(Texts(saved.tenant, record.memory_id, version, record.summary, text))
        pending.add(event_id)
        imported += 1
    tx.texts.put_many(texts)  # before the events: the fold indexes them
    tx.append(events)
    return imported, skipped


def _adoptions(view: ViewReader, records: list[Line]) -> Iterator[Any]:
    """The policy versions this file makes current (policies never set)."""
    named: dict[str, dict[str, tuple[int, int | str]]] = {}
    for number, record, _ in records:
        named.setdefault(record.policy, {}).setdefault(
            version_key(record.revocation_version), (number, record.revocation_version)
        )
    for policy, versions in named.items():
        if current_version(view, policy) is not None:
            continue
        # version 1 (a record naming none is under it) counts as one of the file's versions:
        # adopting a key beside it would retire the file's own version-1 records as it imports them
        values = [v for _, v in versions.values()]
        if all(isinstance(v, int) for v in values):
            chosen = max(values, key=int)  # numbers only go up: the lower ones are history
        elif len(versions) == 1:
            chosen = values[0]
        else:
            (a_line, a), (b_line, b) = sorted(versions.values(), key=lambda lv: lv[0])[:2]
            raise InvalidInput(
                f"line {b_line}.revocation_version",
                f"policy {policy!r} has no current version and the file names {a!r} (line {a_line}) and {b!r}: "
                f"make the current one known first (`memwarden policy set {policy} VERSION`)",
            )
        event = adopt(view, policy, chosen, actor="import", may_set=True)  # the operator's file
        if event is not None:
            yield event


def _refusal(
    view: ViewReader,
    record: MemoryRecord,
    source_url: str,
    revocations: list[Revocation],
    versions: dict[tuple[str, str], dict[str, Any] | None],
    now: datetime,
) -> dict[str, Any] | None:
    # the policies stand still once the file's adoptions are appended: each
    # (policy, version) is judged once an import, not once a record (four
    # reads each, round trips on a server)
    key = (record.policy, version_key(record.revocation_version))
    if key not in versions:
        versions[key] = _version_refusal(view, record)
    if versions[key] is not None:
        return versions[key]
    candidate = {
        "memory_id": record.memory_id,
        "kind": record.kind,
        "source_url": source_url,
        **record.scope.model_dump(),
    }
    blocking = blocking_revocation(revocations, {**candidate, "fetched_at": format_ts(min(record.fetched_at, now))})
    return None if blocking is None else {"reason": "revoked", "revocation_id": blocking.revocation_id}


def _version_refusal(view: ViewReader, record: MemoryRecord) -> dict[str, Any] | None:
    if not is_retired(view, record.policy, record.revocation_version):
        try:
            adopt(view, record.policy, record.revocation_version, actor="import", may_set=True)
        except InvalidInput as exc:
            return {"reason": "policy_version", "detail": exc.problem}
    return None


def _record_events(
    warden: Core, record: MemoryRecord, source_url: str, event_id: str, where: str, version: int, events: list[Event]
) -> tuple[str, MemorySaved]:
    """A record's events, added to ``events``: its save, and its
    invalidation when it carries one. (Its text, its save.)"""
    text = record.content if record.content is not None else record.summary
    saved = build(
        MemorySaved,
        where,
        event_id=event_id,
        memory_id=record.memory_id,
        version=version,
        kind=record.kind,
        summary_checksum=content_checksum(record.summary),
        content_checksum=content_checksum(text),
        content_length=len(text.encode("utf-8")),
        source_url=source_url,
        fetched_at=fetch_time(record.fetched_at, warden.clock.now(), f"{where}.fetched_at"),
        expires_at=record.expires_at,
        verified_at=fetch_time(record.verified_at, warden.clock.now(), f"{where}.verified_at")
        if record.verified_at
        else None,
        scope=record.scope.model_dump(),
        policy=record.policy,
        revocation_version=record.revocation_version,
        actor="import",
    )
    events.append(saved)
    if record.invalidation_reason:
        events.append(
            MemoryInvalidated(
                event_id=f"{event_id}_inv",
                tenant=saved.tenant,
                memory_id=record.memory_id,
                version=saved.version,
                reason=record.invalidation_reason,
                actor="import",
            )
        )
    return text, saved
