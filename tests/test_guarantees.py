"""The four promises against the attacks that broke them, each run as it
was reported (README, "Guarantees"), on both backends: a revocation naming
a memory saved with a future ``fetched_at``, an old export imported after
an erasure, a re-chained export that un-retires a policy, what an agent key
receives of a memory it may not use, a checksum after erasure, event ids
across tenants, and a migration into a store that holds keys."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from memwarden.engine import OPERATOR, KeyStore, Principal, Warden
from memwarden.events import (
    FrozenClock,
    JsonlEventLog,
    PolicyVersionChanged,
    content_checksum,
    read_verified,
    write_export,
)

from .backends import Backend
from .conftest import Cli, agent_key, save_memory

TA = agent_key("ta")


def test_a_fetch_claimed_in_the_future_does_not_escape_a_revocation_naming_it(
    warden: Warden, clock: FrozenClock
) -> None:
    ahead = clock.now() + timedelta(minutes=4, seconds=50)  # inside the clock skew allowed
    saved = save_memory(warden, "poison", tenant="ta", fetched_at=ahead, caller=TA)
    assert saved.seq == 1
    revoked = warden.revoke({"tenant": "ta", "ids": ["poison"]}, reason="poisoned", caller=OPERATOR)
    assert revoked.covered == 1
    view = warden.get("poison", caller=TA)
    assert not view.usable and view.reason == "revoked"
    # the fetch was recorded as the moment it was recorded, not the claim
    assert view.fetched_at == "2026-01-05T09:00:00.000000Z"
    # saved again with the same claim: still blocked (its fetch is not after the revocation)
    with pytest.raises(PermissionError, match="revocation"):
        save_memory(warden, "poison", tenant="ta", fetched_at=ahead, caller=TA)
    clock.advance("1s")  # a real fetch after the revocation may come back
    assert save_memory(warden, "poison", tenant="ta", caller=TA).version == 2
    assert warden.get("poison", caller=TA).usable
    # coverage is by position: a revocation whose effective time is before
    # every fetch still covers every version recorded before it
    earlier = warden.revoke(
        {"tenant": "ta"}, reason="backdated", effective_at=clock.now() - timedelta(hours=1), caller=OPERATOR
    )
    assert earlier.covered == 1 and warden.get("poison", caller=TA).reason == "revoked"


def test_a_fetch_too_far_ahead_is_refused_on_every_path(warden: Warden, clock: FrozenClock, tmp_path: Path) -> None:
    far = clock.now() + timedelta(minutes=6)
    with pytest.raises(ValueError, match="fetched_at"):
        save_memory(warden, "m", fetched_at=far)
    record = {
        "memory_id": "r",
        "kind": "external_fact",
        "summary": "요약",
        "source_url": "https://e.example/r",
        "fetched_at": "8999-01-01T00:00:00Z",
        "scope": {"tenant": "acme"},
    }
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 1\.fetched_at"):
        warden.import_records(path, caller=OPERATOR)
    assert warden.head_seq() == 0


def test_an_old_export_cannot_bring_an_erased_text_back(warden: Warden, run_cli: Cli, tmp_path: Path) -> None:
    secret = "door code 4821"
    save_memory(warden, "u1-note", content=secret, summary="the door", scope={"user": "u1"})
    old = tmp_path / "old.jsonl"
    assert run_cli.json("export", str(old)) == {"events": 1}
    assert run_cli.json("erase", "--user", "u1", "--reason", "asked")["erased"] == 1
    refused = run_cli("import", str(old), "--json")
    assert refused.exit_code == 2, refused.output
    assert json.loads(refused.stdout)["error"] == "erased"
    assert all(t.memory_id != "u1-note" for t in warden.texts.all())
    view = warden.get("u1-note", caller=OPERATOR)
    assert view.summary is None and view.content is None and view.checksum is None
    listed = warden.query(tenant="acme", include_unusable=True, caller=OPERATOR)
    assert [(v.memory_id, v.summary, v.checksum) for v in listed] == [("u1-note", None, None)]
    replayed = warden.replay(seq=1, tenant="acme", include_unusable=True, caller=OPERATOR)["memories"]
    assert [(m["summary"], m["checksum"]) for m in replayed] == [(None, None)]
    explained = warden.explain("u1-note", caller=OPERATOR)
    assert explained["checksum"] is None and all(h["checksum"] is None for h in explained["history"])
    assert content_checksum(secret) not in json.dumps(explained)
    assert run_cli.json("audit", "verify")["ok"] and run_cli.json("projections", "check")["ok"]


def _rechained(export: Path, out: Path, event: Any) -> None:
    """``export`` with ``event`` appended and the chain computed again, as
    anyone can (the chain has no secret)."""
    records = list(read_verified(export))
    events_only = out.with_suffix(".events")
    write_export(records, events_only)
    log = JsonlEventLog(events_only, fsync=False)
    log.append([event])
    texts = [json.loads(line)["texts"] for line in export.read_text(encoding="utf-8").splitlines() if '"texts"' in line]
    write_export(list(read_verified(events_only)), out)
    with open(out, "a", encoding="utf-8") as fh:
        for item in texts:
            fh.write(json.dumps({"texts": item}, ensure_ascii=False) + "\n")


def test_a_rechained_export_cannot_unretire_a_policy(warden: Warden, run_cli: Cli, tmp_path: Path) -> None:
    save_memory(warden, "rule")
    warden.set_policy("default", 2, caller=OPERATOR)
    assert warden.get("rule", caller=OPERATOR).reason == "policy_changed"
    export, crafted = tmp_path / "live.jsonl", tmp_path / "crafted.jsonl"
    warden.export(export, caller=OPERATOR)
    _rechained(export, crafted, PolicyVersionChanged(policy="default", version=1, previous_version=2, actor="x"))
    refused = run_cli("import", str(crafted), "--json")
    assert refused.exit_code == 2, refused.output
    answer = json.loads(refused.stdout)
    assert answer["error"] == "import_refused" and "seq 3" in answer["problem"] and "retired" in answer["problem"]
    assert warden.policies(caller=OPERATOR) == {"default": 2}
    assert warden.get("rule", caller=OPERATOR).reason == "policy_changed"
    assert warden.head_seq() == 2


def test_an_import_must_extend_a_kept_head_when_asked(warden: Warden, run_cli: Cli, tmp_path: Path) -> None:
    save_memory(warden, "a")
    head = warden.audit_head(caller=OPERATOR)
    export = tmp_path / "e.jsonl"
    warden.export(export, caller=OPERATOR)
    with Warden(tmp_path / "other.db") as other:
        assert other.import_log(export, against=f"{head['seq']}:{head['hash']}", caller=OPERATOR) == 1
    with Warden(tmp_path / "third.db") as third, pytest.raises(ValueError, match="does not extend"):
        third.import_log(export, against=f"{head['seq']}:{'0' * 64}", caller=OPERATOR)


def test_an_agent_receives_no_text_of_a_memory_it_may_not_use(warden: Warden, backend: Backend) -> None:
    save_memory(warden, "leaked", tenant="ta", summary="the leaked plan", content="the plan itself", caller=TA)
    save_memory(warden, "altered", tenant="ta", summary="altered words", content="altered text", caller=TA)
    warden.revoke({"tenant": "ta", "ids": ["leaked"]}, reason="leak", caller=OPERATOR)
    backend.flip_text(warden.path, content_checksum("altered text"))
    assert warden.get("altered", caller=TA).reason == "integrity_failed"
    for memory_id in ("leaked", "altered"):
        view = warden.get(memory_id, caller=TA)
        assert (view.summary, view.content) == (None, None), memory_id
    hidden = warden.query(tenant="ta", include_unusable=True, caller=TA)
    assert {(v.memory_id, v.summary) for v in hidden} == {("leaked", None), ("altered", None)}
    # staff keep the summary of what they act on
    assert warden.get("leaked", caller=OPERATOR).summary == "the leaked plan"


def test_event_ids_are_per_tenant_and_a_retry_returns_the_first_answer(warden: Warden, clock: FrozenClock) -> None:
    first = save_memory(warden, "m1", tenant="ta", event_id="req-1")
    other = save_memory(warden, "m1", tenant="tb", event_id="req-1")  # another tenant's id: no collision
    assert (first.tenant, other.tenant) == ("ta", "tb") and first.seq != other.seq
    clock.advance("1m")
    again = save_memory(warden, "m1", tenant="ta", event_id="req-1")  # the client retrying
    assert again == first and warden.head_seq() == 2
    with pytest.raises(ValueError, match="already names another event") as refused:
        save_memory(warden, "m2", tenant="ta", event_id="req-1")
    assert "seq" not in str(refused.value) and warden.head_seq() == 2
    many = warden.save_many(
        [
            {
                "memory_id": "m1",
                "kind": "external_fact",
                "summary": "about m1",
                "content": "text of m1 내용",
                "source_url": "https://example.org/m1",
                "scope": {"tenant": "ta", "project": "p1"},
                "ttl": "6h",
                "event_id": "req-1",
            }
        ],
        caller=OPERATOR,
    )
    assert many == [first]


def test_migrate_refuses_a_target_that_holds_keys(warden: Warden, tmp_path: Path, backend: Backend) -> None:
    save_memory(warden, "m")
    target = backend.db(tmp_path, "target.db")
    with Warden(target) as other:
        KeyStore(other).create("agent", tenants=["acme"], caller=OPERATOR)
    with pytest.raises(ValueError, match="already holds 1 API keys"):
        warden.migrate(str(target), caller=OPERATOR)


# -- what an outside attack found after the first fixes ------------------------------------------


def test_a_text_search_never_matches_the_words_of_a_memory_an_agent_may_not_receive(
    warden: Warden, backend: Backend
) -> None:
    """An agent rebuilt a revoked text letter by letter from which prefixes still found it."""
    save_memory(warden, "rv1", tenant="ta", summary="vault", content="vault password hunter2", caller=TA)
    save_memory(warden, "bad", tenant="ta", summary="beta words", content="beta text", caller=TA)
    warden.revoke({"tenant": "ta", "ids": ["rv1"]}, reason="leak", caller=OPERATOR)
    backend.flip_text(warden.path, content_checksum("beta text"))
    assert warden.get("bad", caller=TA).reason == "integrity_failed"
    for word in ("hunt", "hunter2", "vault", "beta"):
        assert warden.query(tenant="ta", text=word, include_unusable=True, caller=TA) == [], word
        assert warden.search_ids(word, caller=TA) == [], word
    # staff still find what they act on
    assert [v.memory_id for v in warden.query(tenant="ta", text="hunt", include_unusable=True, caller=OPERATOR)] == [
        "rv1"
    ]


def test_a_content_filter_never_tests_the_text_of_a_memory_an_agent_may_not_receive(
    warden: Warden, backend: Backend
) -> None:
    """An agent binary-searched a revoked memory's JSON fields with ``where``
    ranges: a right guess listed it, a wrong one did not."""
    save_memory(warden, "wq1", tenant="ta", content='{"pin": "1234", "n": 42}', caller=TA)
    save_memory(warden, "wq2", tenant="ta", content='{"pin": "5678", "n": 7}', caller=TA)
    warden.revoke({"tenant": "ta", "ids": ["wq1"]}, reason="leak", caller=OPERATOR)
    backend.flip_text(warden.path, content_checksum('{"pin": "5678", "n": 7}'))
    assert warden.get("wq2", caller=TA).reason == "integrity_failed"
    for where in ({"pin": "1234"}, {"n": {"$gt": 41}}, {"pin": {"$gt": "1"}}, {"pin": "5678"}, {"n": {"$lt": 8}}):
        assert warden.query(tenant="ta", where=where, include_unusable=True, caller=TA) == [], where
    # staff still find what they act on
    found = warden.query(tenant="ta", where={"pin": "1234"}, include_unusable=True, caller=OPERATOR)
    assert [v.memory_id for v in found] == ["wq1"]


def test_a_retry_after_the_erasure_answers_nothing_of_the_erased_text(warden: Warden) -> None:
    first = save_memory(warden, "m3", tenant="ta", content="the pin is 4821", event_id="ev-m3-1", caller=TA)
    warden.erase(memory_id="m3", tenant="ta", reason="gdpr", caller=OPERATOR)
    for guess in ("the pin is 4821", "the pin is 1111"):  # a right guess and a wrong one answer alike
        with pytest.raises(ValueError, match="already names another event") as refused:
            save_memory(warden, "m3", tenant="ta", content=guess, event_id="ev-m3-1", caller=TA)
        assert first.checksum not in str(refused.value)


def test_a_retry_after_the_revocation_answers_nothing_of_the_revoked_text(warden: Warden) -> None:
    # the first answer carried the checksum, which an agent no longer receives of a revoked
    # memory (get answers null); a right guess and a wrong one answer alike, and nothing comes back
    first = save_memory(warden, "m4", tenant="ta", content="the pin is 4821", event_id="ev-m4-1", caller=TA)
    kept = save_memory(warden, "m5", tenant="ta", project="p2", event_id="ev-m5-1", caller=TA)
    warden.revoke({"tenant": "ta", "ids": ["m4"]}, reason="leak", caller=OPERATOR)
    head = warden.head_seq()
    for guess in ("the pin is 4821", "the pin is 1111"):
        with pytest.raises(ValueError, match="already names another event") as refused:
            save_memory(warden, "m4", tenant="ta", content=guess, event_id="ev-m4-1", caller=TA)
        assert first.checksum not in str(refused.value)
    assert warden.head_seq() == head and warden.get("m4", caller=TA).checksum is None
    # a retry of a save no revocation covers still answers the first answer
    assert save_memory(warden, "m5", tenant="ta", project="p2", event_id="ev-m5-1", caller=TA) == kept


def test_an_agent_cannot_make_a_policy_version_current(warden: Warden, clock: FrozenClock) -> None:
    """A policy's version holds for every tenant: an agent naming a new one
    would retire version 1 for all of them."""
    save_memory(warden, "other-tenant", tenant="tb")
    with pytest.raises(PermissionError, match="only a security key"):
        save_memory(warden, "adopt", tenant="ta", revocation_version="evil-1", caller=TA)
    assert warden.policies(caller=OPERATOR) == {} and warden.get("other-tenant", caller=OPERATOR).usable
    # nor may the local operator's save, once a memory is under version 1 (on a fresh
    # database it adopts the version: tests/test_records.py); policy set does, saying so
    with pytest.raises(ValueError, match="policy set default policy-42-v7"):
        save_memory(warden, "adopt", tenant="ta", revocation_version="policy-42-v7")
    assert warden.policies(caller=OPERATOR) == {} and warden.get("other-tenant", caller=OPERATOR).usable


def test_a_numbered_version_never_goes_down_through_a_key_version(warden: Warden) -> None:
    warden.set_policy("pol", 20, caller=OPERATOR)
    warden.set_policy("pol", "k-interim", caller=OPERATOR)
    with pytest.raises(ValueError, match="only goes up"):
        warden.set_policy("pol", 4, caller=OPERATOR)
    warden.set_policy("pol", 21, caller=OPERATOR)
    assert warden.policies(caller=OPERATOR) == {"pol": 21}
    warden.set_policy("pol", "2_0", caller=OPERATOR)  # a key, not the number 20
    assert warden.policies(caller=OPERATOR) == {"pol": "2_0"}


def test_a_revoked_memory_does_not_come_back_under_another_scope_or_spelling(
    warden: Warden, clock: FrozenClock
) -> None:
    before = clock.now()
    save_memory(warden, "uu", tenant="ta", content="u7 home address", scope={"user": "u7"}, caller=TA)
    warden.revoke({"tenant": "ta", "user": "u7"}, reason="consent withdrawn", caller=OPERATOR)
    clock.advance("1s")
    # the same memory, saved again without the user, from a fetch before the
    # revocation: refused, as the fold would hold it revoked
    with pytest.raises(PermissionError, match="revocation"):
        save_memory(warden, "uu", tenant="ta", content="u7 home address", fetched_at=before, caller=TA)
    view = warden.get("uu", caller=TA)
    assert view.reason == "revoked" and view.version == 1
    # a source revoked by its prefix, named another way
    warden.revoke({"source_prefix": "https://evil.example/"}, reason="poisoned", caller=OPERATOR)
    for n, url in enumerate(
        ["HTTPS://evil.example/x", "https://EVIL.example/x", "https://evil.example:443/x", "https://evil.example./x"]
    ):
        with pytest.raises(PermissionError, match="revocation"):
            save_memory(warden, f"e{n}", tenant="ta", source_url=url, fetched_at=before, caller=TA)
    with pytest.raises(ValueError, match="user info"):
        save_memory(warden, "e9", tenant="ta", source_url="https://u@evil.example/x", caller=TA)


def test_a_bound_key_is_not_told_the_state_of_another_agents_evidence(warden: Warden) -> None:
    tenant_key, bot_b = agent_key("ta"), agent_key("ta", agent="B")
    save_memory(warden, "m1", tenant="ta", scope={"agent": "A"}, caller=tenant_key)
    save_memory(warden, "child", tenant="ta", scope={"agent": "B"}, derived_from=["m1"], caller=tenant_key)
    warden.revoke({"tenant": "ta", "ids": ["m1"]}, reason="leak", caller=OPERATOR)
    seen = warden.get("child", caller=bot_b)
    assert seen.reason == "derived_from_unusable" and "revoked" not in (seen.detail or "")
    explained = warden.explain("child", caller=bot_b)
    assert "revoked" not in json.dumps(explained)
    assert "revoked" in (warden.get("child", caller=tenant_key).detail or ""), "one who may see m1 is told"


def test_an_agent_receives_no_checksum_of_a_memory_it_may_not_use(warden: Warden) -> None:
    saved = save_memory(warden, "rv", tenant="ta", content="secret words", caller=TA)
    warden.revoke({"tenant": "ta", "ids": ["rv"]}, reason="leak", caller=OPERATOR)
    assert warden.get("rv", caller=TA).checksum is None
    assert [v.checksum for v in warden.query(tenant="ta", include_unusable=True, caller=TA)] == [None]
    explained = warden.explain("rv", caller=TA)
    assert explained["checksum"] is None and saved.checksum not in json.dumps(explained)
    assert warden.get("rv", caller=OPERATOR).checksum == saved.checksum


def test_a_time_a_caller_says_has_passed_is_not_far_ahead(warden: Warden) -> None:
    with pytest.raises(ValueError, match="verified_at"):
        save_memory(warden, "m", verified_at="8999-01-01T00:00:00Z")


def test_a_source_prefix_covers_every_spelling_of_its_path(warden: Warden, clock: FrozenClock) -> None:
    # an escaped letter, a dot segment, a doubled or back slash, an escaped
    # Korean path: each names the same resource as the revoked prefix
    spellings = [
        "https://x.example/%73ecret/a",
        "https://x.example/./secret/b",
        "https://x.example//secret/c",
        "https://x.example/other/../secret/d",
        "https://x.example\\secret/e",
        "https://x.example/%2E/secret/f",
    ]
    korean = ["https://x.example/%EB%B9%84%EB%B0%80/g", "https://x.example/비밀/h"]
    for n, url in enumerate(spellings + korean):
        save_memory(warden, f"s{n}", tenant="ta", source_url=url, caller=TA)
    before = clock.now()
    clock.advance("1s")
    first = warden.revoke({"source_prefix": "https://x.example/secret/"}, reason="leaked", caller=OPERATOR)
    second = warden.revoke({"source_prefix": "https://x.example/%eb%b9%84%eb%b0%80"}, reason="leaked", caller=OPERATOR)
    assert first.covered == len(spellings) and second.covered == len(korean)
    assert [v.memory_id for v in warden.query(tenant="ta", caller=TA)] == []
    # and a save fetched before them, under another spelling, is refused
    for n, url in enumerate(["https://X.example:443/%73ecret/new", "https://x.example/./비밀/new"]):
        with pytest.raises(PermissionError, match="revocation"):
            save_memory(warden, f"late{n}", tenant="ta", source_url=url, fetched_at=before, caller=TA)
    assert warden.get("s0", caller=OPERATOR).source_url == "https://x.example/secret/a"


def test_an_agent_is_told_a_revocation_happened_not_who_or_why(warden: Warden) -> None:
    # a revocation by user spans tenants, and its reason is staff's words ("kim left ...")
    save_memory(warden, "k1", tenant="ta", scope={"user": "kim"}, caller=TA)
    security = Principal("key:sec1", "security", ())
    warden.revoke({"user": "kim"}, reason="kim left the globex-secret project", caller=security)
    [step] = [s for s in warden.explain("k1", caller=TA)["history"] if s["event"] == "revocation.issued"]
    assert step["actor"] is None and "globex" not in step["note"] and step["note"].startswith("rev_")
    [staff] = [s for s in warden.explain("k1", caller=OPERATOR)["history"] if s["event"] == "revocation.issued"]
    assert staff["actor"] == "key:key:sec1" and "globex-secret" in staff["note"]
