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
    assert described == {OURS: (kind, n), THEIRS: (kind, 2 * n)}, described
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
    """A search for memory ``i``'s own words and vector, every answer asked for."""
    asked: dict[str, Any] = {"query_text": text_of(i)} if mode == "text" else {"vector": vector_of(i)}
    if mode == "hybrid":
        asked["query_text"] = text_of(i)
    return w.search(tenant=tenant, mode=mode, limit=500, caller=who, **asked, **extra)


@pytest.mark.parametrize("mode", MODES)
def test_a_search_in_one_tenant_never_answers_the_others(store: Warden, mode: str) -> None:
    w = store
    [(kind, n)] = [(d["kind"], d["vectors"]) for d in w.vector_index.describe() if d["tenant"] == OURS]

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
    assert len(revoked) == 1 and not revoked[0].usable and revoked[0].reason == "revoked"
    assert not [f for f in found if f.view.memory_id.startswith("theirs-")]
    twin = search(store, who["security"], THEIRS, 3, mode, include_hidden=True)
    twins = [f.view for f in twin if f.view.memory_id in (REVOKED, "theirs-0003")]
    assert twins and all(v.usable and v.scope["tenant"] == THEIRS for v in twins)
