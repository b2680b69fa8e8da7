from __future__ import annotations

import pytest
from memwarden.engine import OPERATOR, InvalidInput, StaleView, Warden, search_words
from memwarden.events import FrozenClock

from .conftest import Cli, save_memory


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, ["c", "b", "a"]),
        ({"project": "p1"}, ["c", "a"]),
        ({"permission": "calendar"}, ["a"]),
        ({"user": "lee"}, ["b"]),
        ({"agent": "planner"}, ["a"]),
        ({"tool": "sheets"}, ["c"]),
        ({"kind": "research_result"}, ["b"]),
        ({"text": "서울"}, ["a"]),  # a Korean stem finds "서울에서"
        ({"text": "ktx"}, ["b"]),  # content is indexed too, case-insensitively
        ({"text": "budget quarterly"}, ["c"]),
        ({"text": "nothing-like-this"}, []),
    ],
)
def test_filters(scoped: Warden, filters: dict, expected: list[str]) -> None:
    assert [v.memory_id for v in scoped.query(tenant="acme", **filters, caller=OPERATOR)] == expected


def test_tenants_never_mix(scoped: Warden) -> None:
    assert [v.memory_id for v in scoped.query(tenant="globex", text="서울", caller=OPERATOR)] == ["x"]
    assert [v.memory_id for v in scoped.query(tenant="nobody", caller=OPERATOR)] == []


def test_all_shows_every_memory_and_why(scoped: Warden, clock: FrozenClock) -> None:
    clock.advance("2h")  # research results live 1h
    scoped.revoke({"ids": ["a"]}, reason="r", caller=OPERATOR)
    views = {
        v.memory_id: (v.usable, v.reason, v.action)
        for v in scoped.query(tenant="acme", include_unusable=True, caller=OPERATOR)
    }
    assert views == {
        "a": (False, "revoked", "treat_as_unknown"),
        "b": (False, "expired", "reverify"),
        "c": (True, None, "none"),
    }
    assert [v.memory_id for v in scoped.query(tenant="acme", caller=OPERATOR)] == ["c"]


def test_limit_and_content(scoped: Warden) -> None:
    assert [v.memory_id for v in scoped.query(tenant="acme", limit=2, caller=OPERATOR)] == ["c", "b"]
    assert scoped.query(tenant="acme", limit=1, with_content=False, caller=OPERATOR)[0].content is None
    assert scoped.query(tenant="acme", kind="research_result", caller=OPERATOR)[0].content == "KTX 08:00 출발"
    with pytest.raises(InvalidInput, match="limit"):
        scoped.query(tenant="acme", limit=0, caller=OPERATOR)
    with pytest.raises(InvalidInput, match="tenant"):
        scoped.query(tenant="", caller=OPERATOR)


def test_min_seq_consistency_token(scoped: Warden) -> None:
    head = scoped.log.head().seq
    assert len(scoped.query(tenant="acme", min_seq=head, caller=OPERATOR)) == 3
    assert scoped.get("a", min_seq=head, caller=OPERATOR).usable
    with pytest.raises(StaleView, match=f"view is at seq {head}, the caller needs at least seq {head + 5}"):
        list(scoped.query(tenant="acme", min_seq=head + 5, caller=OPERATOR))


def test_text_queries_are_quoted(scoped: Warden, run_cli: Cli) -> None:
    assert search_words('서울 "x') == ["서울", '"x']
    assert scoped.query(tenant="acme", text='AND OR NOT "(', caller=OPERATOR) == []
    with pytest.raises(InvalidInput, match="text"):
        scoped.query(tenant="acme", text="   ", caller=OPERATOR)
    assert run_cli("query", "--tenant", "acme", "--text", " ").exit_code == 2
    assert run_cli("query", "--tenant", "acme", "--limit", "0").exit_code == 2


def test_status_and_offset_page_through_a_listing(scoped: Warden) -> None:
    scoped.revoke({"ids": ["b"]}, reason="r", caller=OPERATOR)
    every = [v.memory_id for v in scoped.query(tenant="acme", include_unusable=True, caller=OPERATOR)]
    assert every == ["b", "c", "a"]  # newest change first: the revocation moved b up
    pages = [
        [
            v.memory_id
            for v in scoped.query(tenant="acme", include_unusable=True, limit=2, offset=offset, caller=OPERATOR)
        ]
        for offset in (0, 2, 4)
    ]
    assert pages == [every[:2], every[2:], []]
    assert [
        v.memory_id for v in scoped.query(tenant="acme", include_unusable=True, status="revoked", caller=OPERATOR)
    ] == ["b"]
    assert [v.memory_id for v in scoped.query(tenant="acme", status="revoked", caller=OPERATOR)] == []
    assert [v.memory_id for v in scoped.query(tenant="acme", text="서울", status="usable", caller=OPERATOR)] == ["a"]
    # usable answers only: the offset counts answers, not the rows the gate dropped
    assert [v.memory_id for v in scoped.query(tenant="acme", offset=1, caller=OPERATOR)] == ["a"]
    with pytest.raises(InvalidInput, match="status"):
        scoped.query(tenant="acme", status="gone", caller=OPERATOR)
    with pytest.raises(InvalidInput, match="offset"):
        scoped.query(tenant="acme", offset=-1, caller=OPERATOR)


def test_a_word_past_postgresqls_longest_is_kept_and_found_by_its_beginning(warden: Warden) -> None:
    """PostgreSQL refuses a word of more than 2,047 bytes in a text index;
    such a word is saved on both backends and found by its beginning."""
    long_english, long_korean = "x" * 3000, "가" * 1000  # 3,000 bytes each
    save_memory(warden, "long-en", content=f"start {long_english} end")
    save_memory(warden, "long-ko", content=f"시작 {long_korean} 끝")
    found = warden.query(tenant="acme", text="x" * 50, caller=OPERATOR)
    assert [v.memory_id for v in found] == ["long-en"]
    found = warden.query(tenant="acme", text="가" * 20, caller=OPERATOR)
    assert [v.memory_id for v in found] == ["long-ko"]
    # a search word that long is asked, not refused by the database
    assert [v.memory_id for v in warden.query(tenant="acme", text=long_korean, caller=OPERATOR)] == ["long-ko"]
    assert warden.get("long-en", caller=OPERATOR).content == f"start {long_english} end"
