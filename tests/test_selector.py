"""The revocation rule's three spellings give one answer, on every backend:
the Python predicate (``selector_covers``, ``revokes``), the SQL derived
from the same field table (``selector_sql`` and ``COVERED_SQL``: what a
preview counts, what the fold takes out, what a read-back looks for) and
the parsed revocations each save is checked against (the store's
revocation cache, each tenant's share of it).

Generated histories save memories naming every field a selector can say
(tenant, project, permission, user, agent, tool, kind, source, id), with
values a careless spelling would mix up: case, Korean, LIKE's own ``%`` and
``_``, absent scope fields; and revoke with selectors of any of those
fields, effective now or in the past, so that fetches fall before, at and
after a revocation's effective time, recorded before and after it."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from memwarden.engine import OPERATOR, RevokedScope, Warden
from memwarden.events import MemorySaved, Scope, content_checksum, format_ts
from memwarden.projections import (
    TERMINAL,
    Access,
    MemoryRow,
    Revocation,
    RevocationQuery,
    RevokedBy,
    Selected,
    ViewReader,
    blocking_revocation,
    revokes,
    row_of,
    selector_covers,
)

from ._sizes import larger
from .backends import Backend
from .conftest import scratch_warden

TENANTS = ["acme", "Acme", "서울", "a_c"]
IDS = ["m1", "M1", "메모", "m_1", "m%"]
VALUES = ["a", "A", "김", "a_b", "a%"]
KINDS = ["external_fact", "External_Fact", "사실", "fact_%"]
# absolute paths are kept as given: LIKE's wildcards and Korean stay in them
SOURCES = ["/srv/50%_off/서울", "/srv/50x_off", "/srv/a_b", "/SRV/a", "/srv/서울시/문서"]
PREFIXES = ["/srv/50%", "/srv/50x", "/srv/a_", "/srv/a%", "/srv/서울", "/SRV", "/srv/", "/"]
SCOPE = ("project", "permission", "user", "agent", "tool")

MEMORIES = st.fixed_dictionaries(
    {
        "memory_id": st.sampled_from(IDS),
        "tenant": st.sampled_from(TENANTS),
        "kind": st.sampled_from(KINDS),
        "source_url": st.sampled_from(SOURCES),
        "age": st.integers(0, 90),  # minutes before now it was fetched
        **{field: st.none() | st.sampled_from(VALUES) for field in SCOPE},
    }
)
# what each field of a selector may name: the memories' values and their
# near misses (another case, a LIKE pattern that would match one)
NAMES: dict[str, list[Any]] = {
    "tenant": [*TENANTS, "a%c", "ACME"],
    **{field: [*VALUES, "a%b", "a_"] for field in SCOPE},
    "kind": [*KINDS, "fact__", "사%"],
    "source_prefix": PREFIXES,
}


@st.composite
def selectors(draw: st.DrawFn) -> dict[str, Any]:
    """One or two fields (more rarely cover anything), ids, or everything."""
    if draw(st.integers(0, 15)) == 0:
        return {"everything": True}
    fields = draw(st.lists(st.sampled_from([*NAMES, "ids"]), min_size=1, max_size=2, unique=True))
    return {
        f: draw(st.lists(st.sampled_from([*IDS, "m_"]), min_size=1, max_size=3, unique=True))
        if f == "ids"
        else draw(st.sampled_from(NAMES[f]))
        for f in fields
    }


SELECTORS = selectors()
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("save"), MEMORIES),
        st.tuples(st.just("save"), MEMORIES),
        # as an import does, straight to the log: the fold alone decides
        st.tuples(st.just("import"), MEMORIES),
        st.tuples(st.just("revoke"), SELECTORS, st.integers(0, 60)),  # effective this many minutes ago
        st.tuples(st.just("erase"), st.sampled_from(TENANTS), st.sampled_from(IDS)),  # a later event on a row
    ),
    min_size=3,
    max_size=larger(14, 30),
)

# a version imported, fetched at the second revocation's effective time
# (before the first's): the fold names the first, the SQL finds it for the
# second by its fetch time alone
HELD_TWICE = [
    ("revoke", {"tenant": "acme"}, 0),
    ("revoke", {"ids": ["m1"]}, 1),
    (
        "import",
        {
            **dict.fromkeys(SCOPE),
            "memory_id": "m1",
            "tenant": "acme",
            "kind": "사실",
            "source_url": "/srv/a_b",
            "age": 2,
        },
    ),
]


def examples(backend: Backend) -> int:
    return larger(40, 300) if backend.name == "sqlite" else larger(15, 100)


# --runslow runs hundreds of generated histories: minutes on PostgreSQL
@pytest.mark.timeout(larger(120, 1800))
def test_the_python_sql_and_cached_spellings_of_revocation_agree(backend: Backend, tmp_path: Path) -> None:
    @settings(
        max_examples=examples(backend),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(STEPS, st.lists(SELECTORS, max_size=6))
    @example(HELD_TWICE, [])
    def check(steps: list[tuple[Any, ...]], probes: list[dict[str, Any]]) -> None:
        w = scratch_warden(backend, tmp_path)
        try:
            recorded = Recorded()
            for step in steps:
                w.clock.advance("1m")  # type: ignore[attr-defined]
                if step[0] == "save":
                    save(w, step[1], recorded)
                elif step[0] == "import":
                    imported(w, step[1], recorded)
                elif step[0] == "erase":
                    erase(w, step[1], step[2])
                else:
                    revoke(w, step[1], step[2])
            agree(w, recorded, probes)
        finally:
            w.close()

    check()


class Recorded:
    """What the test knows of each memory's current version (by tenant and id)."""

    def __init__(self) -> None:
        self.seq: dict[tuple[str, str], int] = {}  # the seq that recorded it
        # the revocation holding it, imported though an earlier version was
        # revoked and its fetch is no later (whatever scope it claims now)
        self.held: dict[tuple[str, str], str] = {}


def every_revocation(view: ViewReader) -> list[Revocation]:
    """Every revocation as the rule reads one, oldest first, from the view's
    own records (not the cache under test)."""
    records = sorted(view.revocation_records(RevocationQuery()), key=lambda r: r.seq)
    return [Revocation(r.revocation_id, json.loads(r.selector), r.effective_at, r.seq) for r in records]


def save(w: Warden, memory: dict[str, Any], recorded: Recorded) -> None:
    """A save is refused exactly when the Python rule over every revocation
    says so, or a revocation already held an earlier version of it."""
    fetched = w.clock.now() - timedelta(minutes=memory["age"])
    scope = {f: memory[f] for f in ("tenant", *SCOPE) if memory[f] is not None}
    key = (memory["tenant"], memory["memory_id"])
    candidate = {
        **dict.fromkeys(SCOPE),
        **scope,
        "memory_id": memory["memory_id"],
        "kind": memory["kind"],
        "source_url": memory["source_url"],
        "fetched_at": format_ts(fetched),
    }
    with w.reading() as view:
        every = every_revocation(view)
        row = row_of(view, Access.system(), *key)
    held = any(revokes(r, candidate, recorded_before=False) for r in every)
    until = row.revoked_until if row else None
    try:
        w.save(
            memory_id=memory["memory_id"],
            kind=memory["kind"],
            summary=f"요약 {memory['memory_id']}",
            content=f"{memory} 내용",
            source_url=memory["source_url"],
            scope=scope,
            fetched_at=fetched,
            ttl="30d",
            caller=OPERATOR,
        )
    except RevokedScope:
        assert held or (until is not None and candidate["fetched_at"] <= until), (candidate, every)
        return
    assert not held, (candidate, every)
    recorded.seq[key] = w.log.head().seq
    recorded.held.pop(key, None)


def imported(w: Warden, memory: dict[str, Any], recorded: Recorded) -> None:
    """A version appended past the engine's refusal: the fold records it
    revoked exactly when the Python rule says a revocation holds it."""
    fetched = w.clock.now() - timedelta(minutes=memory["age"])
    key = (memory["tenant"], memory["memory_id"])
    with w.reading() as view:
        row = row_of(view, Access.system(), *key)
    text = f"{memory} 내용"
    until = row.revoked_until if row else None
    if row is not None and until is not None and format_ts(fetched) <= until:
        recorded.held[key] = row.last_revocation
    else:
        recorded.held.pop(key, None)
    (recorded.seq[key],) = w.log.append(
        [
            MemorySaved(  # type: ignore[call-arg]  # a summary given as text is recorded as its checksum
                memory_id=memory["memory_id"],
                version=row.version + 1 if row else 1,
                kind=memory["kind"],
                summary="요약",
                content_checksum=content_checksum(text),
                content_length=len(text.encode()),
                source_url=memory["source_url"],
                fetched_at=fetched,
                expires_at=fetched + timedelta(days=30),
                scope=Scope(**{f: memory[f] for f in ("tenant", *SCOPE) if memory[f] is not None}),
            )
        ]
    )


def revoke(w: Warden, selector: dict[str, Any], minutes_ago: int) -> None:
    """A revocation takes out what the Python rule says it covers (the
    fold finds them by the SQL spelling)."""
    with w.reading() as view:
        live = [r for r in view.memories(Access.system()) if r.status not in TERMINAL]
    result = w.revoke(
        selector,
        reason="generated",
        effective_at=w.clock.now() - timedelta(minutes=minutes_ago),
        caller=OPERATOR,
    )
    with w.reading() as view:
        (issued,) = [r for r in every_revocation(view) if r.revocation_id == result.revocation_id]
    assert result.covered == sum(1 for r in live if selector_covers(issued.selector, r)), issued


def erase(w: Warden, tenant: str, memory_id: str) -> None:
    try:
        w.erase(memory_id=memory_id, tenant=tenant, reason="asked", caller=OPERATOR)
    except LookupError:
        pass  # never saved: nothing to erase


def agree(w: Warden, recorded: Recorded, probes: list[dict[str, Any]]) -> None:
    with w.reading() as view:
        rows = view.memories(Access.system())
        every = every_revocation(view)
        shares = view.revocations([*TENANTS, "elsewhere"])
        for selector in [*probes, *(r.selector for r in every)]:
            by_python = {r.key for r in rows if r.status not in TERMINAL and selector_covers(selector, r)}
            assert {r.key for r in view.covered(Selected(selector))} == by_python, selector
        for revocation in every:
            by_python = {r.key for r in rows if takes_out(revocation, r, recorded)}
            by_sql = {
                r.key
                for r in view.covered(
                    RevokedBy(revocation.revocation_id, revocation.seq, revocation.effective_at, revocation.selector)
                )
            }
            # the SQL reads "recorded before" from a row's last event, which an
            # erasure moves past the revocation: it may leave out an erased
            # memory (never served) the rule covers, and nothing else
            erased = {r.key for r in rows if r.status == "erased"}
            assert by_sql - erased == by_python - erased and by_sql <= by_python, revocation
    for tenant, share in shares.items():
        # a selector naming another tenant never covers its memories
        assert share == [r for r in every if r.selector.get("tenant") in (None, tenant)], tenant
    for row in rows:
        if row.status != "erased":  # an erasure outranks a revocation
            revoked = any(takes_out(r, row, recorded) for r in every)
            assert (row.status == "revoked") == revoked, (row, every)
        # a version saved now: the tenant's share blocks it as the whole list would
        now = replace(row, fetched_at=format_ts(w.clock.now()))
        in_share = blocking_revocation(shares[row.tenant], now) is not None
        assert in_share == any(revokes(r, now, recorded_before=False) for r in every), row


def takes_out(revocation: Revocation, row: MemoryRow, recorded: Recorded) -> bool:
    """The Python rule, and the hold of a revocation on a later version."""
    if recorded.held.get(row.key) == revocation.revocation_id:
        return True
    return revokes(revocation, row, recorded_before=recorded.seq[row.key] < revocation.seq)
