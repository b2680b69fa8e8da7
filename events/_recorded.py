"""Events as the log holds them: envelope, payload, position and hash."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from json.scanner import c_make_scanner  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from ._canonical import GENESIS_HASH, canonical_json, chain_hash, preimage_bytes
from ._errors import EventRowDamaged, LogDiverged

if TYPE_CHECKING:
    from ._models import Event

from ._upcasting import (
    TenantOf,
    UpcastContext,
    _no_legacy,
    current_schema_version,
    upcast,
)


class RecordedEvent(NamedTuple):
    """One committed event. ``payload`` is upcast to the current schema;
    ``payload_json`` is its stored canonical text.

    A named tuple (immutable, and made several times faster than a frozen
    dataclass): every append builds one per event and every
    read or rebuild one per row.
    """

    seq: int
    event_id: str
    type: str
    stream: str
    stream_version: int
    occurred_at: str
    recorded_at: str
    actor: str
    schema_version: int
    payload: dict[str, Any]
    prev_hash: str
    hash: str
    payload_json: str = ""

    def to_model(self) -> Event:
        """The typed, validated event model."""
        from ._models import event_from_parts

        return event_from_parts(
            self.type,
            self.payload,
            event_id=self.event_id,
            occurred_at=self.occurred_at,
            actor=self.actor,
        )

    def row(self) -> Row:
        """The stored columns, in ``ROW_COLUMNS`` order."""
        return (
            self.seq,
            self.event_id,
            self.type,
            self.stream,
            self.stream_version,
            self.occurred_at,
            self.recorded_at,
            self.actor,
            self.schema_version,
            self.payload_json,
            self.prev_hash,
            self.hash,
        )

    def envelope(self) -> dict[str, Any]:
        """Everything the hash covers, plus the hash (the export form)."""
        return {
            "seq": self.seq,
            "event_id": self.event_id,
            "type": self.type,
            "stream": self.stream,
            "stream_version": self.stream_version,
            "occurred_at": self.occurred_at,
            "recorded_at": self.recorded_at,
            "actor": self.actor,
            "schema_version": self.schema_version,
            "payload": json.loads(self.payload_json) if self.payload_json else self.payload,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }

    def to_json_line(self) -> str:
        return canonical_json(self.envelope())


# The column order every backend reads rows in.
ROW_COLUMNS = (
    "seq, event_id, type, stream, stream_version, occurred_at, recorded_at, actor, "
    "schema_version, payload, prev_hash, hash"
)
ROW_WIDTH = len(ROW_COLUMNS.split(", "))
Row = tuple[int, str, str, str, int, str, str, str, int, str, str, str]


class StoredRow(NamedTuple):
    """A ``Row`` by name, where memwarden builds the row itself (a JSONL
    line) rather than a driver fetching it: the fields are ``ROW_COLUMNS``."""

    seq: int
    event_id: str
    type: str
    stream: str
    stream_version: int
    occurred_at: str
    recorded_at: str
    actor: str
    schema_version: int
    payload: str  # canonical JSON text
    prev_hash: str
    hash: str


# the JSONL rows are named by the columns every backend selects, in that order
if StoredRow._fields != tuple(ROW_COLUMNS.split(", ")):
    raise AssertionError(f"StoredRow's fields are not ROW_COLUMNS: {StoredRow._fields}")


def row_hash(row: Row) -> str:
    """The hash a stored row should carry, recomputed from its content."""
    # preimage_bytes takes its fields in ROW_COLUMNS order: the row up to its hash
    return chain_hash(row[10], preimage_bytes(*row[:11]))


# The C scanner behind json.loads, called directly: a rebuild decodes every
# payload, and loads() spends a third of its time on wrappers around this.
_scan = c_make_scanner(json.JSONDecoder()) if c_make_scanner is not None else None


def decode_payload(text: str) -> Any:
    """``json.loads(text)`` for a stored payload (an object), faster."""
    if _scan is not None and text.startswith("{"):
        try:
            value, end = _scan(text, 0)
        except StopIteration:
            pass
        else:
            if end == len(text):
                return value
    return json.loads(text)  # anything unusual gets loads() and its errors


def event_from_row(row: Row, tenant_of: TenantOf | None = None) -> RecordedEvent:
    """A stored row as an event, its payload upcast to the current schema
    (``tenant_of`` answers for streams written before memories had tenants)."""
    seq, event_id, type_, stream, sv, occurred, recorded, actor, schema, payload, prev, hash_ = row
    # SQLite keeps whatever a hand-edited file puts in a column: a payload
    # that is a blob, a number or not an object is damage, named by its seq
    # (a TypeError deep in a projection would name nothing)
    try:
        if type(payload) is not str:
            raise ValueError(f"payload is stored as {type(payload).__name__}, not text")
        data = decode_payload(payload)
        if type(data) is not dict:
            raise ValueError("payload is not a JSON object")
    except ValueError as exc:
        raise EventRowDamaged(seq, str(exc)) from None
    if schema != current_schema_version(type_):
        try:
            data = upcast(type_, schema, data, UpcastContext(stream, tenant_of or _no_legacy))
        except ValueError as exc:
            raise EventRowDamaged(seq, str(exc)) from None
    return RecordedEvent(
        seq, event_id, type_, stream, sv, occurred, recorded, actor, schema, data, prev, hash_, payload
    )


@dataclass(frozen=True, slots=True)
class ChainReport:
    """What ``verify_chain`` found. ``first_bad_seq`` is None when ok."""

    ok: bool
    head_seq: int
    head_hash: str
    checked: int
    first_bad_seq: int | None = None
    problem: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "head_seq": self.head_seq,
            "head_hash": self.head_hash,
            "checked": self.checked,
            "first_bad_seq": self.first_bad_seq,
            "problem": self.problem,
        }


@dataclass(frozen=True, slots=True)
class Head:
    seq: int
    hash: str
    recorded_at: str | None = None


EMPTY_HEAD = Head(0, GENESIS_HASH, None)


class Damage(NamedTuple):
    """What ``check_rows`` found wrong with a row, and the first seq it
    makes bad: a gap's missing seq, otherwise the row's own."""

    problem: str
    first_bad: int


AnyRow = TypeVar("AnyRow", bound=Row)


def _as_written(row: Row) -> bool:
    """Whether every column holds the kind of value the log writes: a number
    rewritten as 1.5, or text as a blob, must not pass for the 1 it truncates
    to or the text it spells (``row_hash`` would take either)."""
    seq, event_id, type_, stream, sv, occurred, recorded, actor, schema, payload, prev, _ = row
    return (
        type(seq) is int
        and type(sv) is int
        and type(schema) is int
        and type(event_id) is str
        and type(type_) is str
        and type(stream) is str
        and type(occurred) is str
        and type(recorded) is str
        and type(actor) is str
        and type(payload) is str
        and type(prev) is str
    )


def _stored_hash(row: Row) -> str | None:
    """``row_hash`` of a row as written, the one definition the append used;
    None for a row no append could have written."""
    if not _as_written(row):
        return None
    try:
        return row_hash(row)
    except (TypeError, ValueError):  # a lone surrogate, an integer past 64 bits: nothing an append wrote
        return None


def check_rows(
    rows: Iterable[AnyRow], *, prev_seq: int, prev_hash: str | None, prev_time: str | None
) -> Iterator[tuple[AnyRow, Damage | None]]:
    """Walk rows in seq order; yield each row with the damage found, if any.

    Shared by every backend so that "what counts as damage" is defined once.
    ``prev_hash=None`` skips the first link (a range checked on its own,
    whose link to the range before is checked by the caller).
    """
    for row in rows:
        seq, recorded, prev, stored = row[0], row[6], row[10], row[11]
        problem: str | None = None
        first_bad = seq
        if seq != prev_seq + 1:
            if seq > prev_seq + 1:
                problem = f"gap: seq {prev_seq + 1} is missing (seq {seq} follows seq {prev_seq})"
                first_bad = prev_seq + 1
            else:
                problem = f"reordering: seq {seq} appears after seq {prev_seq}"
        else:
            digest = _stored_hash(row)
            if digest != stored:
                problem = "hash mismatch: the stored hash does not match the event's content"
            elif prev_hash is not None and prev != prev_hash:
                problem = f"broken link: prev_hash does not match the hash of seq {prev_seq}"
            elif prev_time is not None and recorded < prev_time:
                problem = f"reordering: recorded_at {recorded} is earlier than seq {prev_seq}'s {prev_time}"
        if problem is not None:
            yield row, Damage(problem, first_bad)
            return
        yield row, None
        prev_seq, prev_hash, prev_time = seq, stored, recorded


class EventLog(Protocol):
    """What every log backend offers (the engine reads the log through this)."""

    def append(self, events: Iterable[Event], expected_version: int | dict[str, int] | None = None) -> list[int]: ...

    def read(
        self,
        after_seq: int = 0,
        until_seq: int | None = None,
        until_time: str | None = None,
        *,
        types: Sequence[str] | None = None,
        streams: Sequence[str] | None = None,
    ) -> Iterator[RecordedEvent]: ...

    def context_events(self, until_seq: int | None = None) -> Iterator[RecordedEvent]: ...

    def memories_events(
        self, keys: Sequence[tuple[str, str]], *, until_seq: int | None = None
    ) -> Iterator[RecordedEvent]: ...

    def memory_events(
        self, tenant: str, memory_id: str, *, until_seq: int | None = None, types: Sequence[str] | None = None
    ) -> Iterator[RecordedEvent]: ...

    def head(self) -> Head: ...

    def get(self, seq: int) -> RecordedEvent | None: ...

    def by_event_id(self, event_id: str) -> RecordedEvent | None: ...

    def seq_at(self, when: str) -> int: ...

    def tail(self, n: int) -> list[RecordedEvent]: ...

    def verify_chain(self, from_seq: int = 1, to_seq: int | None = None) -> ChainReport: ...


def chain_end(head_seq: int, last: Head, checked: int, *, end: int, issued: int, whole: bool) -> ChainReport:
    """How a chain check that found no damage in its rows ends, on every
    backend: the rows must reach ``end``, and a check of the whole log must
    reach every seq the log has issued (rows gone from its end are a truncation)."""
    if last.seq != end:
        return ChainReport(False, head_seq, last.hash, checked, last.seq + 1, f"gap: seq {last.seq + 1} is missing")
    if whole and issued > last.seq:
        return ChainReport(
            False,
            last.seq,
            last.hash,
            checked,
            last.seq + 1,
            f"truncated: {issued} events were appended but the log ends at seq {last.seq}",
        )
    return ChainReport(True, last.seq, last.hash, checked)


def imported_tail(
    records: Sequence[RecordedEvent], head: Head, held: Callable[[list[int]], Mapping[int, str]]
) -> list[RecordedEvent]:
    """The events of an import the log does not hold yet, on every backend:
    those it holds (``held`` answers their hashes by seq) must be the very
    same, and the first new one must continue the log's head."""
    known = held([r.seq for r in records if r.seq <= head.seq])
    new: list[RecordedEvent] = []
    for record in records:
        if record.seq <= head.seq:
            if known.get(record.seq) != record.hash:
                raise LogDiverged(record.seq, "the import disagrees with the event the log holds at this seq")
            continue
        expected_prev = new[-1].hash if new else head.hash
        expected_seq = (new[-1].seq if new else head.seq) + 1
        if record.seq != expected_seq or record.prev_hash != expected_prev:
            raise LogDiverged(record.seq, f"does not continue the log's head (seq {expected_seq - 1})")
        new.append(record)
    return new
