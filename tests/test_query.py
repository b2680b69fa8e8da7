from __future__ import annotations

import pytest
from memwarden.engine import InvalidInput, StaleView, Warden, search_words
from memwarden.events import FrozenClock

from .conftest import Cli


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
    assert [v.memory_id for v in scoped.query(tenant="acme", **filters)] == expected


def test_tenants_never_mix(scoped: Warden) -> None:
    assert [v.memory_id for v in scoped.query(tenant="globex", text="서울")] == ["x"]
    assert [v.memory_id for v in scoped.query(tenant="nobody")] == []


def test_all_shows_every_memory_and_why(scoped: Warden, clock: FrozenClock) -> None:
    clock.advance("2h")  # research results live 1h
    scoped.revoke({"ids": ["a"]}, reason="r")
    views = {v.memory_id: (v.usable, v.reason, v.action) for v in scoped.query(tenant="acme", include_unusable=True)}
    assert views == {
        "a": (False, "revoked", "treat_as_unknown"),
        "b": (False, "expired", "reverify"),
        "c": (True, None, "none"),
    }
    assert [v.memory_id for v in scoped.query(tenant="acme")] == ["c"]


def test_limit_and_content(scoped: Warden) -> None:
    assert [v.memory_id for v in scoped.query(tenant="acme", limit=2)] == ["c", "b"]
    assert scoped.query(tenant="acme", limit=1, with_content=False)[0].content is None
    assert scoped.query(tenant="acme", kind="research_result")[0].content == "KTX 08:00 출발"
    with pytest.raises(InvalidInput, match="limit"):
        scoped.query(tenant="acme", limit=0)
    with pytest.raises(InvalidInput, match="tenant"):
        scoped.query(tenant="")


def test_min_seq_consistency_token(scoped: Warden) -> None:
    head = scoped.log.head().seq
    assert len(scoped.query(tenant="acme", min_seq=head)) == 3
    assert scoped.get("a", min_seq=head).usable
    with pytest.raises(StaleView, match=f"view is at seq {head}, the caller needs at least seq {head + 5}"):
        list(scoped.query(tenant="acme", min_seq=head + 5))


def test_text_queries_are_quoted(scoped: Warden, run_cli: Cli) -> None:
    assert search_words('서울 "x') == ["서울", '"x']
    assert scoped.query(tenant="acme", text='AND OR NOT "(') == []
    with pytest.raises(InvalidInput, match="text"):
        scoped.query(tenant="acme", text="   ")
    assert run_cli("query", "--tenant", "acme", "--text", " ").exit_code == 2
    assert run_cli("query", "--tenant", "acme", "--limit", "0").exit_code == 2


def test_status_and_offset_page_through_a_listing(scoped: Warden) -> None:
    scoped.revoke({"ids": ["b"]}, reason="r")
    every = [v.memory_id for v in scoped.query(tenant="acme", include_unusable=True)]
    assert every == ["b", "c", "a"]  # newest change first: the revocation moved b up
    pages = [
        [v.memory_id for v in scoped.query(tenant="acme", include_unusable=True, limit=2, offset=offset)]
        for offset in (0, 2, 4)
    ]
    assert pages == [every[:2], every[2:], []]
    assert [v.memory_id for v in scoped.query(tenant="acme", include_unusable=True, status="revoked")] == ["b"]
    assert [v.memory_id for v in scoped.query(tenant="acme", status="revoked")] == []
    assert [v.memory_id for v in scoped.query(tenant="acme", text="서울", status="usable")] == ["a"]
    # usable answers only: the offset counts answers, not the rows the gate dropped
    assert [v.memory_id for v in scoped.query(tenant="acme", offset=1)] == ["a"]
    with pytest.raises(InvalidInput, match="status"):
        scoped.query(tenant="acme", status="gone")
    with pytest.raises(InvalidInput, match="offset"):
        scoped.query(tenant="acme", offset=-1)
