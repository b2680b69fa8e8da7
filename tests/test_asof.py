"""The view as of a past seq, answered from the indexes (each memory's
stream folded to that seq), equals a full replay of the log to it: at every
seq of generated logs, on every backend; and the faces serve it paged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memwarden.engine import OPERATOR, Warden
from memwarden.events import (
    FrozenClock,
    MemoryExpired,
    MemoryIntegrityFailed,
    MemoryResynced,
    MemoryVerified,
    canonical_json,
    format_ts,
)
from memwarden.projections import Access, MemoryRow, row_of

from ._sizes import larger
from .backends import Backend
from .conftest import Cli, save_memory, scratch_warden

TENANTS = ("acme", "globex")
IDS = ("m0", "m1", "m2", "m3")


def live(w: Warden, tenant: str, memory_id: str) -> MemoryRow | None:
    with w.reading() as view:
        return row_of(view, Access.system(), tenant, memory_id)


def apply(w: Warden, clock: FrozenClock, op: tuple[Any, ...]) -> None:
    """One step of a generated history; a step the engine refuses is skipped."""
    kind, tenant, memory_id = op[0], op[1], op[2]
    row = live(w, tenant, memory_id)
    try:
        if kind == "save":
            # evidence that exists (a save naming none is refused, and tested elsewhere)
            parents = [p for p in op[3] if p != memory_id and live(w, tenant, p) is not None]
            save_memory(
                w,
                memory_id,
                tenant=tenant,
                project=op[4],
                ttl="1h",
                content=f"text {op[5]} of {memory_id} 내용",
                source_url=f"https://example.org/{op[4]}/{memory_id}",
                **({"derived_from": parents} if parents else {}),
            )
        elif kind == "advance":
            clock.advance("40m")
        elif kind == "revoke":
            selectors = {
                "tenant": {"tenant": tenant},
                "project": {"tenant": tenant, "project": op[3]},
                "ids": {"tenant": tenant, "ids": [memory_id]},
                "prefix": {"source_prefix": "https://example.org/p2/"},
            }
            w.revoke(selectors[op[4]], reason="generated", caller=OPERATOR)
        elif kind == "policy":
            w.set_policy("default", op[3], caller=OPERATOR)
        elif kind == "erase":
            w.erase(memory_id=memory_id, tenant=tenant, reason="asked", caller=OPERATOR)
        elif row is None:
            return
        elif kind == "expire" and row.expires_at:
            w.log.append(
                [MemoryExpired(tenant=tenant, memory_id=memory_id, version=row.version, expires_at=row.expires_at)]
            )
        elif kind == "verify":
            now = w.now()
            w.log.append(
                [
                    MemoryVerified(
                        tenant=tenant,
                        memory_id=memory_id,
                        version=row.version,
                        content_checksum=row.checksum,
                        fetched_at=now,
                        verified_at=now,
                        expires_at=format_ts(clock.now() + __import__("datetime").timedelta(hours=1)),
                        revocation_version=op[3],
                    )
                ]
            )
        elif kind == "integrity":
            w.log.append(
                [
                    MemoryIntegrityFailed(
                        tenant=tenant, memory_id=memory_id, version=row.version, expected_checksum=row.checksum
                    )
                ]
            )
        elif kind == "resync":
            w.log.append(
                [
                    MemoryResynced(
                        tenant=tenant,
                        memory_id=memory_id,
                        version=row.version,
                        content_checksum=row.checksum,
                        resynced_from="backup",
                    )
                ]
            )
    except (ValueError, LookupError, PermissionError):
        pass  # refused as it would be for a user: nothing was written


_SAVE = st.tuples(
    st.just("save"),
    st.sampled_from(TENANTS),
    st.sampled_from(IDS),
    st.lists(st.sampled_from(IDS), max_size=2, unique=True),
    st.sampled_from(["p1", "p2"]),
    st.integers(0, 2),  # which text: a new one makes a new version
)
OPS = st.one_of(
    _SAVE,
    _SAVE,
    _SAVE,  # saves weigh most: the other steps need memories to act on
    st.tuples(
        st.sampled_from(["advance", "expire", "integrity", "resync", "erase"]),
        st.sampled_from(TENANTS),
        st.sampled_from(IDS),
    ),
    st.tuples(st.just("verify"), st.sampled_from(TENANTS), st.sampled_from(IDS), st.integers(1, 3)),
    st.tuples(
        st.just("revoke"),
        st.sampled_from(TENANTS),
        st.sampled_from(IDS),
        st.sampled_from(["p1", "p2"]),
        st.sampled_from(["tenant", "project", "ids", "prefix"]),
    ),
    st.tuples(st.just("policy"), st.sampled_from(TENANTS), st.sampled_from(IDS), st.integers(1, 3)),
)


# --runslow runs hundreds of generated histories: minutes on PostgreSQL
@pytest.mark.timeout(larger(120, 1800))
def test_at_every_seq_of_a_generated_log_the_indexed_view_equals_a_replay(backend: Backend, tmp_path: Path) -> None:
    """Rows, policies and what was drawn from what, against a full replay
    (the gate's answers too: tests/sqlite/test_asof_oracle.py)."""

    # PostgreSQL's examples cost a round trip per read: fewer in the default run
    @settings(
        max_examples=larger(60, 150) if backend.name == "sqlite" else larger(12, 150),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(st.lists(OPS, min_size=8, max_size=30))
    def check(ops: list[tuple[Any, ...]]) -> None:
        w = scratch_warden(backend, tmp_path)
        try:
            for op in ops:
                apply(w, w.clock, op)  # type: ignore[arg-type]
            for seq in range(w.log.head().seq + 1):
                result = w.check_as_of(seq=seq, caller=OPERATOR)
                assert result.ok, (seq, result)
            assert w.check_projections(caller=OPERATOR).ok
        finally:
            w.close()

    check()


def test_a_batch_that_changes_a_memorys_evidence_keeps_what_it_rested_on(warden: Warden) -> None:
    """One transaction saving a child with a parent, then again without:
    the live view and a rebuild agree on what it ever rested on."""
    base = {"kind": "external_fact", "summary": "s", "source_url": "https://example.org/x", "scope": {"tenant": "acme"}}
    warden.save_many(
        [
            {**base, "memory_id": "parent", "content": "p"},
            {**base, "memory_id": "child", "content": "c1", "derived_from": ["parent"]},
            {**base, "memory_id": "child", "content": "c2"},
        ],
        caller=OPERATOR,
    )
    assert warden.check_projections(caller=OPERATOR).ok
    head = warden.log.head().seq
    for seq in range(head + 1):
        assert warden.check_as_of(seq=seq, caller=OPERATOR).ok, seq
    # one commit, one recorded_at: the past by seq, inside it
    with warden.store.as_of(2) as past:
        assert past.drawn_from("acme", "parent") == ["child"]
    with warden.store.as_of(3) as past:
        assert past.drawn_from("acme", "parent") == []
    assert warden.explain("parent", caller=OPERATOR)["drawn_from_it"] == []


def rich_history(w: Warden, clock: FrozenClock) -> None:
    """Every kind of event, on the backend under test."""
    save_memory(w, "evidence", tenant="acme", summary="서울 날씨 요약", ttl="1h")
    save_memory(w, "other", tenant="acme", project="p2")
    save_memory(w, "summary", tenant="acme", derived_from=["evidence", "other"], source_url="agent://s")
    save_memory(w, "conclusion", tenant="acme", derived_from=["summary"], source_url="agent://c")
    save_memory(w, "evidence", tenant="globex", summary="same id, another tenant")
    clock.advance("2h")
    row = live(w, "acme", "evidence")
    assert row is not None
    w.log.append([MemoryExpired(tenant="acme", memory_id="evidence", version=1, expires_at=row.expires_at)])
    save_memory(w, "summary", tenant="acme", derived_from=["other"], source_url="agent://s", content="v2")  # drops one
    w.set_policy("default", 2, caller=OPERATOR)
    w.revoke({"tenant": "acme", "project": "p2"}, reason="leak", caller=OPERATOR)  # cascades to summary, conclusion
    w.log.append(
        [MemoryIntegrityFailed(tenant="globex", memory_id="evidence", version=1, expected_checksum=row.checksum)]
    )
    w.erase(memory_id="evidence", tenant="acme", reason="asked", caller=OPERATOR)


def test_every_seq_of_a_rich_history_checks_on_every_backend(warden: Warden, clock: FrozenClock, run_cli: Cli) -> None:
    rich_history(warden, clock)
    head = warden.log.head().seq
    for seq in range(head + 1):
        assert warden.check_as_of(seq=seq, caller=OPERATOR).ok, seq
    data = run_cli.json("projections", "check", "--as-of", str(head // 2))
    assert data["ok"] is True and data["live_seq"] == head // 2


def test_what_was_drawn_from_a_memory_then_is_told_as_it_was(warden: Warden, clock: FrozenClock) -> None:
    rich_history(warden, clock)
    resaved = next(
        e.seq
        for e in warden.log.read()
        if e.type == "memory.saved" and e.payload["memory_id"] == "summary" and e.payload["version"] == 2
    )
    before = warden.explain("other", as_of=warden.log.get(resaved - 1).recorded_at, caller=OPERATOR)
    now = warden.explain("evidence", tenant="acme", caller=OPERATOR)
    assert [c["memory_id"] for c in before["drawn_from_it"]] == ["summary"]
    # the summary no longer rests on the evidence: today it shows nothing drawn from it
    assert now["drawn_from_it"] == []
    then = warden.explain("evidence", tenant="acme", as_of=warden.log.get(4).recorded_at, caller=OPERATOR)
    assert [c["memory_id"] for c in then["drawn_from_it"]] == ["summary"]
    assert then["drawn_from_it"][0]["children"][0]["memory_id"] == "conclusion"


def test_the_past_shows_an_erased_memory_existed_never_its_text(warden: Warden, clock: FrozenClock) -> None:
    save_memory(warden, "secret", summary="주민번호 요약", content="주민번호 123")
    saved = warden.log.head().seq
    warden.erase(memory_id="secret", reason="asked", caller=OPERATOR)
    then = warden.replay(seq=saved, caller=OPERATOR)["memories"]
    assert [m["memory_id"] for m in then] == ["secret"] and then[0]["usable"] is True
    assert then[0]["summary"] is None and "content" not in then[0]
    assert "주민번호" not in "".join(warden.replay_stream(seq=saved, caller=OPERATOR))


def test_a_replay_pages_with_a_cursor_and_streams_the_same_document(warden: Warden) -> None:
    for i in range(7):
        save_memory(warden, f"m{i}", tenant="acme" if i % 2 else "globex")
    head = warden.log.head().seq
    whole = warden.replay(seq=head, caller=OPERATOR)
    seen, after = [], None
    while True:
        page = warden.replay(seq=head, limit=3, after=after, caller=OPERATOR)
        seen.extend(page["memories"])
        after = page["next"]
        if after is None:
            break
    assert seen == whole["memories"] and len(seen) == 7
    assert "".join(warden.replay_stream(seq=head, caller=OPERATOR)) == canonical_json(whole)
    with pytest.raises(ValueError, match="after"):
        warden.replay(seq=head, limit=3, after="not-a-cursor", caller=OPERATOR)
    with pytest.raises(ValueError, match="limit"):
        warden.replay(seq=head, limit=0, caller=OPERATOR)
