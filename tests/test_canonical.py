from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memwarden.events import canonical_json, canonical_ts, format_ts, parse_ts
from memwarden.events._canonical import chain_hash, preimage_bytes

KST = timezone(timedelta(hours=9))


def definition(
    *,
    seq: int,
    event_id: str,
    type: str,
    stream: str,
    stream_version: int,
    occurred_at: str,
    recorded_at: str,
    actor: str,
    schema_version: int,
    payload_json: str,
    prev_hash: str,
) -> bytes:
    """What a chain hash covers, by definition: ``canonical_json`` of the
    envelope without its hash, the payload standing in it as the value its
    stored text encodes. ``preimage_bytes``, the library's one spelling, is
    held to it here."""
    return canonical_json(
        {
            "actor": actor,
            "event_id": event_id,
            "occurred_at": occurred_at,
            "payload": json.loads(payload_json),
            "prev_hash": prev_hash,
            "recorded_at": recorded_at,
            "schema_version": schema_version,
            "seq": seq,
            "stream": stream,
            "stream_version": stream_version,
            "type": type,
        }
    ).encode("utf-8")


def test_sorted_compact_utf8() -> None:
    text = canonical_json({"b": 1, "a": {"z": "서울", "y": [1, 2]}})
    assert text == '{"a":{"y":[1,2],"z":"서울"},"b":1}'
    assert "서울".encode() in text.encode("utf-8")  # raw UTF-8, no \\u escapes


def test_timestamps_are_fixed_width_utc_z() -> None:
    assert canonical_json({"t": datetime(2026, 1, 5, 18, 0, tzinfo=KST)}) == '{"t":"2026-01-05T09:00:00.000000Z"}'
    assert format_ts(datetime(2026, 1, 5, 9, 0, 0, 123, tzinfo=UTC)) == "2026-01-05T09:00:00.000123Z"
    assert canonical_ts("2026-01-05T18:00:00+09:00") == "2026-01-05T09:00:00.000000Z"


@given(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.timezones()).filter(
        lambda d: d.utcoffset() is not None
    )
)
def test_timestamp_text_is_isoformat_in_utc(value: datetime) -> None:
    utc = value.astimezone(UTC)
    assert format_ts(value) == utc.isoformat(timespec="microseconds").replace("+00:00", "Z")
    assert parse_ts(format_ts(value)) == utc


def test_naive_timestamps_refused() -> None:
    with pytest.raises(ValueError, match="no timezone"):
        parse_ts("2026-01-05T09:00:00")
    with pytest.raises(ValueError, match="naive"):
        format_ts(datetime(2026, 1, 5))


@given(st.text())
def test_any_unicode_text_round_trips_byte_exact(text: str) -> None:
    try:
        encoded = canonical_json({"text": text}).encode("utf-8")
    except UnicodeEncodeError:
        return  # lone surrogates are not text; the encoder refuses them
    assert json.loads(encoded.decode("utf-8"))["text"] == text


@given(
    st.text(min_size=1),
    st.text(min_size=1),
    st.text(min_size=1),
    st.text(min_size=1),
    st.integers(1, 10**9),
    st.integers(1, 10**6),
    st.dictionaries(st.text(), st.one_of(st.text(), st.integers(), st.none(), st.booleans()), max_size=5),
)
def test_the_preimage_is_the_definition(
    event_id: str, type_: str, stream: str, actor: str, seq: int, sv: int, payload: dict
) -> None:
    envelope = {
        "seq": seq,
        "event_id": event_id,
        "type": type_,
        "stream": stream,
        "stream_version": sv,
        "occurred_at": "2026-01-05T09:00:00.000000Z",
        "recorded_at": "2026-01-05T09:00:01.000000Z",
        "actor": actor,
        "schema_version": 1,
        "payload": payload,
        "prev_hash": "0" * 64,
    }
    try:
        expected = canonical_json(envelope).encode("utf-8")
    except UnicodeEncodeError:
        return
    got = definition(
        seq=seq,
        event_id=event_id,
        type=type_,
        stream=stream,
        stream_version=sv,
        occurred_at=envelope["occurred_at"],
        recorded_at=envelope["recorded_at"],
        actor=actor,
        schema_version=1,
        payload_json=canonical_json(payload),
        prev_hash="0" * 64,
    )
    assert got == expected
    # the one spelling the append and the audit hash writes the same bytes
    spelled = preimage_bytes(
        seq,
        event_id,
        type_,
        stream,
        sv,
        envelope["occurred_at"],
        envelope["recorded_at"],
        actor,
        1,
        canonical_json(payload),
        "0" * 64,
    )
    assert spelled == expected


@given(
    st.text(min_size=1), st.text(min_size=1), st.integers(1, 10**6), st.dictionaries(st.text(), st.text(), max_size=4)
)
def test_the_verify_loop_hashes_exactly_like_append(event_id: str, stream: str, seq: int, payload: dict) -> None:
    from memwarden.events._recorded import check_rows, row_hash

    try:
        payload_json = canonical_json(payload)
        (event_id + stream).encode("utf-8")
    except UnicodeEncodeError:
        return
    prev = "ab" * 32
    row = (
        seq,
        event_id,
        "memory.saved",
        stream,
        1,
        "2026-01-05T09:00:00.000000Z",
        "2026-01-05T09:00:00.000000Z",
        "agent",
        1,
        payload_json,
        prev,
        "",
    )
    expected = chain_hash(
        prev,
        definition(
            seq=seq,
            event_id=event_id,
            type="memory.saved",
            stream=stream,
            stream_version=1,
            occurred_at=row[5],
            recorded_at=row[6],
            actor="agent",
            schema_version=1,
            payload_json=payload_json,
            prev_hash=prev,
        ),
    )
    good = (*row[:11], expected)
    assert row_hash(good) == expected
    assert [p for _, p in check_rows([good], prev_seq=seq - 1, prev_hash=prev, prev_time=None)] == [None]


# -- orjson writes float-free data; json's settings define the bytes ---------

_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),  # past 64 bits orjson refuses: json decides
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-1e-3, max_value=1e-3),  # where the two spell floats differently
    st.text(),
    st.sampled_from(["1e-5", "0.00001", "null", "2026-01-05T09:00:00.000000Z", "evidence-3", "x1e-7y"]),
)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=6), inner, max_size=4),
    ),
    max_leaves=12,
)


def _reference(value: object) -> str:
    """json's own encoder with the canonical settings: the definition."""
    from memwarden.events._canonical import _ENCODER

    return _ENCODER.encode(value)


def _outcome(encode: object, value: object) -> tuple[str, str]:
    try:
        return ("ok", encode(value))  # type: ignore[operator]
    except (TypeError, ValueError) as exc:  # the same refusal, whichever path
        return ("refused", type(exc).__name__)


@settings(max_examples=500)
@given(_json_values)
def test_the_fast_encoder_writes_what_json_defines(value: object) -> None:
    assert _outcome(canonical_json, value) == _outcome(_reference, value)


@given(_json_values)
def test_floats_false_is_exact_for_data_without_floats(value: object) -> None:
    def has_float(v: object) -> bool:
        if isinstance(v, float):
            return True
        if isinstance(v, dict):
            return any(has_float(x) for x in v.values())
        if isinstance(v, (list, tuple)):
            return any(has_float(x) for x in v)
        return False

    if has_float(value):
        return
    assert _outcome(lambda v: canonical_json(v, floats=False), value) == _outcome(_reference, value)


def test_floats_json_spells_otherwise_take_the_slow_path() -> None:
    cases = [1e-5, -1.234e-5, 1.5e-7, 2.5e-9, 1e-10, 0.5, 1e16, 123.0, [1e-6, "0.00001"], {"t": 0.0001}]
    for value in cases:
        assert canonical_json(value) == _reference(value)
    for value in (float("nan"), float("inf"), {"x": [float("-inf")]}):
        assert _outcome(canonical_json, value) == ("refused", "ValueError")


def test_every_code_point_is_escaped_as_json_escapes_it() -> None:
    from json.encoder import encode_basestring

    import orjson

    # the envelope preimage relies on it: one string per code point but the surrogates
    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    assert orjson.dumps(text).decode("utf-8") == encode_basestring(text)
    for c in range(0x80):
        assert orjson.dumps(chr(c)).decode("utf-8") == encode_basestring(chr(c))


def test_datetimes_models_enums_and_uuids_encode_alike() -> None:
    import enum
    import uuid

    from memwarden.events import Scope

    class Colour(enum.Enum):
        RED = "red"

    value = {
        "at": datetime(2026, 1, 5, 18, 0, tzinfo=KST),
        "scope": Scope(tenant="서울", project="p"),
        "colour": Colour.RED,
        "id": uuid.UUID(int=7),
        "set": frozenset({"b", "a"}),
    }
    assert canonical_json(value) == _reference(value)
    assert '"at":"2026-01-05T09:00:00.000000Z"' in canonical_json(value)


def test_only_readback_events_may_hold_floats() -> None:
    from typing import Any, Literal

    from memwarden.events._models import EVENT_TYPES, holds_float

    assert {t for t, cls in EVENT_TYPES.items() if cls.FLOATS} == {
        "readback.confirmed",
        "readback.failed",
        "sink.readback_recorded",
    }
    assert holds_float(float) and holds_float(int | float) and holds_float(dict[str, Any])
    assert holds_float(Literal["a", 0.5]) and not holds_float(Literal[0, "a"])
    assert not holds_float(tuple[str, ...]) and not holds_float(datetime | None)


def test_the_preimage_and_its_hash_are_what_stores_hold() -> None:
    """The bytes every store's chain was hashed over: a hash recorded by
    the code before this spelling was the only one, which must not move."""
    fields = dict(
        seq=7,
        event_id='ev_서울\n"x"\u2028\x7f',
        type="memory.saved",
        stream="m1",
        stream_version=2,
        occurred_at="2026-01-05T09:00:00.000000Z",
        recorded_at="2026-01-05T09:00:00.000000Z",
        actor="에이전트",
        schema_version=1,
        payload_json='{"a":"\\u0001","b":[1,null,true],"c":"서울"}',
        prev_hash="ab" * 32,
    )
    spelled = preimage_bytes(*fields.values())
    assert spelled == definition(**fields)
    assert spelled.startswith('{"actor":"에이전트","event_id":"ev_서울\\n\\"x\\"\u2028\x7f",'.encode())
    assert chain_hash("ab" * 32, spelled) == "a49382f6a6d88c46910d0f44b3d4597367b9c4d03797c7c322f135b4ac1215d6"


@pytest.mark.parametrize(
    ("field", "value"),
    [(1, "ev_\ud800"), (7, "agent\udfff"), (0, 2**64), (4, -(2**63) - 1)],
    ids=["surrogate event_id", "surrogate actor", "seq past 64 bits", "version below -2**63"],
)
def test_what_no_append_writes_is_refused_not_hashed_otherwise(field: int, value: object) -> None:
    row: list[object] = [7, "ev", "memory.saved", "m1", 1, "t", "t", "agent", 1, "{}", "ab" * 32]
    row[field] = value
    with pytest.raises(ValueError, match="cannot be hashed"):
        preimage_bytes(*row)
