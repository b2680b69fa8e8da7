"""A plain-Python reference model of the gate against the engine, over random
histories (hypothesis), on every backend. After every step: each memory's
answer equals the model's, the inline view equals a full rebuild, and
equals a replay at head."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test
from memwarden.engine import OPERATOR, Fetchers, RevokedScope, Warden
from memwarden.events import MemoryExpired, format_ts

from ._sizes import larger
from .backends import Backend
from .conftest import scratch_warden
from .test_projections import comparable, live_rows, replay_rows

IDS = [f"m{i}" for i in range(6)]
TENANTS = ["acme", "globex"]
PROJECTS = ["p1", "p2"]
USERS = [None, "kim", "lee"]


@dataclass
class Ref:
    """What the model knows of one memory."""

    version: int
    tenant: str
    project: str
    user: str | None
    fetched: datetime
    expires: datetime
    policy_version: int
    content: str
    status: str = "ok"  # ok | expired | unknown | invalidated | derived_invalid | revoked | erased
    parents: tuple[tuple[str, int], ...] = ()


def reference_gate(
    ref: Ref, now: datetime, policy_version: int, refs: dict[str, Ref] | None = None
) -> tuple[bool, str | None]:
    """The rule as DESIGN.md and the derivation issue state it, written
    without the engine's code."""
    if ref.status == "erased":
        return False, "erased"
    if ref.status == "revoked":
        return False, "revoked"
    if ref.status == "invalidated":
        return False, "source_changed"
    if ref.status == "derived_invalid":
        return False, "derived_from_unusable"
    if ref.status == "unknown":
        return False, "unknown"
    if ref.policy_version != policy_version:
        return False, "policy_changed"
    waiting = False
    for parent_id, version in ref.parents:
        parent = (refs or {}).get(parent_id)
        if parent is None or parent.version != version:
            return False, "derived_from_unusable"
        usable, reason = reference_gate(parent, now, policy_version, refs)
        if not usable:
            if reason in ("expired", "expired_evidence"):
                waiting = True
            else:
                return False, "derived_from_unusable"
    if waiting:
        return False, "expired_evidence"
    if ref.status == "expired" or now >= ref.expires:
        return False, "expired"
    return True, None


class GateMachine(RuleBasedStateMachine):
    def __init__(self, backend: Backend, tmp_path: Path) -> None:
        super().__init__()
        self.sources: dict[str, Any] = {}
        fetchers = Fetchers()
        fetchers.register("src", self._fetch)
        self.w: Warden = scratch_warden(backend, tmp_path, fetchers=fetchers)
        self.refs: dict[str, Ref] = {}
        self.policy = 1
        self.revocations: list[tuple[dict[str, Any], datetime]] = []
        self.horizon: dict[str, datetime] = {}  # memory id -> the latest revocation that covered a version
        self.counter = 0

    def _fetch(self, row: dict[str, Any]) -> str:
        answer = self.sources[row["memory_id"]]
        if isinstance(answer, Exception):
            raise answer
        return answer

    @property
    def now(self) -> datetime:
        return self.w.clock.now()

    def _covered(self, selector: dict[str, Any], ref: Ref, memory_id: str) -> bool:
        return all(
            (k != "tenant" or v == ref.tenant)
            and (k != "project" or v == ref.project)
            and (k != "user" or v == ref.user)
            and (k != "ids" or memory_id in v)
            for k, v in selector.items()
        )

    @rule(
        memory_id=st.sampled_from(IDS),
        tenant=st.sampled_from(TENANTS),
        project=st.sampled_from(PROJECTS),
        user=st.sampled_from(USERS),
        ttl=st.integers(10, 300),
        age=st.integers(0, 120),
    )
    def save(self, memory_id: str, tenant: str, project: str, user: str | None, ttl: int, age: int) -> None:
        self.counter += 1
        if memory_id in self.refs:
            tenant = self.refs[memory_id].tenant  # one id, one tenant here (test_isolation shares ids)
        content = f"{memory_id} 내용 {self.counter}"
        fetched = self.now - timedelta(minutes=age)
        ref = Ref(
            self.refs[memory_id].version + 1 if memory_id in self.refs else 1,
            tenant,
            project,
            user,
            fetched,
            fetched + timedelta(minutes=ttl),
            self.policy,
            content,
        )
        old = self.refs.get(memory_id)
        blocked = any(fetched <= eff and self._covered(sel, ref, memory_id) for sel, eff in self.revocations)
        # a revocation that ever covered a version of this id holds any later
        # fetch by its effective time, whatever scope the new version claims
        blocked = blocked or (memory_id in self.horizon and fetched <= self.horizon[memory_id])
        scope = {"tenant": tenant, "project": project, **({"user": user} if user else {})}
        try:
            self.w.save(
                memory_id=memory_id,
                kind="external_fact",
                summary=f"요약 {memory_id}",
                content=content,
                source_url="callable:src",
                scope=scope,
                fetched_at=fetched,
                ttl=timedelta(minutes=ttl),
                caller=OPERATOR,
            )
        except RevokedScope:
            assert blocked
            return
        # an erased memory saved again is a new version with its own text
        assert not blocked, (old, ref)
        self.refs[memory_id] = ref
        self.sources[memory_id] = content

    @rule(minutes=st.integers(1, 200))
    def advance(self, minutes: int) -> None:
        self.w.clock.advance(timedelta(minutes=minutes))  # type: ignore[attr-defined]

    @precondition(lambda self: self.refs)
    @rule(data=st.data())
    def expire(self, data: st.DataObject) -> None:
        memory_id = data.draw(st.sampled_from(sorted(self.refs)))
        ref = self.refs[memory_id]
        if ref.expires > self.now:
            return  # the scheduler only writes an expiry once it has passed
        self.w.log.append(
            [MemoryExpired(tenant=ref.tenant, memory_id=memory_id, version=ref.version, expires_at=ref.expires)]
        )
        if ref.status == "ok":
            ref.status = "expired"

    @precondition(lambda self: any(not r.parents for r in self.refs.values()))
    @rule(data=st.data(), outcome=st.sampled_from(["same", "changed", "fail"]))
    def verify(self, data: st.DataObject, outcome: str) -> None:
        memory_id = data.draw(st.sampled_from(sorted(m for m, r in self.refs.items() if not r.parents)))
        ref = self.refs[memory_id]
        self.sources[memory_id] = {
            "same": ref.content,
            "changed": ref.content + " (수정)",
            "fail": OSError("source down"),
        }[outcome]
        result = self.w.verify(memory_id, caller=OPERATOR)
        if ref.status in ("erased", "revoked"):
            assert result.outcome == ref.status
            return
        if outcome == "same":
            assert result.outcome == "verified"
            lifetime = ref.expires - ref.fetched
            ref.fetched, ref.expires = self.now, self.now + max(lifetime, timedelta(seconds=1))
            ref.policy_version, ref.status = self.policy, "ok"
        elif outcome == "changed":
            assert result.outcome == "changed"
            ref.status = "invalidated"
            self._cascade({memory_id})
        else:
            assert result.outcome == "failed"
            ref.status = "unknown"

    @rule(kind=st.sampled_from(["tenant", "project", "user", "ids"]), data=st.data())
    def revoke(self, kind: str, data: st.DataObject) -> None:
        if kind == "tenant":
            selector: dict[str, Any] = {"tenant": data.draw(st.sampled_from(TENANTS))}
        elif kind == "project":
            selector = {"tenant": data.draw(st.sampled_from(TENANTS)), "project": data.draw(st.sampled_from(PROJECTS))}
        elif kind == "user":
            selector = {"user": data.draw(st.sampled_from(["kim", "lee"]))}
        else:
            selector = {"ids": data.draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique=True))}
        effective = self.now
        result = self.w.revoke(selector, reason="test", caller=OPERATOR)
        covered: set[str] = set()
        for memory_id, ref in self.refs.items():
            if (
                ref.status not in ("erased", "revoked")
                and ref.fetched <= effective
                and self._covered(selector, ref, memory_id)
            ):
                ref.status = "revoked"
                covered.add(memory_id)
                self.horizon[memory_id] = max(self.horizon.get(memory_id, effective), effective)
        assert result.covered == len(covered)
        assert result.cascaded == self._cascade(covered)
        self.revocations.append((selector, effective))

    def _cascade(self, roots: set[str]) -> int:
        """Everything drawn from ``roots`` that is not already out is invalidated."""
        count = 0
        while roots:
            nxt: set[str] = set()
            for memory_id, ref in sorted(self.refs.items()):
                if ref.status in ("erased", "revoked", "invalidated", "derived_invalid"):
                    continue
                if any(p in roots for p, _ in ref.parents):
                    ref.status = "derived_invalid"
                    nxt.add(memory_id)
                    count += 1
            roots = nxt
        return count

    @rule()
    def raise_policy(self) -> None:
        self.policy += 1
        self.w.set_policy("default", self.policy, caller=OPERATOR)

    @precondition(lambda self: self.refs)
    @rule(data=st.data())
    def erase(self, data: st.DataObject) -> None:
        memory_id = data.draw(st.sampled_from(sorted(self.refs)))
        already = self.refs[memory_id].status == "erased"
        assert self.w.erase(memory_id=memory_id, reason="request", caller=OPERATOR).erased == (0 if already else 1)
        self.refs[memory_id].status = "erased"
        if not already:
            self._cascade({memory_id})

    @invariant()
    def every_answer_matches_the_model(self) -> None:
        for memory_id, ref in self.refs.items():
            view = self.w.get(memory_id, caller=OPERATOR)
            assert (view.usable, view.reason) == reference_gate(ref, self.now, self.policy, self.refs), memory_id
            assert (view.content == ref.content) if view.usable else view.content is None
        for tenant in TENANTS:
            usable = {v.memory_id for v in self.w.query(tenant=tenant, caller=OPERATOR)}
            expected = {
                m for m, r in self.refs.items() if r.tenant == tenant and reference_gate(r, self.now, self.policy)[0]
            }
            assert usable == expected

    @invariant()
    def inline_equals_rebuild_equals_replay(self) -> None:
        assert self.w.check_projections(caller=OPERATOR).ok
        head = self.w.log.head().seq
        assert comparable(replay_rows(self.w, head)) == comparable(live_rows(self.w))
        at_head = {m["memory_id"] for m in self.w.replay(seq=head, caller=OPERATOR)["memories"]} if head else set()
        when = self.w.log.get(head).recorded_at if head else format_ts(self.now)
        expected = {m for m, r in self.refs.items() if reference_gate(r, datetime.fromisoformat(when), self.policy)[0]}
        assert at_head == expected

    def teardown(self) -> None:
        assert self.w.audit_verify(caller=OPERATOR)["ok"]
        self.w.close()


# --runslow runs hundreds of generated histories: minutes on PostgreSQL
@pytest.mark.timeout(larger(120, 1800))
def test_the_engine_answers_as_the_reference_model(backend: Backend, tmp_path: Path) -> None:
    # PostgreSQL's examples cost a round trip per read: fewer in the default run
    sqlite = backend.name == "sqlite"
    run_state_machine_as_test(
        lambda: GateMachine(backend, tmp_path),  # type: ignore[arg-type]  # a factory serves as the class
        settings=settings(
            max_examples=larger(40, 100) if sqlite else larger(6, 60),
            stateful_step_count=30 if sqlite else larger(10, 30),
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
