"""Semantic recall: the index proposes, the gate decides (issue 40), on every backend."""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from memwarden.engine import OPERATOR, HashEmbedder, InvalidInput, Warden
from memwarden.events import FrozenClock

from ._exact import exact_top
from .backends import Backend
from .conftest import agent_key, save_memory


@pytest.fixture
def recall(db_path: Path, clock: FrozenClock) -> Iterator[Warden]:
    w = Warden(db_path, clock=clock, embedder=HashEmbedder())
    yield w
    w.close()


@pytest.fixture
def given(db_path: Path, clock: FrozenClock) -> Iterator[Warden]:
    """A Warden with no embedder: every vector comes with its save."""
    w = Warden(db_path, clock=clock)
    yield w
    w.close()


def ids(found: list) -> list[str]:
    return [f.view.memory_id for f in found]


def test_vector_search_equals_exact_search(given: Warden) -> None:
    rng = random.Random(40)
    vectors = {f"m{i:02}": [rng.gauss(0, 1) for _ in range(16)] for i in range(60)}
    for memory_id, vector in vectors.items():
        save_memory(given, memory_id, embedding=vector)
    for _ in range(10):
        q = np.array([rng.gauss(0, 1) for _ in range(16)], dtype=np.float32)
        exact = exact_top(vectors, q.tolist())
        found = given.search(tenant="acme", vector=q.tolist(), limit=10, mode="vector", caller=OPERATOR)
        assert ids(found) == exact
        assert all(f.found_by == ("vector",) for f in found)
        scores = [f.similarity for f in found]
        assert scores == sorted(scores, reverse=True)


def test_korean_and_english_by_meaning_of_their_words(recall: Warden) -> None:
    corpus = {
        "deploy": "Deploy approvals need two reviewers before production",
        "lunch": "The cafeteria menu for Friday lunch",
        "seoul": "서울에서 열린 분기 회의 기록",
        "baepo": "배포 승인은 검토자 두 명이 필요하다",
    }
    for memory_id, text in corpus.items():
        save_memory(recall, memory_id, summary=text, content=text)
    assert ids(recall.search(tenant="acme", query_text="approvals of a deploy", mode="vector", caller=OPERATOR))[0] == (
        "deploy"
    )
    assert ids(recall.search(tenant="acme", query_text="서울 회의", mode="vector", caller=OPERATOR))[0] == "seoul"
    assert ids(recall.search(tenant="acme", query_text="배포 승인", mode="vector", caller=OPERATOR))[0] == "baepo"
    both = recall.search(tenant="acme", query_text="배포 승인", caller=OPERATOR)
    assert both[0].view.memory_id == "baepo" and both[0].found_by == ("text", "vector")
    assert both[0].score == pytest.approx(2 / 61)
    assert all(f.view.usable for f in both)


def test_the_hash_embedder_is_deterministic_and_normalised() -> None:
    a, b = HashEmbedder().embed(["서울에서 회의", "서울에서 회의"])
    assert a == b and len(a) == 384 and math.isclose(sum(x * x for x in a), 1.0, rel_tol=1e-9)


def test_the_saved_event_names_the_embedder(recall: Warden) -> None:
    save_memory(recall, "a")
    event = [e for e in recall.log.read() if e.type == "memory.saved"][-1]
    assert event.payload["embedder"] == "memwarden-hash-v1/384" and event.payload["embedding_dims"] == 384
    save_memory(recall, "b", embedding=[0.5] * 384)
    event = [e for e in recall.log.read() if e.type == "memory.saved"][-1]
    assert event.payload["embedder"] == "caller"
    assert recall.audit_verify(caller=OPERATOR)["ok"]


def test_nothing_the_gate_refuses_is_found(recall: Warden, clock: FrozenClock) -> None:
    text = "deploy approvals need two reviewers"
    save_memory(recall, "revoked", summary=text, content=text)
    save_memory(recall, "expired", summary=text, content=text, ttl="1m")
    save_memory(recall, "erased", summary=text, content=text)
    save_memory(recall, "retired", summary=text, content=text, policy="deploys", revocation_version=1)
    save_memory(recall, "ok", summary="deploy approvals", content="two reviewers sign each deploy")
    recall.revoke({"ids": ["revoked"]}, reason="leaked", caller=OPERATOR)
    recall.erase(memory_id="erased", reason="asked", caller=OPERATOR)
    recall.set_policy("deploys", 2, caller=OPERATOR)
    clock.advance("2m")
    for mode in ("hybrid", "vector", "text"):
        found = recall.search(tenant="acme", query_text="deploy approvals", mode=mode, caller=OPERATOR)
        assert ids(found) == ["ok"], mode
    hidden = recall.search(tenant="acme", query_text="deploy approvals", include_hidden=True, caller=OPERATOR)
    reasons = {f.view.memory_id: f.view.reason for f in hidden}
    assert reasons["revoked"] == "revoked" and reasons["expired"] == "expired" and reasons["ok"] is None
    assert "erased" not in {f.view.memory_id for f in hidden if f.view.usable}
    with pytest.raises(PermissionError):
        recall.search(tenant="acme", query_text="deploy", include_hidden=True, caller=agent_key("acme"))


def test_more_candidates_are_fetched_past_the_refused(given: Warden, clock: FrozenClock) -> None:
    near, further = [1.0, 0.0, 0.0, 0.0], [0.2, 1.0, 0.0, 0.0]
    for i in range(150):  # the nearest, expired by the search: the gate refuses them all
        save_memory(given, f"near{i:03}", embedding=[1.0, 0.001 * i, 0.0, 0.0], ttl="1m")
    clock.advance("2m")
    for i in range(3):
        save_memory(given, f"later{i}", project="p2", embedding=further)
    found = given.search(tenant="acme", vector=near, limit=3, mode="vector", caller=OPERATOR)
    assert sorted(ids(found)) == ["later0", "later1", "later2"]
    assert found.hidden == {"expired": 150}, "what the gate withheld on the way is told"


def test_the_gate_is_asked_only_about_the_candidates_an_answer_needs(
    given: Warden, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index proposes 64 candidates at once, but the gate reads and
    judges them closest first, as many as are still missing, then twice
    the last turn: reading a candidate's row costs more than the graph's
    search of it. The vector half alone is the answer, so its contents
    are read with the judgement, not again. Five of the nearest are
    expired: the answer is the ten usable nearest, with their contents,
    and the five are told."""
    from memwarden.engine.recall import _search

    asked: list[int] = []
    judged = _search.query

    def counting(core: object, *, ids: list[str] | None = None, **rest: object) -> object:
        if ids is not None:
            asked.append(len(ids))
        return judged(core, ids=ids, **rest)  # type: ignore[arg-type]

    rng = random.Random(62)
    for i in range(5):
        save_memory(given, f"gone{i}", embedding=[1.0, 0.001 * i, 0.0, 0.0], ttl="1m")
    clock.advance("2m")
    for i in range(100):
        save_memory(given, f"m{i:03}", embedding=[0.9, 0.1 + 0.01 * i, rng.random() * 0.01, 0.0])
    monkeypatch.setattr(_search, "query", counting)
    found = given.search(tenant="acme", vector=[1.0, 0.0, 0.0, 0.0], limit=10, mode="vector", caller=OPERATOR)
    assert ids(found) == [f"m{i:03}" for i in range(10)]
    assert all(f.view.content for f in found) and found.hidden == {"expired": 5}
    # a turn reading contents holds no more than the answer's budget can (16 at the default limits)
    most = given.limits.max_answer_bytes // given.limits.max_content_bytes
    assert asked == [10, min(20, most)], "the ten missing, then twice as many (within the budget); none again"


def test_tenant_and_agent_are_walls(recall: Warden) -> None:
    text = "the launch code is in the vault"
    save_memory(recall, "mine", summary=text, content=text, scope={"agent": "planner"})
    save_memory(recall, "theirs", summary=text, content=text, scope={"agent": "writer"})
    save_memory(recall, "other", tenant="globex", summary=text, content=text)
    planner = agent_key("acme", agent="planner")
    assert ids(recall.search(tenant="acme", query_text="launch code", caller=planner)) == ["mine"]
    assert ids(recall.search(tenant="globex", query_text="launch code", caller=OPERATOR)) == ["other"]
    with pytest.raises(PermissionError):
        recall.search(tenant="globex", query_text="launch code", caller=planner)


@pytest.mark.parametrize(
    ("embedding", "problem"),
    [
        ([1.0, float("nan")] + [0.0] * 382, "finite"),
        ([1.0] * 3, "dimensions"),
        ("0.1,0.2", "list"),
        ([0.0] * 384, "zeros"),
        (["a"] * 384, "numbers"),
        # kept as 32-bit floats: past their largest, an int past any float, or zero once narrowed
        ([1e300] + [1.0] * 383, "at most"),
        ([10**400] + [1] * 383, "at most"),
        ([1e-46] * 384, "zeros"),
        ([True] * 384, "numbers"),
    ],
)
def test_a_bad_vector_is_refused_naming_the_field(recall: Warden, embedding: object, problem: str) -> None:
    head = recall.head_seq()
    with pytest.raises(InvalidInput) as refused:
        save_memory(recall, "bad", embedding=embedding)
    assert refused.value.field == "embedding" and problem in refused.value.problem
    assert recall.head_seq() == head
    with pytest.raises(InvalidInput) as refused:
        recall.search(tenant="acme", vector=embedding, caller=OPERATOR)  # type: ignore[arg-type]
    assert refused.value.field == "vector"


def test_vectors_near_the_largest_32_bit_float_are_found_by_themselves(recall: Warden) -> None:
    """Kept as given and made unit length in 64 bits: a vector of values near
    3.4e38 is no infinite norm, and finds itself first."""
    huge = [3.4e38 if i % 2 else -3.4e38 for i in range(384)]
    save_memory(recall, "huge", embedding=huge)
    save_memory(recall, "other", embedding=[1.0] * 384)
    found = recall.search(tenant="acme", vector=huge, mode="vector", limit=2, caller=OPERATOR)
    assert found[0].view.memory_id == "huge" and found[0].similarity == pytest.approx(1.0, abs=1e-5)
    assert all(f.similarity is not None and math.isfinite(f.similarity) for f in found)


def test_a_batch_saves_its_vectors(recall: Warden) -> None:
    items = [
        dict(
            memory_id=f"b{i}",
            kind="external_fact",
            summary=f"batch note {i}",
            content=f"배치 {i}",
            source_url=f"https://example.org/b{i}",
            scope={"tenant": "acme"},
            ttl="1h",
        )
        for i in range(5)
    ]
    items[0]["embedding"] = [1.0] + [0.0] * 383
    recall.save_many(items, caller=OPERATOR)
    found = recall.search(tenant="acme", vector=[1.0] + [0.0] * 383, mode="vector", limit=1, caller=OPERATOR)
    assert ids(found) == ["b0"] and found[0].similarity == pytest.approx(1.0)
    # every one has a vector (b0's, given, points nowhere near the words: no match above the floor)
    everyone = recall.search(tenant="acme", query_text="batch note", mode="vector", min_similarity=-1, caller=OPERATOR)
    assert len(everyone) == 5
    matched = recall.search(tenant="acme", query_text="batch note", mode="vector", caller=OPERATOR)
    assert sorted(ids(matched)) == ["b1", "b2", "b3", "b4"]


def test_erasure_leaves_no_vector_bytes(given: Warden, backend: Backend) -> None:
    # a vector no other can hold: its float32 bytes are the mark looked for
    secret = [0.123456789 + i * 1e-3 for i in range(32)]
    mark = struct.pack("<8f", *secret[:8])
    save_memory(given, "pii", embedding=secret, scope={"user": "kim"})
    for i in range(30):  # push it through pages and the WAL
        save_memory(given, f"filler{i}", embedding=[float(i + 1)] * 32)
    assert mark in backend.bytes_at_rest(given.path)
    assert ids(given.search(tenant="acme", vector=secret, limit=1, caller=OPERATOR)) == ["pii"]
    result = given.erase(memory_id="pii", reason="GDPR art. 17", caller=OPERATOR)
    assert result.erased == 1
    assert mark not in backend.bytes_at_rest(given.path)
    assert "pii" not in ids(given.search(tenant="acme", vector=secret, include_hidden=True, caller=OPERATOR))
    assert given.audit_verify(caller=OPERATOR)["ok"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"query_text": "tea \ud800"}, "query"),
        ({"query_text": "tea", "project": "p\ud800"}, "project"),
        ({"query_text": "tea", "min_seq": "5"}, "min_seq"),
        ({"query_text": "tea", "min_seq": -1}, "min_seq"),
    ],
)
def test_a_bad_search_is_refused_naming_the_field(recall: Warden, fields: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        recall.search(tenant="acme", caller=OPERATOR, **fields)  # type: ignore[arg-type]
    assert refused.value.field == field


def test_several_vectors_a_version_each_found_once_by_its_closest(given: Warden) -> None:
    """A LangGraph item embeds each indexed field apart (issue 59): a version
    may hold several vectors, and a search answers the memory once, at its
    closest vector's similarity."""
    fields = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]
    saved = save_memory(given, "fields", embeddings=fields)
    save_memory(given, "between", embedding=[0.6, 0.6, 0.0, 0.5])
    event = given.log.get(saved.seq)
    assert event is not None and event.payload["embedding_dims"] == 4 and event.payload["embedding_count"] == 3
    for i, field in enumerate(fields):
        q = [x + 0.05 for x in field]
        found = given.search(tenant="acme", vector=q, limit=10, mode="vector", caller=OPERATOR)
        assert ids(found) == ["fields", "between"], i
        assert found[0].similarity == pytest.approx(float(np.dot(q, field) / np.linalg.norm(q)), abs=1e-6)
    # a batch too, and a new version's vectors replace every one of the old
    given.save_many(
        [
            dict(
                memory_id="fields",
                kind="external_fact",
                summary="about fields",
                content="two fields now",
                source_url="https://example.org/fields",
                scope={"tenant": "acme", "project": "p1"},
                ttl="6h",
                embeddings=[[0.0, 0.0, 0.0, 1.0], [0.0, -1.0, 0.0, 0.0]],
            )
        ],
        caller=OPERATOR,
    )
    q = [0.0, 0.0, 1.0, 0.2]  # its old third field's direction: now only as near as its new first
    found = given.search(tenant="acme", vector=q, limit=10, mode="vector", caller=OPERATOR)
    assert ids(found) == ["fields", "between"]
    assert found[0].similarity == pytest.approx(0.2 / float(np.linalg.norm(q)), abs=1e-6)
    found = given.search(tenant="acme", vector=[0.0, -1.0, 0.0, 0.1], limit=1, mode="vector", caller=OPERATOR)
    assert ids(found) == ["fields"]


@pytest.mark.parametrize(
    ("fields", "field", "problem"),
    [
        ({"embeddings": []}, "embeddings", "non-empty"),
        ({"embeddings": [[1.0, 0.0], [1.0, 0.0, 0.0]]}, "embeddings", "different lengths"),
        ({"embeddings": [[1.0, 0.0], [float("nan"), 1.0]]}, "embeddings[1]", "finite"),
        ({"embeddings": [[1.0, 0.0]] * 65}, "embeddings", "at most 64"),
        ({"embeddings": [[1.0, 0.0]], "embedding": [1.0, 0.0]}, "embeddings", "not both"),
        ({"embeddings": [1.0, 0.0]}, "embeddings[0]", "list"),
    ],
)
def test_bad_vectors_of_a_version_are_refused_naming_the_field(
    given: Warden, fields: dict[str, object], field: str, problem: str
) -> None:
    head = given.head_seq()
    with pytest.raises(InvalidInput) as refused:
        save_memory(given, "bad", **fields)
    assert refused.value.field == field and problem in refused.value.problem
    assert given.head_seq() == head


def test_erasure_destroys_every_vector_of_a_version(given: Warden, backend: Backend) -> None:
    first = [0.123456789 + i * 1e-3 for i in range(32)]
    second = [-0.987654321 + i * 1e-3 for i in range(32)]
    marks = [struct.pack("<8f", *v[:8]) for v in (first, second)]
    save_memory(given, "pii", embeddings=[first, second], scope={"user": "kim"})
    for i in range(30):
        save_memory(given, f"filler{i}", embedding=[float(i + 1)] * 32)
    at_rest = backend.bytes_at_rest(given.path)
    assert all(mark in at_rest for mark in marks)
    assert ids(given.search(tenant="acme", vector=second, limit=1, caller=OPERATOR)) == ["pii"]
    given.erase(memory_id="pii", reason="GDPR art. 17", caller=OPERATOR)
    at_rest = backend.bytes_at_rest(given.path)
    assert not [mark for mark in marks if mark in at_rest]
    for vector in (first, second):
        assert "pii" not in ids(given.search(tenant="acme", vector=vector, include_hidden=True, caller=OPERATOR))


def test_a_search_says_what_the_gate_withheld_and_nothing_of_others(recall: Warden, clock: FrozenClock) -> None:
    """Issue 58: a search whose only matches were hidden said nothing of them.
    ``hidden`` counts them by reason, as ``query --all`` lists them: only of
    memories the caller may see exist, never of a status whose text it may
    not receive (revoked, quarantined: their nearness would tell of it)."""
    text = "the launch code is in the vault"
    save_memory(recall, "mine-expired", summary=text, content=text, scope={"agent": "planner"}, ttl="1m")
    save_memory(recall, "mine-revoked", summary=text, content=text, scope={"agent": "planner"})
    save_memory(recall, "theirs-expired", summary=text, content=text, scope={"agent": "writer"}, ttl="1m")
    save_memory(recall, "theirs-usable", summary=text, content=text, scope={"agent": "writer"})
    save_memory(recall, "other-tenant", tenant="globex", summary=text, content=text, ttl="1m")
    recall.revoke({"ids": ["mine-revoked"]}, reason="leaked", caller=OPERATOR)
    clock.advance("2m")
    planner = agent_key("acme", agent="planner")
    for mode in ("hybrid", "vector", "text"):
        found = recall.search(tenant="acme", query_text="launch code vault", mode=mode, caller=planner)
        assert ids(found) == [] and found.hidden == {"expired": 1}, (mode, found.hidden)
    everyone = recall.search(tenant="acme", query_text="launch code vault", caller=agent_key("acme"))
    assert ids(everyone) == ["theirs-usable"] and everyone.hidden == {"expired": 2}
    staff = recall.search(tenant="acme", query_text="launch code vault", include_hidden=True, caller=OPERATOR)
    assert staff.hidden == {} and {"mine-expired", "mine-revoked", "theirs-expired"} <= set(ids(staff))


def test_a_vector_is_a_match_only_above_the_floor(recall: Warden) -> None:
    """Issue 58: a hybrid search for nonsense answered a 'match' at a
    similarity of -0.146. A vector matches only above the floor: the
    request's ``min_similarity``, else the embedder's, else 0."""
    save_memory(recall, "deploy", summary="deploy approvals", content="two reviewers sign each deploy")
    save_memory(recall, "lunch", summary="friday lunch", content="the cafeteria menu")
    away = [-x for x in recall.embedder.embed(["deploy approvals two reviewers"])[0]]  # type: ignore[union-attr]
    for mode in ("hybrid", "vector"):
        assert ids(recall.search(tenant="acme", vector=away, mode=mode, caller=OPERATOR)) == []
        every = recall.search(tenant="acme", vector=away, mode=mode, min_similarity=-1, caller=OPERATOR)
        assert sorted(ids(every)) == ["deploy", "lunch"] and min(f.similarity for f in every) < 0
    for nonsense in ("xyzzy", "qwfp zzkv", "ㅋㅋㅋ"):
        found = recall.search(tenant="acme", query_text=nonsense, caller=OPERATOR)
        assert all(f.similarity is None or f.similarity > 0 for f in found), nonsense
    near = recall.search(tenant="acme", query_text="deploy approvals", mode="vector", caller=OPERATOR)
    assert ids(near)[0] == "deploy"
    high = near[0].similarity
    assert ids(recall.search(tenant="acme", query_text="deploy approvals", min_similarity=high, caller=OPERATOR)) == [
        "deploy"
    ]  # its words still match: only the vector half is floored
    recall.embedder.min_similarity = high  # type: ignore[union-attr]  # as [embedder] min_similarity sets it
    try:
        assert ids(recall.search(tenant="acme", query_text="deploy approvals", mode="vector", caller=OPERATOR)) == []
    finally:
        recall.embedder.min_similarity = 0.0  # type: ignore[union-attr]
    with pytest.raises(InvalidInput) as refused:
        recall.search(tenant="acme", query_text="deploy", min_similarity=2, caller=OPERATOR)
    assert refused.value.field == "min_similarity"


def test_a_long_query_is_refused_as_a_text_search_refuses_it(recall: Warden) -> None:
    """Issue 58: 40 words answered 200 and empty by POST where GET answered
    422: matched as words (text, hybrid) the same limit holds, naming ``query``."""
    save_memory(recall, "deploy", summary="deploy approvals", content="two reviewers sign each deploy")
    forty = " ".join(f"word{i}" for i in range(40))
    with pytest.raises(InvalidInput) as listing:
        recall.query(tenant="acme", text=forty, caller=OPERATOR)
    for mode in ("hybrid", "text"):
        with pytest.raises(InvalidInput) as refused:
            recall.search(tenant="acme", query_text=forty, mode=mode, caller=OPERATOR)
        assert refused.value.field == "query" and "at most 32 distinct words" in refused.value.problem
        assert "at most 32 distinct words" in listing.value.problem
    recall.search(tenant="acme", query_text=forty, mode="vector", caller=OPERATOR)  # only embedded: taken
