"""Turning new event models into chained rows: shared by every backend."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._bytes import check_payload
from ._canonical import canonical_json, chain_hash, preimage_bytes
from ._errors import EventIdReused, LogDamaged, VersionConflict
from ._recorded import Head, RecordedEvent
from ._time import CLOCK_SKEW, Clock, format_ts, parse_ts

if TYPE_CHECKING:
    from ._models import Event

# (seq, type, stream, payload_json) of an event already in the log
Existing = tuple[int, str, str, str]
# (event ids, streams) -> (those ids the log holds, each stream's last version);
# one callable, so a backend across a network answers both in one round trip
Lookup = Callable[[list[str], list[str]], tuple[dict[str, Existing], dict[str, int]]]


@dataclass
class PreparedBatch:
    """What an append will write, and the seq every input event maps to."""

    records: list[RecordedEvent] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    head: Head | None = None


def prepare_batch(
    events: Iterable[Event],
    *,
    head: Head,
    clock: Clock,
    lookup: Lookup,
    expected_version: int | dict[str, int] | None,
    emit: Callable[[RecordedEvent], None] | None = None,
) -> PreparedBatch:
    """Chain ``events`` onto ``head``. ``emit``, if given, gets each new
    record as soon as it is chained (a backend streams it to its server
    while the next ones are hashed); on an error the caller discards what
    it was sent, as the whole batch fails."""
    from ._models import Event  # with the first append: a store that is only read never loads the models

    events = list(events)
    if not events:
        return PreparedBatch(head=head)
    for event in events:
        if not isinstance(event, Event):
            raise TypeError(f"append takes event models, not {type(event).__name__}")

    expected = _expected_by_stream(events, expected_version)
    streams = [e.stream for e in events]  # a property: read once
    existing, versions = lookup([e.event_id for e in events], list(dict.fromkeys(streams)))
    now = format_ts(clock.now())
    # recorded_at never goes backwards, so the log can be cut by time with a
    # binary search on seq, and a clock step back cannot reorder history.
    recorded_at = max(now, head.recorded_at) if head.recorded_at else now

    batch = PreparedBatch()
    records, positions = batch.records, batch.positions
    in_batch: dict[str, RecordedEvent] = {}
    seq, prev_hash = head.seq, head.hash
    for event, stream in zip(events, streams, strict=True):
        event_id, type_, actor, schema_version = event.event_id, event.type, event.actor, event.SCHEMA_VERSION
        payload = event.payload()
        payload_json = canonical_json(payload, floats=event.FLOATS)
        check_payload(payload, payload_json)
        if event_id in existing or event_id in in_batch:
            known = existing.get(event_id) or _existing_of(in_batch[event_id])
            if (known[1], known[2], known[3]) != (type_, stream, payload_json):
                raise EventIdReused(event_id, known[0])
            positions.append(known[0])
            continue
        if stream in expected:
            if expected.pop(stream) != versions.get(stream, 0):
                raise VersionConflict(stream, expected_version_of(expected_version, stream), versions.get(stream, 0))
        version = versions[stream] = versions.get(stream, 0) + 1
        seq += 1
        occurred_at = format_ts(event.occurred_at) if event.occurred_at else recorded_at
        preimage = preimage_bytes(
            seq,
            event_id,
            type_,
            stream,
            version,
            occurred_at,
            recorded_at,
            actor,
            schema_version,
            payload_json,
            prev_hash,
        )
        hash_ = chain_hash(prev_hash, preimage)
        record = in_batch[event_id] = RecordedEvent(
            seq,
            event_id,
            type_,
            stream,
            version,
            occurred_at,
            recorded_at,
            actor,
            schema_version,
            payload,
            prev_hash,
            hash_,
            payload_json,
        )
        records.append(record)
        if emit is not None:
            emit(record)
        positions.append(seq)
        prev_hash = hash_
    batch.head = Head(seq, prev_hash, recorded_at if batch.records else head.recorded_at)
    return batch


def check_imported(records: Sequence[RecordedEvent], clock: Clock) -> None:
    """What an import's events may not claim about time, judged as a live
    append is (every backend's ``append_recorded`` asks): none recorded
    later than now (the clock skew allowed), no fetch recorded later than
    its recording plus that skew (within it the view clamps the fetch to
    the recording moment, as a live save does)."""
    latest = format_ts(clock.now() + CLOCK_SKEW)
    for record in records:
        check_payload(record.payload, record.payload_json)
        if record.recorded_at > latest:
            raise LogDamaged(
                f"event seq {record.seq}: recorded_at {record.recorded_at} is in the future", seq=record.seq
            )
        if record.type in ("memory.saved", "memory.verified"):
            fetched = record.payload.get("fetched_at")
            if isinstance(fetched, str) and fetched > format_ts(parse_ts(record.recorded_at) + CLOCK_SKEW):
                raise LogDamaged(
                    f"event seq {record.seq}: fetched_at {fetched} is after the event was recorded "
                    f"({record.recorded_at})",
                    seq=record.seq,
                )


def _existing_of(record: RecordedEvent) -> Existing:
    return (record.seq, record.type, record.stream, record.payload_json)


def expected_version_of(expected_version: int | dict[str, int] | None, stream: str) -> int:
    if isinstance(expected_version, dict):
        return expected_version[stream]
    return int(expected_version or 0)


def _expected_by_stream(events: list[Event], expected_version: int | dict[str, int] | None) -> dict[str, int]:
    if expected_version is None:
        return {}
    if isinstance(expected_version, dict):
        return dict(expected_version)
    streams = {e.stream for e in events}
    if len(streams) != 1:
        raise ValueError(
            "expected_version: a single number applies to one stream, but the batch spans "
            f"{len(streams)}; pass a mapping of stream to version"
        )
    return {streams.pop(): int(expected_version)}


class PublishingWrite:
    """What every backend's write transaction does once an append's rows
    are in: its subscribers (the projections) see the records on the
    transaction's connection, then its reactors may append what those
    events imply, in this same transaction. An import brings those
    consequences with it, so it does not react."""

    conn: Any
    log: Any  # its ``subscribers`` and ``reactors``
    recorded: list[RecordedEvent]

    def _publish(self, records: list[RecordedEvent], *, react: bool = True) -> None:
        self.recorded.extend(records)
        for subscriber in self.log.subscribers:
            subscriber(self.conn, records)
        if react:
            for reactor in self.log.reactors:
                reactor(self, records)
