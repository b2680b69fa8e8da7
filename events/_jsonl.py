"""The log as JSON lines: for export, import, inspection, and as a backend.

One canonical JSON envelope a line (hash included). Appends are written
whole and fsync'd before they are acknowledged; a write that fails part-way
is cut back off the file, so no half event is ever left for a reader.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from ._append import Existing, prepare_batch
from ._canonical import canonical_json, content_checksum
from ._errors import LogDamaged
from ._files import write_private
from ._log import get_logger
from ._models import Event
from ._recorded import (
    EMPTY_HEAD,
    ChainReport,
    Head,
    RecordedEvent,
    StoredRow,
    check_rows,
    event_from_row,
)
from ._texts import Texts
from ._time import Clock, SystemClock
from ._upcasting import LegacyTenants

log = get_logger("memwarden.jsonl")

_KEYS = (
    "seq",
    "event_id",
    "type",
    "stream",
    "stream_version",
    "occurred_at",
    "recorded_at",
    "actor",
    "schema_version",
    "payload",
    "prev_hash",
    "hash",
)
_KEYSET = frozenset(_KEYS)


_TEXT_KEYS = frozenset({"tenant", "memory_id", "version", "summary", "content"})


def _json_object(text: str, line_no: int) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LogDamaged(f"not valid JSON ({exc.msg} at column {exc.colno})", line=line_no) from None
    if not isinstance(data, dict):
        raise LogDamaged("an event line must be a JSON object", line=line_no)
    return data


def is_text_line(text: str) -> bool:
    """An export's text line (``{"texts": {...}}``), not an event."""
    return text.startswith('{"texts":')


def parse_text_line(text: str, line_no: int) -> Texts:
    """One export text line, or ``LogDamaged`` naming the line."""
    data = _json_object(text, line_no)
    body = data.get("texts")
    if set(data) != {"texts"} or not isinstance(body, dict) or set(body) != _TEXT_KEYS:
        raise LogDamaged(f"a text line holds exactly {sorted(_TEXT_KEYS)} under 'texts'", line=line_no)
    if not (isinstance(body["tenant"], str) and isinstance(body["memory_id"], str)) or type(body["version"]) is not int:
        raise LogDamaged("texts: tenant and memory_id must be strings, version an integer", line=line_no)
    for key in ("summary", "content"):
        if body[key] is not None and not isinstance(body[key], str):
            raise LogDamaged(f"texts.{key}: must be a string or null", line=line_no)
    return Texts(body["tenant"], body["memory_id"], body["version"], body["summary"], body["content"])


def parse_line(text: str, line_no: int) -> StoredRow:
    """One JSONL line as a row, or ``LogDamaged`` naming the line."""
    data = _json_object(text, line_no)
    keys = set(data)
    if keys != _KEYSET:
        missing, extra = sorted(_KEYSET - keys), sorted(keys - _KEYSET)
        raise LogDamaged(f"envelope fields wrong (missing {missing}, unexpected {extra})", line=line_no)
    for key in ("seq", "stream_version", "schema_version"):
        if type(data[key]) is not int:
            raise LogDamaged(f"{key}: must be an integer", line=line_no)
    for key in ("event_id", "type", "stream", "occurred_at", "recorded_at", "actor", "prev_hash", "hash"):
        if not isinstance(data[key], str):
            raise LogDamaged(f"{key}: must be a string", line=line_no)
    if not isinstance(data["payload"], dict):
        raise LogDamaged("payload: must be a JSON object", line=line_no)
    return StoredRow(
        data["seq"],
        data["event_id"],
        data["type"],
        data["stream"],
        data["stream_version"],
        data["occurred_at"],
        data["recorded_at"],
        data["actor"],
        data["schema_version"],
        canonical_json(data["payload"]),
        data["prev_hash"],
        data["hash"],
    )


def iter_lines(fh: BinaryIO, max_line: int | None = None) -> Iterator[tuple[int, str]]:
    """(line number, text) of each complete line; a torn last line is damage,
    and so is a line longer than ``max_line`` bytes, refused once that many
    are read (not after reading it whole: a 100 MB line costs its first bytes only)."""
    number = 0
    while True:
        raw = fh.readline(-1 if max_line is None else max_line + 1)
        if not raw:
            return
        number += 1
        if max_line is not None and len(raw) > max_line:
            raise LogDamaged(f"a line longer than {max_line} bytes: no event or text of this store is", line=number)
        if not raw.endswith(b"\n"):
            raise LogDamaged("incomplete last line (no newline): a torn or truncated write", line=number)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LogDamaged(f"not UTF-8 at byte {exc.start}", line=number) from None
        if text.strip():
            yield number, text


def read_verified(path: str | Path, *, validate: bool = True, max_line: int | None = None) -> Iterator[RecordedEvent]:
    """Stream a JSONL log, checking every hash and link as it goes.

    Raises ``LogDamaged`` naming the first bad line. Callers that must write
    nothing from a damaged file run this to the end first (``verify_file``).
    """
    tenants = LegacyTenants()
    with open(path, "rb") as fh:
        numbered = iter_lines(fh, max_line)
        line_of: dict[int, int] = {}

        def rows() -> Iterator[StoredRow]:
            for number, text in numbered:
                if is_text_line(text):
                    continue  # an export's texts: read_texts checks them
                row = parse_line(text, number)
                line_of[row.seq] = number
                learn_tenant(tenants, row)
                yield row

        prev_seq = 0
        for row, damage in check_rows(rows(), prev_seq=0, prev_hash=EMPTY_HEAD.hash, prev_time=None):
            line = line_of.pop(row.seq, None)
            if damage is not None:
                raise LogDamaged(damage.problem, line=line, seq=row.seq)
            record = event_from_row(row, tenants)
            if validate:
                try:
                    record.to_model()
                except ValueError as exc:
                    raise LogDamaged(
                        f"event at seq {row.seq} is not a valid {row.type}: {exc}", line=line, seq=row.seq
                    ) from None
            prev_seq = row.seq
            yield record
        del prev_seq


def learn_tenant(tenants: LegacyTenants, row: StoredRow) -> None:
    """Rows read in seq order teach ``tenants`` each schema-1 stream's
    tenant from its first save, which comes before its other events."""
    if row.type == "memory.saved" and row.schema_version == 1:
        scope = json.loads(row.payload).get("scope")
        if isinstance(scope, dict) and isinstance(scope.get("tenant"), str):
            tenants.learn(row.stream, scope["tenant"])


Checksums = dict[tuple[str, str, int], tuple[str, str]]


def verify_export(path: str | Path, *, texts: bool = True, max_line: int | None = None) -> tuple[int, Checksums]:
    """Check a whole JSONL log (and, with ``texts``, the texts it carries):
    the number of events and the (summary, content) checksums of every
    saved version (what ``read_texts`` checks the texts against), or
    ``LogDamaged`` naming the first bad line."""
    checksums: Checksums = {}
    count = 0
    for record in read_verified(path, max_line=max_line):
        count += 1
        if record.type == "memory.saved":
            p = record.payload
            checksums[(p["tenant"], p["memory_id"], p["version"])] = (p["summary_checksum"], p["content_checksum"])
    if texts:
        for _ in read_texts(path, checksums, max_line=max_line):
            pass
    return count, checksums


def verify_file(path: str | Path) -> int:
    """Check a whole JSONL log and its texts; the number of events."""
    return verify_export(path)[0]


def read_texts(path: str | Path, checksums: Checksums, *, max_line: int | None = None) -> Iterator[Texts]:
    """The texts an export carries, each checked against the checksums its
    version's ``memory.saved`` recorded (a text that does not match, or has
    no such version, is damage named by its line)."""
    with open(path, "rb") as fh:
        for number, text in iter_lines(fh, max_line):
            if not is_text_line(text):
                continue
            texts = parse_text_line(text, number)
            expected = checksums.get((texts.tenant, texts.memory_id, texts.version))
            if expected is None:
                raise LogDamaged(
                    f"texts of {texts.memory_id!r} v{texts.version} in tenant {texts.tenant!r}: no such saved version",
                    line=number,
                )
            for name, value, checksum in (
                ("summary", texts.summary, expected[0]),
                ("content", texts.content, expected[1]),
            ):
                if value is not None and content_checksum(value) != checksum:
                    raise LogDamaged(f"texts.{name} of {texts.memory_id!r} does not match {checksum}", line=number)
            yield texts


def write_export(records: Iterable[RecordedEvent], path: str | Path, texts: Iterable[Texts] = ()) -> int:
    """Write events as JSONL, then the texts they name (a backup restores
    from both), fsync'd, atomically replacing ``path``."""
    target = Path(path)
    tmp = target.with_name(target.name + ".partial")
    count = 0
    with write_private(tmp) as fh:  # every text it holds: its owner's to read alone
        for record in records:
            fh.write(record.to_json_line().encode("utf-8") + b"\n")
            count += 1
        for item in texts:
            fh.write(canonical_json({"texts": item._asdict()}).encode("utf-8") + b"\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, target)
    return count


class JsonlEventLog:
    """The ``EventLog`` interface over one JSONL file.

    Keeps the event_id index and stream versions in memory (built on open),
    which suits inspection and moderate logs; the SQLite log is the default.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Clock | None = None,
        fsync: bool = True,
        opener: Any = open,
        syncer: Any = os.fsync,
    ) -> None:
        # opener and syncer are seams for fault injection (tests/reliability)
        self.path = Path(path)
        self.clock: Clock = clock or SystemClock()
        self.fsync = fsync
        self._open = opener
        self._sync = syncer
        self._lock = threading.RLock()
        self._ids: dict[str, Existing] = {}
        self._versions: dict[str, int] = {}
        self._head = EMPTY_HEAD
        self._tenants = LegacyTenants()
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            self.path.touch()
        size = self.path.stat().st_size
        good = 0
        with open(self.path, "rb") as fh:
            for raw in fh:
                if not raw.endswith(b"\n"):
                    break  # an unacknowledged, torn append: cut below
                good += len(raw)
                text = raw.decode("utf-8")
                if not text.strip():
                    continue
                row = parse_line(text, 0)
                self._remember(row)
        if good != size:
            log.warning("jsonl_torn_tail_removed", path=str(self.path), bytes=size - good)
            with open(self.path, "r+b") as fh:
                fh.truncate(good)
                os.fsync(fh.fileno())

    def _remember(self, row: StoredRow) -> None:
        self._ids[row.event_id] = (row.seq, row.type, row.stream, row.payload)
        self._versions[row.stream] = row.stream_version
        self._head = Head(row.seq, row.hash, row.recorded_at)

    def append(self, events: Iterable[Event], expected_version: int | dict[str, int] | None = None) -> list[int]:
        with self._lock:
            batch = prepare_batch(
                events,
                head=self._head,
                clock=self.clock,
                lookup=lambda ids, streams: (
                    {i: self._ids[i] for i in ids if i in self._ids},
                    {s: self._versions[s] for s in streams if s in self._versions},
                ),
                expected_version=expected_version,
            )
            if not batch.records:
                return batch.positions
            data = b"".join(r.to_json_line().encode("utf-8") + b"\n" for r in batch.records)
            size = self.path.stat().st_size
            try:
                with self._open(self.path, "ab") as fh:
                    fh.write(data)
                    fh.flush()
                    if self.fsync:
                        self._sync(fh.fileno())
            except BaseException:
                self._cut_back(size)
                raise
            for r in batch.records:
                self._remember(StoredRow._make(r.row()))
            return batch.positions

    def _cut_back(self, size: int) -> None:
        # The batch was not acknowledged: whatever part of it reached the
        # file is removed so no reader ever sees half a batch.
        try:
            with open(self.path, "r+b") as fh:
                fh.truncate(size)
                os.fsync(fh.fileno())
        except OSError:
            log.error("jsonl_cut_back_failed", path=str(self.path), size=size)

    def _rows(self) -> Iterator[StoredRow]:
        with open(self.path, "rb") as fh:
            for number, text in iter_lines(fh):
                row = parse_line(text, number)
                learn_tenant(self._tenants, row)
                yield row

    def read(
        self, after_seq: int = 0, until_seq: int | None = None, until_time: str | None = None
    ) -> Iterator[RecordedEvent]:
        for row in self._rows():
            if row.seq <= after_seq:
                continue
            if (until_seq is not None and row.seq > until_seq) or (
                until_time is not None and row.recorded_at > until_time
            ):
                return
            yield event_from_row(row, self._tenants)

    def head(self) -> Head:
        with self._lock:
            return self._head

    def verify_chain(self, from_seq: int = 1, to_seq: int | None = None) -> ChainReport:
        checked = 0
        last = EMPTY_HEAD
        try:
            for row, damage in check_rows(self._rows(), prev_seq=0, prev_hash=EMPTY_HEAD.hash, prev_time=None):
                if damage is not None:
                    return ChainReport(False, self._head.seq, last.hash, checked, damage.first_bad, damage.problem)
                if row.seq >= from_seq:
                    checked += 1
                last = Head(row.seq, row.hash, row.recorded_at)
                if to_seq is not None and row.seq >= to_seq:
                    break
        except LogDamaged as exc:
            return ChainReport(False, self._head.seq, last.hash, checked, last.seq + 1, str(exc))
        return ChainReport(True, last.seq, last.hash, checked)
