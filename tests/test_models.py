from __future__ import annotations

from datetime import datetime

import pytest
from memwarden.events import (
    EVENT_ADAPTER,
    EVENT_TYPES,
    EventRowDamaged,
    MemoryExpired,
    RevocationIssued,
    Selector,
    version_key,
    version_number,
    version_value,
)
from memwarden.events._recorded import event_from_row
from memwarden.events._upcasting import _UPCASTERS, upcast
from pydantic import ValidationError

from .conftest import saved

DESIGN_TYPES = {
    "memory.saved",
    "memory.verified",
    "memory.verification_failed",
    "memory.expired",
    "memory.invalidated",
    "memory.erased",
    "memory.integrity_failed",
    "memory.resynced",
    "memory.reembedded",
    "policy.version_changed",
    "revocation.issued",
    "readback.confirmed",
    "readback.failed",
    "sink.readback_recorded",
}


def test_every_design_event_type_has_a_model() -> None:
    assert set(EVENT_TYPES) == DESIGN_TYPES
    for cls in EVENT_TYPES.values():
        assert cls.model_config["frozen"] and cls.model_config["extra"] == "forbid"
        assert cls.__name__[0].isupper() and cls.SCHEMA_VERSION >= 1


def test_frozen_and_keyword_only() -> None:
    event = saved(1)
    with pytest.raises(ValidationError):
        event.summary = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        MemoryExpired("m1", 1)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("content_checksum", "sha256:ABC", "pattern"),
        ("content_checksum", "md5:" + "0" * 64, "pattern"),
        ("memory_id", "", "at least 1"),
        ("fetched_at", datetime(2026, 1, 5), "naive"),
        ("fetched_at", "2026-01-05T09:00:00", "no timezone"),
        ("version", "1", "valid integer"),
        ("surprise", 1, "Extra inputs"),
    ],
)
def test_strict_fields(field: str, value: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        saved(1, **{field: value})


def test_a_payload_holds_no_envelope_field() -> None:
    from datetime import UTC

    from memwarden.events._models import ENVELOPE_FIELDS

    for occurred_at in (None, datetime(2026, 1, 5, 9, tzinfo=UTC)):
        event = saved(1).model_copy(update={"occurred_at": occurred_at, "actor": "에이전트"})
        payload = event.payload()
        assert not ENVELOPE_FIELDS & payload.keys()
        assert payload["memory_id"] == "m1" and payload["fetched_at"].endswith("Z")


def test_discriminated_union_on_type() -> None:
    event = saved(1)
    data = {"type": "memory.saved", **event.payload(), "event_id": event.event_id}
    parsed = EVENT_ADAPTER.validate_python(data)
    assert type(parsed) is type(event) and parsed.payload() == event.payload()
    with pytest.raises(ValidationError):
        EVENT_ADAPTER.validate_python({**data, "type": "memory.nonsense"})


def test_offsets_become_utc() -> None:
    event = MemoryExpired(tenant="acme", memory_id="m", version=1, expires_at="2026-01-05T18:00:00+09:00")
    assert event.payload()["expires_at"] == "2026-01-05T09:00:00.000000Z"


def test_empty_selector_refused() -> None:
    with pytest.raises(ValidationError, match="empty selector"):
        Selector()
    with pytest.raises(ValidationError, match="everything"):
        Selector(everything=True, tenant="a")
    assert Selector(everything=True).everything


def test_revocation_stream_is_its_id() -> None:
    event = RevocationIssued(
        revocation_id="rev_1",
        selector=Selector(tenant="t"),
        reason="r",
        issued_by="sec",
        effective_at="2026-01-05T09:00:00Z",
    )
    assert event.stream == "rev_1"


def test_old_schema_versions_are_upcast_on_read_never_rewritten() -> None:
    # schema 1 memory events had no tenant: the reader gives them their
    # memory's (from the stream's first save), and never rewrites the row
    row = (
        1,
        "e1",
        "memory.expired",
        "m1",
        1,
        "t",
        "t",
        "a",
        1,
        '{"expires_at":"2026-01-05T09:00:00.000000Z","memory_id":"m1","version":1}',
        "0" * 64,
        "h",
    )
    record = event_from_row(row, lambda stream: {"m1": "acme"}.get(stream))
    assert record.payload["tenant"] == "acme"
    assert record.schema_version == 1  # the stored version is reported as written
    assert record.payload_json == row[9]
    with pytest.raises(EventRowDamaged, match="no first save"):
        event_from_row(row)  # a schema-1 memory event whose memory has no save
    with pytest.raises(ValueError, match="no upcaster"):
        upcast("memory.expired", 0, {})
    assert ("memory.saved", 1) in _UPCASTERS


@pytest.mark.parametrize(
    ("text", "number"),
    [("7", 7), ("007", 7), (str(2**53), 2**53), (str(2**53 + 1), None), ("٣", None), (" 3", None), ("2_0", None)]
    + [("policy-42-v7", None), ("", None), ("9" * 5000, None)],
)
def test_one_reading_of_a_numbered_version(text: str, number: int | None) -> None:
    """Every reader (the models, the rules of an append, the CLI, stored
    keys) asks version_number whether a version is a number."""
    assert version_number(text) == number
    if number is not None:
        assert version_value(version_key(number)) == number  # a stored number comes back a number
    assert version_value("007") == "007"  # a key that is not a number's own spelling stays text
