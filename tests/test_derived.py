"""Derived memories: a summary never outlives its evidence."""

from __future__ import annotations

from pathlib import Path

import pytest
from memwarden.engine import OPERATOR, InvalidInput, Scheduler, Warden, readback_records
from memwarden.events import FrozenClock, MemoryExpired, MemorySaved, ParentRef, Scope, content_checksum

from .backends import Backend
from .conftest import Cli


@pytest.fixture
def tree(warden: Warden, tmp_path: Path) -> Warden:
    """evidence (a file) -> summary -> conclusion"""
    source = tmp_path / "evidence.txt"
    source.write_text("3분기 매출 12% 증가", encoding="utf-8")
    warden.save(
        memory_id="evidence",
        kind="research_result",
        summary="3분기 매출 보고서",
        content="3분기 매출 12% 증가",
        source_url=source.as_uri(),
        scope={"tenant": "acme"},
        ttl="1h",
        caller=OPERATOR,
    )
    warden.save(
        memory_id="summary",
        kind="external_fact",
        summary="매출이 늘었다",
        content="매출 증가 추세",
        source_url="agent://summariser",
        scope={"tenant": "acme"},
        derived_from=["evidence"],
        ttl="6h",
        caller=OPERATOR,
    )
    warden.save(
        memory_id="conclusion",
        kind="external_fact",
        summary="채용을 늘려도 된다",
        content="채용 확대 가능",
        source_url="agent://planner",
        scope={"tenant": "acme"},
        derived_from=["summary"],
        ttl="6h",
        caller=OPERATOR,
    )
    warden.evidence_file = source  # type: ignore[attr-defined]
    return warden


def reasons(w: Warden) -> dict[str, tuple[bool, str | None]]:
    return {
        m: (w.get(m, caller=OPERATOR).usable, w.get(m, caller=OPERATOR).reason)
        for m in ("evidence", "summary", "conclusion")
    }


def test_a_healthy_tree_is_usable_and_explained(tree: Warden, run_cli: Cli) -> None:
    assert reasons(tree) == {"evidence": (True, None), "summary": (True, None), "conclusion": (True, None)}
    assert tree.get("conclusion", caller=OPERATOR).derived_from == [{"memory_id": "summary", "version": 1}]
    data = tree.explain("conclusion", caller=OPERATOR)
    assert data["derivation"]["parents"][0]["memory_id"] == "summary"
    assert data["derivation"]["parents"][0]["parents"][0] == {
        "memory_id": "evidence",
        "version": 1,
        "status": "usable",
        "usable": True,
        "reason": None,
        "parents": [],
    }


@pytest.mark.parametrize("how", ["revoked", "erased", "invalidated", "quarantined"])
def test_evidence_taken_away_invalidates_everything_above_in_the_same_commit(
    tree: Warden, how: str, backend: Backend
) -> None:
    head = tree.log.head().seq
    if how == "revoked":
        result = tree.revoke({"ids": ["evidence"]}, reason="leak", caller=OPERATOR)
        assert (result.covered, result.cascaded) == (1, 2)
    elif how == "erased":
        tree.erase(memory_id="evidence", reason="asked", caller=OPERATOR)
    elif how == "invalidated":
        tree.evidence_file.write_text("3분기 매출 3% 감소", encoding="utf-8")  # type: ignore[attr-defined]
        assert tree.verify("evidence", caller=OPERATOR).outcome == "changed"
    else:
        backend.replace_text(tree.path, content_checksum("3분기 매출 12% 증가"), b"\x00")
        tree.evidence_file.write_text("gone", encoding="utf-8")  # type: ignore[attr-defined]  # no resync
        assert tree.get("evidence", caller=OPERATOR).reason == "integrity_failed"
    new = list(tree.log.read(after_seq=head))
    invalidations = [
        (e.payload["memory_id"], e.payload["reason"], e.payload.get("caused_by"))
        for e in new
        if e.type == "memory.invalidated" and e.payload["reason"] == "derived_from_unusable"
    ]
    assert [m for m, _, _ in invalidations] == ["summary", "conclusion"]
    # each names the event that took its evidence away
    seq_of = {e.payload.get("memory_id"): e.seq for e in new}
    assert invalidations[1][2] == seq_of["summary"]
    for memory_id in ("summary", "conclusion"):
        view = tree.get(memory_id, caller=OPERATOR)
        assert not view.usable and view.reason == "derived_from_unusable" and view.action == "treat_as_unknown"
    assert "evidence" in (tree.get("summary", caller=OPERATOR).detail or "")
    hidden = {v.memory_id: v.reason for v in tree.query(tenant="acme", include_unusable=True, caller=OPERATOR)}
    assert hidden["conclusion"] == "derived_from_unusable"
    assert tree.query(tenant="acme", caller=OPERATOR) == []
    assert tree.check_projections(caller=OPERATOR).ok


def test_expired_evidence_waits_for_reverification(tree: Warden, clock: FrozenClock) -> None:
    clock.advance("2h")  # evidence lives 1h, the others 6h
    assert reasons(tree) == {
        "evidence": (False, "expired"),
        "summary": (False, "expired_evidence"),
        "conclusion": (False, "expired_evidence"),
    }
    assert tree.get("conclusion", caller=OPERATOR).action == "reverify"
    Scheduler(tree).run_once()  # the expiry is written; nothing is invalidated for good
    assert not any(e.type == "memory.invalidated" for e in tree.log.read())
    assert tree.verify("evidence", caller=OPERATOR).outcome == "verified"
    assert reasons(tree) == {"evidence": (True, None), "summary": (True, None), "conclusion": (True, None)}


def test_verify_walks_down_to_the_evidence(tree: Warden, clock: FrozenClock) -> None:
    clock.advance("7h")  # everything expired
    result = tree.verify("conclusion", caller=OPERATOR)
    assert result.outcome == "verified" and "summary: verified" in (result.detail or "")
    verified = [e.payload["memory_id"] for e in tree.log.read(types=("memory.verified",))]
    assert verified == ["evidence", "summary", "conclusion"]  # evidence first
    assert reasons(tree) == {"evidence": (True, None), "summary": (True, None), "conclusion": (True, None)}
    assert tree.get("conclusion", caller=OPERATOR).expires_at == "2026-01-05T22:00:00.000000Z"  # its own 6h, from now


def test_verify_takes_shared_evidence_first_whatever_order_it_is_named_in(tree: Warden, clock: FrozenClock) -> None:
    # "verdict" names the evidence before the summary drawn from it: the
    # evidence must still be verified before the summary is re-issued
    tree.save(
        memory_id="verdict",
        kind="external_fact",
        summary="판단",
        content="채용 확대",
        source_url="agent://judge",
        scope={"tenant": "acme"},
        derived_from=["evidence", "summary"],
        ttl="6h",
        caller=OPERATOR,
    )
    clock.advance("7h")  # everything expired
    result = tree.verify("verdict", caller=OPERATOR)
    assert result.outcome == "verified", result
    verified = [e.payload["memory_id"] for e in tree.log.read(types=("memory.verified",))]
    assert verified == ["evidence", "summary", "verdict"]
    assert tree.get("verdict", caller=OPERATOR).usable


def test_verifying_a_chain_decides_each_memory_a_bounded_number_of_times(
    warden: Warden, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Re-issuing a chain judges each child from its parents' new state: the
    gate's decisions grow with the chain's length, not with its square (a
    chain of 1,200 took 29 s to verify on PostgreSQL when each re-issue
    judged the whole chain below it again)."""
    import memwarden.engine._derivation as derivation

    decided = 0
    original = derivation.decide

    def counting(*args: object, **kwargs: object) -> object:
        nonlocal decided
        decided += 1
        return original(*args, **kwargs)  # type: ignore[arg-type]

    warden.fetchers.register("same", lambda row: f"c{row['memory_id']}")
    counts = {}
    for length in (20, 80):
        for n in range(length):
            warden.save(
                memory_id=f"L{length}-{n}",
                kind="permission",
                summary="s",
                content=f"cL{length}-{n}",
                source_url="callable:same",
                scope={"tenant": "acme"},
                derived_from=[f"L{length}-{n - 1}"] if n else (),
                ttl="1h",
                caller=OPERATOR,
            )
        clock.advance("2h")  # the whole chain past its expiry
        monkeypatch.setattr(derivation, "decide", counting)
        decided = 0
        result = warden.verify(f"L{length}-{length - 1}", caller=OPERATOR)
        counts[length] = decided
        monkeypatch.setattr(derivation, "decide", original)
        assert result.outcome == "verified", result
        assert all(warden.get(f"L{length}-{n}", caller=OPERATOR).usable for n in range(length))
    assert counts[80] <= 4 * counts[20] + 8, counts


def test_verify_with_changed_evidence_never_keeps_the_summary(tree: Warden) -> None:
    tree.evidence_file.write_text("다른 내용", encoding="utf-8")  # type: ignore[attr-defined]
    result = tree.verify("conclusion", caller=OPERATOR)
    assert result.outcome == "evidence_unusable"
    assert tree.get("evidence", caller=OPERATOR).reason == "source_changed"
    assert tree.get("summary", caller=OPERATOR).reason == "derived_from_unusable"
    assert tree.get("conclusion", caller=OPERATOR).reason == "derived_from_unusable"


def test_a_new_version_of_the_evidence_leaves_old_conclusions_unusable(tree: Warden) -> None:
    tree.save(
        memory_id="evidence",
        kind="research_result",
        summary="새 보고서",
        content="새 내용",
        source_url="https://src.example/new",
        scope={"tenant": "acme"},
        ttl="1h",
        caller=OPERATOR,
    )
    view = tree.get("summary", caller=OPERATOR)
    assert not view.usable and view.reason == "derived_from_unusable" and "version 2" in (view.detail or "")


def test_diamond(warden: Warden) -> None:
    def save(memory_id: str, parents: list[str]) -> None:
        warden.save(
            memory_id=memory_id,
            kind="external_fact",
            summary=memory_id,
            content=f"{memory_id} text",
            source_url="https://e",
            scope={"tenant": "acme"},
            derived_from=parents,
            caller=OPERATOR,
        )

    save("root", [])
    save("left", ["root"])
    save("right", ["root"])
    save("top", ["left", "right"])
    assert warden.get("top", caller=OPERATOR).usable
    result = warden.revoke({"ids": ["root"]}, reason="r", caller=OPERATOR)
    assert (result.covered, result.cascaded) == (1, 3)
    top_events = [e for e in warden.log.memory_events("acme", "top") if e.type == "memory.invalidated"]
    assert len(top_events) == 1  # reached twice, invalidated once
    assert {m: warden.get(m, caller=OPERATOR).reason for m in ("left", "right", "top")} == dict.fromkeys(
        ("left", "right", "top"), "derived_from_unusable"
    )


def test_saving_on_bad_evidence_is_refused(tree: Warden, run_cli: Cli) -> None:
    base = dict(kind="external_fact", summary="s", content="c", source_url="https://e", scope={"tenant": "acme"})
    with pytest.raises(InvalidInput, match="derived_from: parent 'nothing' does not exist"):
        tree.save(memory_id="x", derived_from=["nothing"], **base, caller=OPERATOR)
    tree.revoke({"ids": ["summary"]}, reason="r", caller=OPERATOR)
    with pytest.raises(InvalidInput, match=r"parent 'summary' is not usable \(revoked\)"):
        tree.save(memory_id="x", derived_from=["summary"], **base, caller=OPERATOR)
    with pytest.raises(InvalidInput, match="derived from itself"):
        tree.save(memory_id="evidence", derived_from=["evidence"], **base, caller=OPERATOR)
    head = tree.log.head().seq
    result = run_cli(
        "save",
        "--id",
        "x",
        "--kind",
        "external_fact",
        "--summary",
        "s",
        "--content",
        "c",
        "--source-url",
        "https://e",
        "--tenant",
        "acme",
        "--derived-from",
        "nothing",
    )
    assert result.exit_code == 2 and "derived_from" in result.stderr
    assert tree.log.head().seq == head


def test_cycles_are_refused(warden: Warden) -> None:
    base = dict(kind="external_fact", summary="s", content="c", source_url="https://e", scope={"tenant": "acme"})
    warden.save(memory_id="a", **base, caller=OPERATOR)
    warden.save(memory_id="b", derived_from=["a"], **base, caller=OPERATOR)
    warden.save(memory_id="c", derived_from=["b"], **base, caller=OPERATOR)
    with pytest.raises(InvalidInput, match="cycle"):
        warden.save(memory_id="a", derived_from=["c"], **base, caller=OPERATOR)
    assert warden.get("a", caller=OPERATOR).version == 1


def test_many_parents(warden: Warden) -> None:
    base = dict(kind="external_fact", content="c", source_url="https://e", scope={"tenant": "acme"})
    for i in range(200):
        warden.save(memory_id=f"p{i}", summary=f"p{i}", **base, caller=OPERATOR)
    warden.save(memory_id="child", summary="child", derived_from=[f"p{i}" for i in range(200)], **base, caller=OPERATOR)
    assert warden.get("child", caller=OPERATOR).usable
    warden.revoke({"ids": ["p137"]}, reason="r", caller=OPERATOR)
    assert "p137" in (warden.get("child", caller=OPERATOR).detail or "")


def test_a_parent_with_ten_thousand_descendants_revoked_in_one_commit(warden: Warden, run_cli: Cli) -> None:
    warden.save(
        memory_id="root",
        kind="external_fact",
        summary="root",
        content="root",
        source_url="https://e",
        scope={"tenant": "acme"},
        caller=OPERATOR,
    )
    with warden.transaction() as tx:
        for i in range(10_000):
            warden.texts.put("acme", f"d{i}", 1, f"derived {i}", "derived")
        tx.append(
            [
                MemorySaved(
                    memory_id=f"d{i}",
                    version=1,
                    kind="external_fact",
                    summary=f"derived {i}",
                    content_checksum=content_checksum("derived"),
                    content_length=7,
                    source_url="agent://x",
                    fetched_at="2026-01-05T09:00:00Z",
                    expires_at="2026-01-06T09:00:00Z",
                    scope=Scope(tenant="acme", project=f"p{i % 10}"),
                    derived_from=(ParentRef(memory_id="root" if i < 5000 else f"d{i - 5000}", version=1),),
                )
                for i in range(10_000)
            ]
        )
    assert len(warden.query(tenant="acme", limit=10_000, caller=OPERATOR)) == 10_000  # (of 10,001)
    result = warden.revoke({"ids": ["root"]}, reason="poisoned source", caller=OPERATOR)
    assert (result.covered, result.cascaded) == (1, 10_000)
    assert warden.query(tenant="acme", limit=10_000, caller=OPERATOR) == []
    readback = Scheduler(warden).read_back(result.revocation_id, caller=OPERATOR)
    assert readback["readback_status"] == "confirmed"
    records = readback_records(warden, result.revocation_id, caller=OPERATOR)["records"]
    assert records[-1]["covered"] == 10_001  # the read-back asked about every descendant too
    assert warden.check_projections(caller=OPERATOR).ok


def test_replay_and_explain_judge_the_evidence_as_it_was(tree: Warden, clock: FrozenClock) -> None:
    before = tree.now()
    clock.advance("1m")
    tree.revoke({"ids": ["evidence"]}, reason="r", caller=OPERATOR)
    assert {m["memory_id"] for m in tree.replay(as_of=before, caller=OPERATOR)["memories"]} == {
        "evidence",
        "summary",
        "conclusion",
    }
    assert tree.replay(as_of=tree.now(), caller=OPERATOR)["memories"] == []
    then = tree.explain("conclusion", as_of=before, caller=OPERATOR)
    assert then["usable"] is True and then["derivation"]["parents"][0]["usable"] is True
    now = tree.explain("conclusion", caller=OPERATOR)
    assert now["usable"] is False and now["reason"] == "derived_from_unusable"
    assert now["derivation"]["parents"][0]["parents"][0]["status"] == "revoked"
    assert [h["event"] for h in now["history"]][-1] == "memory.invalidated"


def test_expiry_event_then_parent_reverified_restores_children(tree: Warden, clock: FrozenClock) -> None:
    clock.advance("90m")
    tree.log.append([MemoryExpired(tenant="acme", memory_id="evidence", version=1, expires_at="2026-01-05T10:00:00Z")])
    assert tree.get("summary", caller=OPERATOR).reason == "expired_evidence"
    tree.verify("evidence", caller=OPERATOR)
    assert tree.get("conclusion", caller=OPERATOR).usable


def test_a_cascade_asks_for_each_depths_children_once(tree: Warden, backend: Backend) -> None:
    """The walk goes to every depth before it appends: the invalidations it
    appends are not walked again when they come back to the cascade."""
    with backend.statements(tree) as seen:
        result = tree.revoke({"ids": ["evidence"]}, reason="poisoned", caller=OPERATOR)
    asked = [sql for sql in seen if "FROM derivations d JOIN memories m" in sql]
    # evidence -> summary, summary -> conclusion, conclusion -> nothing
    assert len(asked) == 3, asked
    assert result.cascaded == 2
    assert reasons(tree) == {
        "evidence": (False, "revoked"),
        "summary": (False, "derived_from_unusable"),
        "conclusion": (False, "derived_from_unusable"),
    }
