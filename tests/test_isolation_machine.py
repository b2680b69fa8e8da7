"""Two tenants sharing ids, agent names and texts, acting in any order
(hypothesis): saves, re-saves, revocations, erasures, derivations,
verifications, source changes. Two worlds run side by side: in one both
tenants act, in the other only tenant ``ta`` does. After every step,
everything ``ta`` can observe is the same in both: nothing ``tb`` does
shows through the wall. On every backend: PostgreSQL's worlds are two lent
databases, emptied for each example."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from memwarden.engine import OPERATOR, Fetchers, InvalidInput, MemoryErased, MemoryNotFound, RevokedScope, Warden

from ._sizes import larger
from .backends import Backend
from .conftest import agent_key, scratch_warden

IDS = ["m1", "m:2", "메모"]
TENANTS = ["ta", "tb"]
AGENTS = ["bot", "other"]
TEXTS = ["같은 말 same words", "other words"]
TA = agent_key("ta")
REFUSED = (MemoryErased, RevokedScope, InvalidInput, MemoryNotFound)


class World:
    """One warden with a source per memory (tenant, id) for re-verification."""

    def __init__(self, backend: Backend, tmp_path: Path, name: str) -> None:
        self.sources: dict[tuple[str, str], str] = {}
        fetchers = Fetchers()
        fetchers.register("src", lambda row: self.sources[(row["tenant"], row["memory_id"])])
        self.w: Warden = scratch_warden(backend, tmp_path, name, fetchers=fetchers)

    def act(self, action: str, **kw: Any) -> str:
        """Run one action; its outcome (the kind of refusal, or ok) is observable too."""
        w = self.w
        try:
            if action == "save":
                text = kw["text"]
                self.sources[(kw["tenant"], kw["memory_id"])] = text
                w.save(
                    memory_id=kw["memory_id"],
                    kind="external_fact",
                    summary=f"요약 {text}",
                    content=text,
                    source_url="callable:src",
                    scope={"tenant": kw["tenant"], "agent": kw["agent"]},
                    ttl="1h",
                    derived_from=kw.get("derived_from", ()),
                    caller=OPERATOR,
                )
            elif action == "memory_save":
                w.memory_save(tenant=kw["tenant"], agent="bot", key=kw["key"], content=kw["text"], caller=OPERATOR)
            elif action == "change_source":
                self.sources[(kw["tenant"], kw["memory_id"])] = "changed"
            elif action == "verify":
                w.verify(kw["memory_id"], tenant=kw["tenant"], accept=kw["accept"], caller=OPERATOR)
            elif action == "revoke":
                w.revoke({"tenant": kw["tenant"], "agent": kw["agent"]}, reason="test", caller=OPERATOR)
            elif action == "erase":
                w.erase(memory_id=kw["memory_id"], tenant=kw["tenant"], reason="request", caller=OPERATOR)
            elif action == "advance":
                w.clock.advance(kw["by"])  # type: ignore[attr-defined]
        except REFUSED as exc:
            return type(exc).__name__
        return "ok"

    def seen_by_ta(self) -> dict[str, Any]:
        w = self.w
        out: dict[str, Any] = {}
        for memory_id in IDS:
            try:
                v = w.get(memory_id, caller=TA)
                out[memory_id] = (v.status, v.usable, v.reason, v.version, v.content, v.summary, v.derived_from)
                explained = w.explain(memory_id, caller=TA)
                out[f"{memory_id} history"] = [(h["event"], h["status_after"]) for h in explained["history"]]
                out[f"{memory_id} tree"] = explained["derivation"]
            except MemoryNotFound as exc:
                out[memory_id] = str(exc)
        views = w.query(tenant="ta", include_unusable=True, caller=TA)
        out["query"] = sorted((v.memory_id, v.status, v.reason, v.content) for v in views)
        out["search"] = sorted(v.memory_id for v in w.query(tenant="ta", text="same", caller=TA))
        out["due"] = sorted((d.memory_id, d.reason) for d in w.due(caller=TA))
        out["load"] = [
            (m["key_name"], m["content"]) for m in w.memory_load(tenant="ta", agent="bot", caller=TA)["memories"]
        ]
        return out


class TwoTenants(RuleBasedStateMachine):
    def __init__(self, backend: Backend, tmp_path: Path) -> None:
        super().__init__()
        self.both = World(backend, tmp_path, "both")
        self.alone = World(backend, tmp_path, "alone")

    def run(self, tenant: str, action: str, **kw: Any) -> None:
        outcome = self.both.act(action, tenant=tenant, **kw)
        if tenant == "ta":
            assert self.alone.act(action, tenant=tenant, **kw) == outcome, (action, kw)

    @rule(
        tenant=st.sampled_from(TENANTS),
        memory_id=st.sampled_from(IDS),
        agent=st.sampled_from(AGENTS),
        text=st.sampled_from(TEXTS),
        parent=st.none() | st.sampled_from(IDS),
    )
    def save(self, tenant: str, memory_id: str, agent: str, text: str, parent: str | None) -> None:
        derived = [parent] if parent is not None and parent != memory_id else []
        self.run(tenant, "save", memory_id=memory_id, agent=agent, text=text, derived_from=derived)

    @rule(tenant=st.sampled_from(TENANTS), key=st.sampled_from(["MEMORY.md", "a:b"]), text=st.sampled_from(TEXTS))
    def memory_api_save(self, tenant: str, key: str, text: str) -> None:
        self.run(tenant, "memory_save", key=key, text=text)

    @rule(tenant=st.sampled_from(TENANTS), memory_id=st.sampled_from(IDS))
    def change_source(self, tenant: str, memory_id: str) -> None:
        self.run(tenant, "change_source", memory_id=memory_id)

    @rule(tenant=st.sampled_from(TENANTS), memory_id=st.sampled_from(IDS), accept=st.booleans())
    def verify(self, tenant: str, memory_id: str, accept: bool) -> None:
        self.run(tenant, "verify", memory_id=memory_id, accept=accept)

    @rule(tenant=st.sampled_from(TENANTS), agent=st.sampled_from(AGENTS))
    def revoke(self, tenant: str, agent: str) -> None:
        self.run(tenant, "revoke", agent=agent)

    @rule(tenant=st.sampled_from(TENANTS), memory_id=st.sampled_from(IDS))
    def erase(self, tenant: str, memory_id: str) -> None:
        self.run(tenant, "erase", memory_id=memory_id)

    @rule(by=st.sampled_from(["1m", "2h"]))
    def advance(self, by: str) -> None:
        self.both.act("advance", by=by)
        self.alone.act("advance", by=by)

    @invariant()
    def ta_sees_the_same_in_both_worlds(self) -> None:
        assert self.both.seen_by_ta() == self.alone.seen_by_ta()

    def teardown(self) -> None:
        assert self.both.w.audit_verify(caller=OPERATOR)["ok"] and self.both.w.check_projections(caller=OPERATOR).ok
        self.both.w.close()
        self.alone.w.close()


# --runslow runs hundreds of generated histories: minutes on PostgreSQL
@pytest.mark.timeout(larger(120, 1800))
def test_nothing_one_tenant_does_shows_through_the_wall(backend: Backend, tmp_path: Path) -> None:
    # PostgreSQL's examples cost a round trip per read: fewer in the default run
    sqlite = backend.name == "sqlite"
    run_state_machine_as_test(
        lambda: TwoTenants(backend, tmp_path),  # type: ignore[arg-type]  # a factory serves as the class
        settings=settings(
            max_examples=larger(40, 200) if sqlite else larger(10, 80),
            stateful_step_count=25 if sqlite else larger(12, 25),
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
