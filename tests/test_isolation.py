"""The tenant is the wall: identity is (tenant, memory_id), every path is
confined to the caller's rights, revoked versions stay gone, erasure takes
exactly what it names, and an export restores a working database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memwarden.engine import OPERATOR, AmbiguousMemory, InvalidInput, MemoryIdTaken, MemoryNotFound, Warden
from memwarden.engine._memory_ids import memory_id_of
from memwarden.events import FrozenClock

from .backends import Backend
from .conftest import Cli, agent_key, save_memory

TA = agent_key("ta")
TB = agent_key("tb")


def test_two_tenants_use_one_id_without_touching_each_other(warden: Warden) -> None:
    save_memory(warden, "m1", tenant="ta", content="ta's text")
    save_memory(warden, "m1", tenant="tb", content="tb's text")
    second = save_memory(warden, "m1", tenant="ta", content="ta's text v2")
    assert second.version == 2 and second.tenant == "ta"
    assert warden.get("m1", caller=TB).content == "tb's text"
    assert warden.get("m1", caller=TB).version == 1
    assert warden.get("m1", tenant="ta", caller=OPERATOR).content == "ta's text v2"
    with pytest.raises(AmbiguousMemory, match="name the tenant"):
        warden.get("m1", caller=OPERATOR)  # security: the id is in two of its tenants
    # verify, explain and erase in one tenant leave the other as it was
    warden.erase(memory_id="m1", tenant="ta", reason="request", caller=OPERATOR)
    assert warden.get("m1", tenant="ta", caller=OPERATOR).reason == "erased"
    assert warden.get("m1", tenant="tb", caller=OPERATOR).content == "tb's text"
    assert [h["event"] for h in warden.explain("m1", caller=TB)["history"]] == ["memory.saved"]


def test_a_memory_outside_the_callers_rights_answers_as_one_that_does_not_exist(warden: Warden) -> None:
    save_memory(warden, "secret", tenant="tb")
    errors = []
    for memory_id in ("secret", "never-saved"):
        for call in (
            lambda m: warden.get(m, caller=TA),
            lambda m: warden.verify(m, caller=TA),
            lambda m: warden.explain(m, caller=TA),
        ):
            with pytest.raises(MemoryNotFound) as info:
                call(memory_id)
            errors.append(str(info.value).replace(memory_id, "ID"))
    assert len(set(errors)) == 1  # word for word the same
    assert (
        warden.due(caller=TA) == []
        and warden.query(tenant="tb", include_unusable=True, caller=OPERATOR)[0].status == "usable"
    )


def test_derivation_from_another_tenant_is_refused_as_if_missing(warden: Warden) -> None:
    save_memory(warden, "b3", tenant="tb")
    messages = []
    for parent in ("b3", "nope"):
        with pytest.raises(InvalidInput) as info:
            save_memory(warden, "a-sum", tenant="ta", derived_from=[parent], caller=TA)
        messages.append(str(info.value).replace(parent, "P"))
    assert messages[0] == messages[1] and "does not exist" in messages[0]
    # a security caller (every tenant) still cannot draw across tenants
    with pytest.raises(InvalidInput, match="does not exist"):
        save_memory(warden, "a-sum", tenant="ta", derived_from=["b3"])


def test_a_key_bound_to_one_agent_cannot_take_over_another_agents_memory(warden: Warden) -> None:
    save_memory(warden, "notes", tenant="ta", scope={"agent": "botb"})
    bound = agent_key("ta", agent="bota")
    with pytest.raises(MemoryIdTaken):
        save_memory(warden, "notes", tenant="ta", scope={"agent": "bota"}, caller=bound)
    with pytest.raises(MemoryNotFound):
        warden.get("notes", caller=bound)
    assert (
        warden.get("notes", caller=OPERATOR).version == 1
        and warden.get("notes", caller=OPERATOR).scope["agent"] == "botb"
    )
    with pytest.raises(PermissionError):
        save_memory(warden, "mine", tenant="ta", scope={"agent": "botb"}, caller=bound)


def test_an_agents_event_ids_neither_tell_of_nor_block_another_agents(warden: Warden) -> None:
    """Event ids are an agent's own in its tenant: a bound key can neither
    learn which ids another agent used (a refusal would tell) nor claim
    them first so that the other's saves are refused."""
    a, b = agent_key("ta", agent="bota", key_id="a"), agent_key("ta", agent="botb", key_id="b")
    first = save_memory(warden, "a-notes", tenant="ta", scope={"agent": "bota"}, event_id="EV-1", caller=a)
    probe = save_memory(warden, "b-notes", tenant="ta", scope={"agent": "botb"}, event_id="EV-1", caller=b)
    assert probe.memory_id == "b-notes" and probe.seq != first.seq
    squat = save_memory(warden, "b-more", tenant="ta", scope={"agent": "botb"}, event_id="EV-2", caller=b)
    taken = save_memory(warden, "a-more", tenant="ta", scope={"agent": "bota"}, event_id="EV-2", caller=a)
    assert taken.memory_id == "a-more" and taken.seq != squat.seq
    # within one agent an id still names one save: its retry answers the first
    assert save_memory(warden, "a-notes", tenant="ta", scope={"agent": "bota"}, event_id="EV-1", caller=a) == first
    with pytest.raises(InvalidInput, match="event_id"):
        save_memory(warden, "a-blank", tenant="ta", scope={"agent": "bota"}, event_id=" ", caller=a)


def test_memory_api_names_cannot_collide() -> None:
    assert memory_id_of("bota:x", "notes") != memory_id_of("bota", "x:notes")
    assert memory_id_of("a%3Ab", "c") != memory_id_of("a:b", "c")
    assert memory_id_of("bot", "MEMORY.md") == "mem:bot:MEMORY.md"  # ids from before stay as they were


def test_no_key_takes_another_agents_memory_api_key_name_first(warden: Warden) -> None:
    bot_b = agent_key("ta", agent="B")
    head = warden.head_seq()
    # B saves, through the memories API, the id A's MEMORY.md would have
    with pytest.raises(InvalidInput, match="Memory API's entry of agent 'A'") as refused:
        save_memory(warden, memory_id_of("A", "notes.md"), tenant="ta", caller=bot_b)
    assert refused.value.field == "memory_id"
    for malformed in ("mem:A", "mem::x", "mem:A:b:c"):
        with pytest.raises(InvalidInput, match="mem:AGENT:KEY"):
            save_memory(warden, malformed, tenant="ta", caller=bot_b)
    assert warden.head_seq() == head
    # so A's key name is A's: its first save is version 1 of its own entry
    saved = warden.memory_save(
        tenant="ta", agent="A", key="notes.md", content="A's notes", caller=agent_key("ta", agent="A")
    )
    assert saved["version"] == 1
    # a tenant-wide key may write A's entry (its rights cover A), in A's scope
    tenant_wide = warden.memory_save(tenant="ta", agent="A", key="notes.md", content="from the tenant", caller=TA)
    assert tenant_wide["version"] == 2
    loaded = warden.memory_load(tenant="ta", agent="A", caller=agent_key("ta", agent="A"))
    assert [m["content"] for m in loaded["memories"]] == ["from the tenant"]


def test_memory_api_same_agent_and_key_in_two_tenants(warden: Warden) -> None:
    first = warden.memory_save(tenant="tb", agent="bot", key="MEMORY.md", content="tb rules", caller=TB)
    attack = warden.memory_save(tenant="ta", agent="bot", key="MEMORY.md", content="attacker", caller=TA)
    assert first["version"] == 1 and attack["version"] == 1
    tb = warden.memory_load(tenant="tb", agent="bot", history=True, caller=TB)["memories"]
    assert [m["content"] for m in tb] == ["tb rules"]
    assert [h["content"] for h in tb[0]["history"]] == ["tb rules"]
    ta = warden.memory_load(tenant="ta", agent="bot", history=True, caller=TA)["memories"]
    assert [h["content"] for h in ta[0]["history"]] == ["attacker"]
    with pytest.raises(PermissionError):
        warden.memory_load(tenant="tb", agent="bot", caller=TA)
    # colons in names stay apart
    warden.memory_save(tenant="ta", agent="bota:x", key="notes", content="one", caller=TA)
    warden.memory_save(tenant="ta", agent="bota", key="x:notes", content="two", caller=TA)
    loaded = warden.memory_load(tenant="ta", agent="bota", caller=TA)["memories"]
    assert [(m["key_name"], m["content"]) for m in loaded] == [("x:notes", "two")]


def test_revoked_versions_are_never_served_again_whatever_is_saved_after(warden: Warden, clock: FrozenClock) -> None:
    warden.memory_save(tenant="ta", agent="bot", key="k", content="first", caller=TA)
    clock.advance("1m")
    warden.memory_save(tenant="ta", agent="bot", key="k", content="second", caller=TA)
    clock.advance("1m")
    warden.revoke({"tenant": "ta", "agent": "bot"}, reason="leak", caller=OPERATOR)
    clock.advance("1m")
    warden.memory_save(tenant="ta", agent="bot", key="k", content="third", caller=TA)
    [entry] = warden.memory_load(tenant="ta", agent="bot", history=True, caller=TA)["memories"]
    assert entry["content"] == "third"
    assert [h["content"] for h in entry["history"]] == [None, None, "third"]
    assert [h["version"] for h in entry["history"]] == [1, 2, 3]


def test_erasure_destroys_exactly_what_it_names(tmp_path: Path, clock: FrozenClock, backend: Backend) -> None:
    db = backend.db(tmp_path, "e.db")
    w = Warden(db, clock=clock)
    common = "SHAREDWORDS 같은 말"
    save_memory(w, "a1", tenant="ta", content="OLDVERSIONTEXT 옛 버전", summary="OLDSUMMARY")
    save_memory(w, "a1", tenant="ta", content=common, summary="ERASEDSUMMARY 요약")
    save_memory(w, "b1", tenant="tb", content=common, summary="KEPTSUMMARY")
    assert w.erase(memory_id="a1", tenant="ta", reason="gdpr", caller=OPERATOR).erased == 1
    assert w.get("b1", tenant="tb", caller=OPERATOR).content == common  # identical words, another memory: kept
    assert w.get("b1", tenant="tb", caller=OPERATOR).summary == "KEPTSUMMARY"
    explained = w.explain("a1", tenant="ta", caller=OPERATOR)
    assert explained["status"] == "erased" and explained["history"][-1]["event"] == "memory.erased"
    assert w.audit_verify(caller=OPERATOR)["ok"] and w.check_projections(caller=OPERATOR).ok
    export = tmp_path / "after.jsonl"
    w.export(export, caller=OPERATOR)
    files = backend.bytes_at_rest(db)
    for gone in ("OLDVERSIONTEXT", "ERASEDSUMMARY", "OLDSUMMARY"):
        assert gone.encode() not in files, gone
        assert gone not in export.read_text(encoding="utf-8"), gone
        assert gone not in json.dumps(w.tail(100, caller=OPERATOR), ensure_ascii=False), (
            gone
        )  # what the events feed serves
    assert common in export.read_text(encoding="utf-8")  # b1's own copy travels
    assert w.query(tenant="ta", text="ERASEDSUMMARY", include_unusable=True, caller=OPERATOR) == []
    w.close()


def test_export_is_a_backup(tmp_path: Path, clock: FrozenClock, backend: Backend) -> None:
    w = Warden(backend.db(tmp_path, "src.db"), clock=clock)
    save_memory(w, "m1", tenant="ta", content="한국어 내용")
    save_memory(w, "m1", tenant="tb", content="other")
    save_memory(w, "gone", tenant="ta", content="to erase")
    save_memory(w, "r", tenant="tb", scope={"permission": "x"})
    w.revoke({"tenant": "tb", "permission": "x"}, reason="r", caller=OPERATOR)
    w.erase(memory_id="gone", reason="request", caller=OPERATOR)
    before = {
        (v.scope["tenant"], v.memory_id): (v.status, v.usable, v.content)
        for t in ("ta", "tb")
        for v in w.query(tenant=t, include_unusable=True, caller=OPERATOR)
    }
    path = tmp_path / "backup.jsonl"
    w.export(path, caller=OPERATOR)
    w.close()
    fresh = Warden(backend.db(tmp_path, "restored.db"), clock=clock)
    assert fresh.import_log(path, caller=OPERATOR) > 0
    after = {
        (v.scope["tenant"], v.memory_id): (v.status, v.usable, v.content)
        for t in ("ta", "tb")
        for v in fresh.query(tenant=t, include_unusable=True, caller=OPERATOR)
    }
    assert after == before and after[("ta", "m1")] == ("usable", True, "한국어 내용")
    assert fresh.audit_verify(caller=OPERATOR)["ok"] and fresh.check_projections(caller=OPERATOR).ok
    fresh.close()


def test_an_export_whose_text_was_altered_is_refused_naming_the_line(
    tmp_path: Path, clock: FrozenClock, backend: Backend
) -> None:
    w = Warden(backend.db(tmp_path, "src.db"), clock=clock)
    save_memory(w, "m1", tenant="ta", content="original")
    path = tmp_path / "backup.jsonl"
    w.export(path, caller=OPERATOR)
    w.close()
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[-1] = lines[-1].replace("original", "altered!")
    path.write_text("".join(lines), encoding="utf-8")
    cli = Cli(backend.db(tmp_path, "target.db"))
    result = cli("import", str(path))
    assert result.exit_code == 2 and f"line {len(lines)}" in result.stderr
    assert cli.json("audit", "head")["seq"] == 0
