"""A query's ``where`` (conditions on the content read as JSON, LangGraph's
filter language) and ``id_prefix``, decided in the query's own statement on
both backends: what matches, that ``limit`` and ``offset`` count only what
passes, and what is refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from memwarden.engine import OPERATOR, InvalidInput, Warden

from .backends import Backend

DOCS: dict[str, Any] = {
    "a": {
        "status": "active",
        "score": 5,
        "meta": {"lang": "ko", "팀": "플랫폼"},
        "tags": ["x", "y"],
        "access-level": "public",
        "123abc": "ok",
        "flag": True,
        "title": "O'Brien's",
    },
    "b": {"status": "draft", "score": 2.5, "meta": {"lang": "en"}, "tags": ["x"], "user": {"access-level": "nested"}},
    "c": {"status": "active", "score": 1, "meta": {"lang": "ko", "v": 2}, "none": None, "big": 10**30},
}


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory, backend: Backend) -> Iterator[Warden]:
    """One store for the module (a PostgreSQL database is slow to make):
    no test writes to it but the last, which revokes."""
    with Warden(backend.db(tmp_path_factory.mktemp("where"))) as warden:
        yield _filled(warden)


def _filled(warden: Warden) -> Warden:
    for key, value in DOCS.items():
        warden.save(
            memory_id=f"doc:{key}",
            kind="store_item",
            summary=key,
            content=json.dumps(value, ensure_ascii=False),
            source_url=f"https://example.org/{key}",
            scope={"tenant": "acme", "project": "p"},
            caller=OPERATOR,
        )
    # not JSON, and JSON that is no object: in no where's answer, and no failure
    for key, text in {"prose": "회의는 목요일", "list": '["active"]'}.items():
        warden.save(
            memory_id=f"doc:{key}",
            kind="store_item",
            summary=key,
            content=text,
            source_url=f"https://example.org/{key}",
            scope={"tenant": "acme", "project": "p"},
            caller=OPERATOR,
        )
    warden.save(
        memory_id="other:a",
        kind="store_item",
        summary="other",
        content=json.dumps({"status": "active"}),
        source_url="https://example.org/other",
        scope={"tenant": "acme", "project": "p"},
        caller=OPERATOR,
    )
    return warden


def found(w: Warden, **asked: Any) -> list[str]:
    return sorted(v.memory_id for v in w.query(tenant="acme", **asked, caller=OPERATOR))


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ({"status": "active"}, ["a", "c"]),
        ({"meta": {"lang": "ko"}}, ["a", "c"]),  # a nested object: each of its keys
        ({"meta": {"팀": "플랫폼"}}, ["a"]),
        ({"meta": {}}, ["a", "b", "c"]),  # an object there
        ({"tags": ["x", "y"]}, ["a"]),  # a list: as many items, each equal
        ({"tags": ["x"]}, ["b"]),
        ({"score": {"$gt": 2}}, ["a", "b"]),
        ({"score": {"$gte": 2.5}}, ["a", "b"]),
        ({"score": {"$lt": 2.5}}, ["c"]),
        ({"score": {"$lte": 2.5}}, ["b", "c"]),
        ({"score": {"$gt": 1, "$lt": 5}}, ["b"]),
        ({"status": {"$ne": "active"}}, ["b"]),  # nothing there is not equal either
        ({"status": {"$eq": "draft"}}, ["b"]),
        ({"status": {"$gt": "b"}}, ["b"]),  # strings by code point
        ({"access-level": "public"}, ["a"]),  # hyphens and leading digits name keys as written
        ({"123abc": "ok"}, ["a"]),
        ({"user.access-level": "nested"}, ["b"]),  # a dotted key is a path
        ({"flag": True}, ["a"]),
        ({"flag": 1}, ["a"]),  # Python's ==, as LangGraph's InMemoryStore compares
        ({"none": None}, ["a", "b", "c"]),  # null, or nothing there
        ({"score": {"$lt": float("inf")}}, ["a", "b", "c"]),
        ({"score": {"$gt": float("-inf")}}, ["a", "b", "c"]),
        ({"score": {"$eq": float("nan")}}, []),
        ({"score": {"$ne": float("nan")}}, ["a", "b", "c"]),
        ({"score": {"$lt": 10**100}}, ["a", "b", "c"]),
        ({"big": 10**30}, ["c"]),
        ({"meta": {"$eq": {"lang": "en"}}}, ["b"]),
        ({"status": "public' OR '1'='1"}, []),  # a value is a value
        ({"status": "active\x00' OR '1'='1"}, []),
        ({"title": "O'Brien's"}, ["a"]),
        ({"missing": "x"}, []),
    ],
)
def test_where_matches_the_content_as_json(docs: Warden, where: dict[str, Any], expected: list[str]) -> None:
    assert found(docs, where=where, id_prefix="doc:") == [f"doc:{k}" for k in expected]


def test_limit_and_offset_count_only_what_passes(docs: Warden) -> None:
    # newest first: c, then a; the page is cut in the statement, after the where
    first = [v.memory_id for v in docs.query(tenant="acme", where={"status": "active"}, limit=1, caller=OPERATOR)]
    second = docs.query(tenant="acme", where={"status": "active"}, limit=1, offset=1, caller=OPERATOR)
    third = docs.query(tenant="acme", where={"status": "active"}, limit=1, offset=2, caller=OPERATOR)
    assert first == ["other:a"] and [v.memory_id for v in second] == ["doc:c"] and len(third) == 1
    assert found(docs, where={"status": "active"}, id_prefix="doc:", limit=5, offset=1) == ["doc:a"]


def test_id_prefix_keeps_the_ids_that_start_with_one(docs: Warden) -> None:
    assert found(docs, id_prefix="other:") == ["other:a"]
    assert found(docs, id_prefix=["other:", "doc:p"]) == ["doc:prose", "other:a"]
    assert found(docs, id_prefix="doc:zzz") == []


@pytest.mark.parametrize(
    ("where", "problem"),
    [
        (["status"], "object of conditions"),
        ({"": 1}, "non-empty"),
        ({"a..b": 1}, "empty part"),
        ({'a"b': 1}, "quote"),
        ({"a\nb": 1}, "control"),
        ({"score": {"$regex": "x"}}, "unsupported operator"),
        ({"score": {"$gt": None}}, "number or a string"),
        ({"score": {"$gt": [1]}}, "number or a string"),
        ({"meta": {"$eq": {"x": float("nan")}}}, "JSON does not"),
        ({"status": object()}, "a value, a list or an object"),
        ({f"k{i}": i for i in range(65)}, "more than 64"),
        ({"x." * 20 + "y": 1}, "deeper"),
    ],
)
def test_a_where_it_cannot_read_is_refused_naming_it(docs: Warden, where: Any, problem: str) -> None:
    head = docs.head_seq()
    with pytest.raises(InvalidInput, match=problem) as refused:
        docs.query(tenant="acme", where=where, caller=OPERATOR)
    assert refused.value.field == "where" and docs.head_seq() == head


@pytest.mark.parametrize("id_prefix", ["", [], ["a"] * 17, "x" * 513])
def test_an_id_prefix_it_cannot_read_is_refused(docs: Warden, id_prefix: Any) -> None:
    with pytest.raises(InvalidInput, match="id_prefix"):
        docs.query(tenant="acme", id_prefix=id_prefix, caller=OPERATOR)


def test_the_gate_still_decides(docs: Warden) -> None:
    docs.revoke({"ids": ["doc:a"]}, reason="leak", caller=OPERATOR)
    assert found(docs, where={"status": "active"}, id_prefix="doc:") == ["doc:c"]
