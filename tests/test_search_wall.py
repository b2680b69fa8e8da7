"""The tenant is the wall for search by meaning too (issue 40): two tenants
hold the same ids with the same texts and the same vectors, and the other
tenant holds more besides (ids of its own, the same texts, vectors a hair
off the same ones); a search in one tenant never answers a memory of the
other, by words, by vector or fused, while the tenant's index is exact and
once it is a graph (HNSW), on every backend. Where the two tenants' states
differ (a memory revoked in one only), a leak would show as a memory the
gate refuses in the tenant searched."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from memwarden.engine import OPERATOR, IndexSettings, KeyStore, Principal, Warden
from memwarden.events import FrozenClock

DIMS = 32
OURS, THEIRS = "acme", "globex"
EXACT_UP_TO = 100  # as tests/test_vector_index.py: a graph past 100 vectors
SIZES = {"exact": 40, "hnsw": 150}
REVOKED = "m0003"  # revoked in OURS only: usable in THEIRS, same text, same vector
MODES = ("text", "vector", "hybrid")


def text_of(i: int) -> str:
    return f"deploy approval note{i:04} needs two reviewers"


def vector_of(i: int, near: bool = False) -> list[float]:
    """Memory ``i``'s vector, the same in both tenants; ``near``: one a
    little off it (the other tenant's extra ones: close enough to rank at
    the top of any leak, not equal, which an HNSW graph links poorly)."""
    rng = random.Random(i)
    exact = [rng.gauss(0, 1) for _ in range(DIMS)]
    return [x + rng.gauss(0, 0.05) for x in exact] if near else exact


@pytest.fixture(params=sorted(SIZES))
def store(request: pytest.FixtureRequest, db_path: Path, tmp_path: Path, clock: FrozenClock) -> Iterator[Warden]:
    kind = request.param
    settings = IndexSettings(directory=tmp_path / "vectors", exact_up_to=EXACT_UP_TO, save_after=1)
    w = Warden(db_path, clock=clock, vector_index=settings)
    items = [
        dict(
            memory_id=f"{prefix}{i:04}",
            kind="external_fact",
            summary=text_of(i),
            content=text_of(i),
            source_url=f"https://example.org/{i}",
            scope={"tenant": tenant},
            ttl="6h",
            embedding=vector_of(i, near=prefix != "m"),
        )
        for tenant, prefix in ((OURS, "m"), (THEIRS, "m"), (THEIRS, "theirs-"))
        for i in range(SIZES[kind])
    ]
    for at in range(0, len(items), 500):
        w.save_many(items[at : at + 500], caller=OPERATOR)
    w.revoke({"tenant": OURS, "ids": [REVOKED]}, reason="leaked in acme only", caller=OPERATOR)
    for tenant in (OURS, THEIRS):  # an index is opened at a tenant's first search
        w.search(tenant=tenant, vector=vector_of(0), mode="vector", caller=OPERATOR)
    w.vector_index.settle()  # and its graph built where the tenant is past the threshold
    described = {d["tenant"]: (d["kind"], d["vectors"]) for d in w.vector_index.describe()}
    n = SIZES[kind]
    # the revoked one left the index at its revocation's commit
    assert described == {OURS: (kind, n - 1), THEIRS: (kind, 2 * n)}, described
    yield w
    w.close()


def keys(w: Warden) -> dict[str, Principal]:
    store = KeyStore(w)
    return {
        "both": store.create("agent", tenants=[OURS, THEIRS], caller=OPERATOR)[1],
        "ours": store.create("agent", tenants=[OURS], caller=OPERATOR)[1],
        "theirs": store.create("agent", tenants=[THEIRS], caller=OPERATOR)[1],
        "security": store.create("security", caller=OPERATOR)[1],
    }


def search(w: Warden, who: Principal, tenant: str, i: int, mode: str, **extra: Any) -> list[Any]:
    """A search for memory ``i``'s own words and vector, every answer asked for
    (at any similarity: the vectors are random, half of them point away)."""
    asked: dict[str, Any] = {"query_text": text_of(i)} if mode == "text" else {"vector": vector_of(i)}
    if mode != "text":
        asked["min_similarity"] = -1.0
    if mode == "hybrid":
        asked["query_text"] = text_of(i)
    return w.search(tenant=tenant, mode=mode, limit=500, caller=who, **asked, **extra)


@pytest.mark.parametrize("mode", MODES)
def test_a_search_in_one_tenant_never_answers_the_others(store: Warden, mode: str) -> None:
    w = store
    [kind] = [d["kind"] for d in w.vector_index.describe() if d["tenant"] == OURS]
    n = SIZES[kind]

    def every(found: int, expected: int) -> bool:
        """All of the tenant's vectors: an exact index answers each; a graph
        (approximate) may miss a few; none from elsewhere either way."""
        return found == expected if kind == "exact" else expected * 0.9 <= found <= expected

    who = keys(w)
    for i in (0, 3, 7, n - 1):
        for key in ("both", "ours", "security"):
            found = search(w, who[key], OURS, i, mode)
            if mode == "text" and i == 3:  # its words are the revoked one's alone, here
                assert found == [], (key, [(f.view.scope, f.view.memory_id) for f in found])
                continue
            assert found, (key, i, mode)
            assert {f.view.scope["tenant"] for f in found} == {OURS}, (key, i, mode)
            ids = [f.view.memory_id for f in found]
            assert not [m for m in ids if m.startswith("theirs-")], (key, i, mode)
            assert REVOKED not in ids, "the other tenant's usable twin of a memory revoked here"
            assert all(f.view.usable for f in found)
            if i != 3:
                assert ids[0] == f"m{i:04}", (key, i, mode, ids[:3])
            if mode != "text":  # the vector half looks at every vector of the tenant, and only those
                assert every(len(ids), n - 1), (key, i, mode, len(ids))
        # the other tenant, searched by the key that holds both: its own, all of them
        theirs = search(w, who["both"], THEIRS, i, mode)
        assert {f.view.scope["tenant"] for f in theirs} == {THEIRS}
        theirs_ids = {f.view.memory_id for f in theirs}
        twins = {f"m{i:04}", f"theirs-{i:04}"} & theirs_ids
        if kind == "exact" or mode == "text":
            assert twins == {f"m{i:04}", f"theirs-{i:04}"}
        else:  # approximate: at least the nearest of the two
            assert twins
        if mode != "text":
            assert every(len(theirs_ids), 2 * n), (i, mode, len(theirs_ids))
        assert search(w, who["theirs"], THEIRS, i, mode) == theirs


@pytest.mark.parametrize("mode", MODES)
def test_the_hidden_ones_are_the_tenants_own(store: Warden, mode: str) -> None:
    who = keys(store)
    found = search(store, who["security"], OURS, 3, mode, include_hidden=True)
    assert {f.view.scope["tenant"] for f in found} == {OURS}
    revoked = [f.view for f in found if f.view.memory_id == REVOKED]
    if mode == "vector":  # its vector left the index at the revocation: only its words find it
        assert revoked == []
    else:
        assert len(revoked) == 1 and not revoked[0].usable and revoked[0].reason == "revoked"
    assert not [f for f in found if f.view.memory_id.startswith("theirs-")]
    twin = search(store, who["security"], THEIRS, 3, mode, include_hidden=True)
    twins = [f.view for f in twin if f.view.memory_id in (REVOKED, "theirs-0003")]
    assert twins and all(v.usable and v.scope["tenant"] == THEIRS for v in twins)


# -- the wall inside a tenant (issue 58): what a search costs tells nothing of others ------------------

PLANNER, WRITER = "planner", "writer"


def agent_items(
    agent: str, prefix: str, vectors: list[list[float]], project: str = "p1", start: int = 0
) -> list[dict[str, Any]]:
    return [
        dict(
            memory_id=f"{prefix}{i:04}",
            kind="external_fact",
            summary=f"note {prefix}{i:04}",
            content=f"note {prefix}{i:04}",
            source_url=f"https://example.org/{prefix}{i}",
            scope={"tenant": OURS, "agent": agent, "project": project},
            ttl="6h",
            embedding=vector,
        )
        for i, vector in enumerate(vectors, start)
    ]


def near(q: list[float], seed: int) -> list[float]:
    """A vector a hair off ``q``: nearer to it than any random one."""
    rng = random.Random(seed)
    return [x + rng.gauss(0, 0.01) for x in q]


class Counted:
    """The index's calls and the vectors it compared, around one search."""

    def __init__(self, w: Warden, monkeypatch: pytest.MonkeyPatch) -> None:
        self.w, self.calls = w, 0
        real = w.vector_index.nearest

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(w.vector_index, "nearest", counted)

    def search(self, who: Principal, q: list[float], **extra: Any) -> tuple[list[str], int, int]:
        self.calls = 0
        before = getattr(self.w.vector_index, "examined", 0)
        found = self.w.search(tenant=OURS, vector=q, mode="vector", limit=10, caller=who, **extra)
        return [f.view.memory_id for f in found], self.calls, getattr(self.w.vector_index, "examined", 0) - before


@pytest.mark.parametrize("size", sorted(SIZES.values()), ids=sorted(SIZES))
def test_an_agents_search_costs_the_same_however_many_of_others_lie_near(
    db_path: Path, tmp_path: Path, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    """An agent-bound key's search compares its own agent's vectors only:
    its answer, its calls to the index and the vectors compared are the
    same before and after another agent saves 400 memories nearer the
    query than any of its own (before, the index doubled its request past
    them, each round one more call, and compared them all)."""
    settings = IndexSettings(directory=tmp_path / "vectors", exact_up_to=EXACT_UP_TO, save_after=1)
    with Warden(db_path, clock=clock, vector_index=settings) as w:
        q = vector_of(99_999)
        w.save_many(agent_items(PLANNER, "mine", [vector_of(i) for i in range(size)]), caller=OPERATOR)
        planner = KeyStore(w).create("agent", tenants=[OURS], agent=PLANNER, caller=OPERATOR)[1]
        counted = Counted(w, monkeypatch)
        counted.search(planner, q)
        w.vector_index.settle()  # a graph past the threshold, built before anything is measured
        alone = counted.search(planner, q)
        assert alone[0] and alone[1] == 1
        for at in range(0, 400, 200):
            crowd = [near(q, at + i) for i in range(200)]
            w.save_many(agent_items(WRITER, "theirs", crowd, start=at), caller=OPERATOR)
        w.vector_index.settle()
        crowded = counted.search(planner, q)
        assert crowded == alone, (alone, crowded)
        # while an unbound key over every agent meets the others' first
        everyone = counted.search(keys(w)["ours"], q)
        assert everyone[0][0].startswith("theirs")
        parts = {d["agent"]: d for d in w.vector_index.describe() if d["tenant"] == OURS}
        assert parts[PLANNER]["vectors"] == size and parts[WRITER]["vectors"] == 400


def test_a_scope_filter_narrows_before_ranking(
    db_path: Path, tmp_path: Path, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search of one project compares that project's vectors only (the
    graph's part holds both projects): the same work before and after
    another project's 300 memories nearer the query are saved."""
    settings = IndexSettings(directory=tmp_path / "vectors", exact_up_to=EXACT_UP_TO, save_after=1)
    with Warden(db_path, clock=clock, vector_index=settings) as w:
        q = vector_of(99_999)
        w.save_many(agent_items(PLANNER, "mine", [vector_of(i) for i in range(30)]), caller=OPERATOR)
        counted = Counted(w, monkeypatch)
        who = keys(w)["ours"]
        alone = counted.search(who, q, project="p1")
        assert len(alone[0]) == 10 and alone[2] == 30
        w.save_many(agent_items(PLANNER, "other", [near(q, i) for i in range(300)], project="p2"), caller=OPERATOR)
        counted.search(who, q)
        w.vector_index.settle()
        assert [d["kind"] for d in w.vector_index.describe() if d["tenant"] == OURS] == ["hnsw"]
        assert counted.search(who, q, project="p1") == alone
        assert counted.search(who, q)[0][0].startswith("other")
        # past the threshold a filter is the graph's, its candidates kept for the filter's own
        theirs, _, _ = counted.search(who, q, project="p2")
        assert len(theirs) == 10 and all(m.startswith("other") for m in theirs)


@pytest.mark.parametrize("size", sorted(SIZES.values()), ids=sorted(SIZES))
def test_a_revoked_or_erased_memory_leaves_the_index_at_commit(
    db_path: Path, tmp_path: Path, clock: FrozenClock, size: int
) -> None:
    """Right after the revocation (or erasure) commits, before any search
    pulls the index forward, its vectors are gone from the index (before,
    a revoked memory's stayed until the tenant's index was rebuilt)."""
    settings = IndexSettings(directory=tmp_path / "vectors", exact_up_to=EXACT_UP_TO, save_after=1)
    with Warden(db_path, clock=clock, vector_index=settings) as w:
        w.save_many(agent_items(PLANNER, "mine", [vector_of(i) for i in range(size)]), caller=OPERATOR)
        w.search(tenant=OURS, vector=vector_of(0), mode="vector", caller=OPERATOR)
        w.vector_index.settle()
        held = lambda m: w.vector_index.held(OURS, DIMS, m)  # noqa: E731
        assert held("mine0003") is not None and held("mine0004") is not None
        w.revoke({"tenant": OURS, "ids": ["mine0003"]}, reason="leaked", caller=OPERATOR)
        assert held("mine0003") is None
        w.revoke({"tenant": OURS, "agent": PLANNER, "project": "p1", "ids": ["mine0005"]}, reason="r", caller=OPERATOR)
        assert held("mine0005") is None
        w.erase(memory_id="mine0004", reason="asked", caller=OPERATOR)
        assert held("mine0004") is None
        assert held("mine0006") is not None
        [part] = [d for d in w.vector_index.describe() if d["tenant"] == OURS]
        assert part["vectors"] == size - 3
