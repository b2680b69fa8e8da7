"""The read port's contract (``ViewReader`` in ``memwarden.projections._port``),
written once and run unchanged on every backend (the ``backend`` fixture:
SQLite and PostgreSQL): what each method answers, with named rows, and that
a read under one tenant's or one agent's ``Access`` never returns another's
memories (a wall confined in the statement, not filtered after it)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from memwarden.engine import OPERATOR, Warden
from memwarden.events import FrozenClock, StorageError, StoreFailed
from memwarden.projections import (
    COUNTERS,
    Access,
    Backoff,
    CheckedUnder,
    CoveredRow,
    KeyRow,
    Kin,
    LineageQuery,
    MemoryRow,
    PolicyRow,
    Revocation,
    RevocationQuery,
    RevocationRow,
    RevokedBy,
    Selected,
    TakenAt,
    ViewReader,
    depth_of,
    row_of,
)

from .backends import Backend
from .conftest import START, save_memory

ACME = Access(("acme",))
BOT = Access(("acme",), "bot")  # an agent key of acme bound to the agent "bot"
NOBODY = Access(())
SYSTEM = Access.system()

# (tenant, memory_id) -> agent
MEMORIES = {
    ("acme", "a_bot"): "bot",
    ("acme", "a_other"): "other",
    ("acme", "a_none"): None,
    ("acme", "shared"): "bot",
    ("globex", "shared"): "bot",
    ("globex", "g_bot"): "bot",
}


@pytest.fixture(scope="module")
def store(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Warden]:
    """One store per backend for the whole file: every memory above (the
    word 서울 in each), acme's ``d_bot`` drawn from ``a_bot``, a revocation
    of globex's ``g_bot``, a policy set to 2, initech's ``gone`` erased at
    its second version, a key and a server secret."""
    w = Warden(backend.db(Path(tmp_path_factory.mktemp("port"))), clock=FrozenClock(START))
    for (tenant, memory_id), agent in MEMORIES.items():
        scope: dict[str, Any] = {"agent": agent} if agent else {}
        if memory_id == "a_bot":
            scope["user"] = "kim"
        save_memory(w, memory_id, tenant=tenant, content=f"서울 {memory_id}", scope=scope, kind="external_fact")
    save_memory(w, "d_bot", tenant="acme", scope={"agent": "bot"}, derived_from=["a_bot"])
    w.revoke({"tenant": "globex", "ids": ["g_bot"]}, reason="wrong", caller=OPERATOR)
    w.set_policy("default", 2, caller=OPERATOR)
    save_memory(w, "gone", tenant="initech")
    save_memory(w, "gone", tenant="initech", content="second version")
    w.erase(memory_id="gone", tenant="initech", reason="asked", caller=OPERATOR)
    with w.transaction() as tx:
        tx.view.add_key("k1", "hash1", "agent", ["acme"], "bot", START)
        tx.view.keep_server_secret("s1", b"\x01\x02", START)
    yield w
    w.close()


@pytest.fixture
def view(store: Warden) -> Iterator[ViewReader]:
    with store.reading() as reader:
        yield reader


def allowed(access: Access) -> set[tuple[str, str]]:
    return {k for k, agent in {**MEMORIES, ("acme", "d_bot"): "bot"}.items() if access.allows(k[0], agent)}


# -- the wall: every read that names or lists memories ----------------------------------------

ACCESSES = [pytest.param(a, id=name) for name, a in (("acme", ACME), ("bot", BOT), ("none", NOBODY))]
EVERY_KEY = [*MEMORIES, ("acme", "d_bot")]


@pytest.mark.parametrize("access", ACCESSES)
def test_rows_are_only_those_the_access_allows(view: ViewReader, access: Access) -> None:
    found = view.rows(access, EVERY_KEY)
    assert set(found) == allowed(access)
    assert set(view.rows(SYSTEM, EVERY_KEY)) == set(EVERY_KEY)
    assert row_of(view, access, "globex", "shared") is None


def test_rows_and_memories_are_memory_rows_of_every_column(view: ViewReader) -> None:
    """A memory's row is a ``MemoryRow`` (every column, named and typed),
    keyed by its own (tenant, memory_id), whichever read found it."""
    found = view.rows(SYSTEM, EVERY_KEY)
    assert all(type(row) is MemoryRow and row.key == key for key, row in found.items())
    row = found[("acme", "d_bot")]
    assert (row.tenant, row.memory_id, row.version, row.agent, row.status) == ("acme", "d_bot", 1, "bot", "usable")
    assert [ref["memory_id"] for ref in json.loads(row.derived_from)] == ["a_bot"]
    assert isinstance(row.first_seq, int) and row.first_seq <= row.last_seq
    assert str(row.revocation_version) == "1" and row.policy == "default"
    assert row.checksum.startswith("sha256:") and row.content_length > 0
    listed = view.memories(SYSTEM)
    assert all(type(r) is MemoryRow for r in listed)
    assert {r.key: r for r in listed if r.key in found} == found  # the same row through either read
    assert row_of(view, SYSTEM, "acme", "d_bot") == row
    assert MemoryRow.of(row.as_dict()) == row
    revoked = found[("globex", "g_bot")]
    assert (revoked.status, revoked.revoked_by) == ("revoked", revoked.last_revocation)


@pytest.mark.parametrize("access", ACCESSES)
def test_memories_lists_only_those_the_access_allows(view: ViewReader, access: Access) -> None:
    keys = [r.key for r in view.memories(access)]
    assert keys == sorted(allowed(access))
    # a memory named by id: one per tenant holding it, the other tenant's never
    named = [r.key for r in view.memories(access, memory_id="shared")]
    assert named == sorted(k for k in allowed(access) if k[1] == "shared")
    assert [r.tenant for r in view.memories(SYSTEM, memory_id="shared", limit=2)] == ["acme", "globex"]
    assert [r.memory_id for r in view.memories(SYSTEM, user="kim")] == ["a_bot"]
    assert [r.memory_id for r in view.memories(SYSTEM, tenant="globex")] == ["g_bot", "shared"]


@pytest.mark.parametrize("access", ACCESSES)
def test_a_named_memory_tenant_names_and_text_matches_stay_behind_the_wall(view: ViewReader, access: Access) -> None:
    # a memory named by id alone (``get``): the agent query with no tenant, one row per tenant holding it
    found = view.agent_query(
        tenant=None,
        access=access,
        filters={},
        ids=["shared"],
        id_prefixes=None,
        match=None,
        content=None,
        usable_at=None,
        limit=2,
        offset=0,
    )
    assert sorted((r.tenant, r.memory_id) for r in found) == sorted(k for k in allowed(access) if k[1] == "shared")
    assert all(r.content is not None for r in found)
    assert view.tenant_names(access) == sorted({t for t, _ in allowed(access)})
    matched = view.text_matches(access, ["서울"])
    assert sorted(matched) == sorted(m for _, m in allowed(access) if m != "d_bot")
    assert sorted(view.text_matches(SYSTEM, ["서울"], "globex")) == ["g_bot", "shared"]


@pytest.mark.parametrize("access", ACCESSES)
def test_the_agent_query_stays_behind_the_wall(view: ViewReader, access: Access) -> None:
    for tenant in ("acme", "globex"):
        rows = view.agent_query(
            tenant=tenant,
            access=access,
            filters={},
            ids=None,
            id_prefixes=None,
            match=None,
            content=None,
            usable_at=None,
            limit=100,
            offset=0,
        )
        assert {(r.tenant, r.memory_id) for r in rows} == {k for k in allowed(access) if k[0] == tenant}


@pytest.mark.parametrize("access", ACCESSES)
def test_the_scheduler_reads_stay_behind_the_wall(view: ViewReader, access: Access) -> None:
    later = "2027-01-01T00:00:00Z"  # past every memory's six hours
    expiring = {(e.tenant, e.memory_id) for e in view.past_expiry(access, later, 100)}
    assert expiring == allowed(access) - {("globex", "g_bot")}  # a revoked memory is not usable to expire
    assert {(e.tenant, e.memory_id) for e in view.past_expiry(SYSTEM, later, 100)} == set(EVERY_KEY) - {
        ("globex", "g_bot")
    }
    assert {(d.tenant, d.memory_id) for d in view.due(access, later)} <= allowed(access)
    assert {(d.tenant, d.memory_id) for d in view.due(access, later)} >= allowed(access) - {("globex", "g_bot")}
    # of some kinds only (the scheduler's re-verification): every memory here is an external fact
    assert view.due(access, later, ["external_fact", "preference"]) == view.due(access, later)
    assert view.due(access, later, ["preference"]) == view.due(access, later, []) == []
    texts = list(view.texts(access))
    assert sorted(t.key for t in texts) == sorted(allowed(access))
    assert all(t.content is not None and t.checksum for t in texts)


def test_a_page_of_expiring_memories_goes_on_after_the_last_one(view: ViewReader) -> None:
    later = "2027-01-01T00:00:00Z"
    first = view.past_expiry(SYSTEM, later, 2)
    rest = view.past_expiry(SYSTEM, later, 100, (first[-1].expires_at, first[-1].tenant, first[-1].memory_id))
    assert len(first) == 2 and not {(e.tenant, e.memory_id) for e in first} & {(e.tenant, e.memory_id) for e in rest}


def test_an_access_with_no_tenant_field_cannot_be_written() -> None:
    with pytest.raises(TypeError):
        Access()  # type: ignore[call-arg]
    assert Access.system() == Access(None)


# -- the derivation graph ---------------------------------------------------------------------


def test_lineage_walks_up_down_and_to_children(view: ViewReader) -> None:
    up = view.lineage(LineageQuery("up", (("acme", "d_bot"),)))
    assert up == [Kin("acme", "a_bot")]
    assert depth_of(view.lineage(LineageQuery("up", (("acme", "d_bot"),), limit=10))) == 2
    assert depth_of(view.lineage(LineageQuery("up", (("acme", "a_bot"),), limit=10))) == 1
    assert view.lineage(LineageQuery("down", (("acme", "a_bot"),))) == [Kin("acme", "d_bot")]
    [child] = view.lineage(LineageQuery("children", (("acme", "a_bot"),)))
    assert (child.key, child.parent_id, child.version) == (("acme", "d_bot"), "a_bot", 1)
    assert view.lineage(LineageQuery("drawn", (("acme", "a_bot"),))) == [Kin("acme", "d_bot", "a_bot")]
    # a walk stays in its tenant: globex's ``shared`` has no lineage of acme's
    assert view.lineage(LineageQuery("down", (("globex", "a_bot"),))) == []


# -- what a selector, a revocation or a policy version covers ------------------------------------


def test_covered_answers_each_question_with_named_rows(view: ViewReader) -> None:
    now = view.covered(Selected({"ids": ["shared"]}))
    assert now == [CoveredRow("acme", "shared", "external_fact"), CoveredRow("globex", "shared", "external_fact")]
    [record] = view.revocation_records(RevocationQuery(limit=10))
    selector = json.loads(record.selector)
    by = view.covered(RevokedBy(record.revocation_id, record.seq, record.effective_at, selector))
    assert [c.key for c in by] == [("globex", "g_bot")]
    taken = view.covered(TakenAt(record.revocation_id, record.seq, selector, tenant="globex"))
    assert [c.key for c in taken] == [("globex", "g_bot")]
    assert view.covered(TakenAt(record.revocation_id, record.seq, selector, tenant="acme")) == []
    assert view.covered(TakenAt(record.revocation_id, record.seq, selector, evidence=True)) == []
    # checked under version 1 before the policy moved to 2, and not out for good
    checked = view.covered(CheckedUnder("default", "1"))
    assert {c.key for c in checked} == set(EVERY_KEY) - {("globex", "g_bot")}
    assert view.covered(CheckedUnder("default", "2")) == []


# -- revocations, policies, the side tables -------------------------------------------------------


def test_revocation_records_by_id_page_and_unconfirmed(view: ViewReader) -> None:
    [record] = view.revocation_records(RevocationQuery(limit=10))
    assert isinstance(record, RevocationRow) and record.covered == 1 and record.reason == "wrong"
    assert view.revocation_records(RevocationQuery(record.revocation_id)) == [record]
    assert view.revocation_records(RevocationQuery("rev_none")) == []
    assert view.revocation_records(RevocationQuery(limit=10, offset=1)) == []
    unconfirmed = [r.revocation_id for r in view.revocation_records(RevocationQuery(unconfirmed=True))]
    assert unconfirmed in ([], [record.revocation_id])  # read back already, or not yet
    shares = view.revocations(["acme", "globex"])
    assert {t: [r.revocation_id for r in rs] for t, rs in shares.items()} == {
        "acme": [],
        "globex": [record.revocation_id],
    }
    [parsed] = shares["globex"]
    assert parsed == Revocation(record.revocation_id, json.loads(record.selector), record.effective_at, record.seq)


def test_policy_says_its_version_and_what_a_version_may_do(view: ViewReader) -> None:
    assert view.policies() == {"default": "2"}
    found = view.policy("default")
    assert isinstance(found, PolicyRow) and (found.current, found.highest_numbered) == ("2", 2)
    assert found.seq is not None and found.seq > 0
    assert view.policy("default", "1").retired_seq is not None
    assert "retired" in (view.policy("default", "1").problem or "")
    assert view.policy("default", "3").problem is None
    assert view.policy("default", "2").problem is not None  # already current
    never = view.policy("never_set", "5")
    assert (never.current, never.seq, never.retired_seq, never.problem) == (None, None, None, None)


def test_keys_and_server_secrets(view: ViewReader) -> None:
    [listed] = [k for k in view.side().keys() if k.key_id == "k1"]
    assert listed == KeyRow("k1", "agent", ("acme",), "bot", START, None)  # a listing never holds a hash
    assert [k.key_hash for k in view.side().keys("k1")] == ["hash1"]
    assert view.side().keys("k_none") == []
    assert view.side().server_secrets("s1") == {"s1": b"\x01\x02"}
    assert view.side().server_secrets("s_none") == {}
    assert view.side().server_secrets()["s1"] == b"\x01\x02"


def test_the_texts_and_counters(view: ViewReader) -> None:
    [text] = view.texts(SYSTEM, [("acme", "a_bot", 1), ("initech", "gone", 2), ("acme", "a_bot", 9)])
    assert (text.key, text.version, text.summary) == (("acme", "a_bot"), 1, "about a_bot")
    assert text.content is not None and "서울".encode() in text.content
    assert list(view.texts(NOBODY, [("acme", "a_bot", 1)])) == []  # confined like every other read
    assert view.erasures([("acme", "a_bot"), ("initech", "gone"), ("initech", "none")]) == {("initech", "gone"): 2}
    assert view.position() > 0
    assert view.side().backoff("nowhere.example") is None
    weeks = view.weekly()
    assert weeks and all(set(w.counts) == set(COUNTERS) for w in weeks)
    counts = view.vectors().embedding_counts("acme")
    assert sum(c.versions for c in counts) == 5


def test_a_backoff_is_a_named_row(store: Warden) -> None:
    with store.transaction() as tx:
        tx.view.set_backoff("slow.example", 2, 99.5)
        assert tx.view.side().backoff("slow.example") == Backoff(2, 99.5)
        tx.view.clear_backoff("slow.example")
        assert tx.view.side().backoff("slow.example") is None


# -- driver errors stay below the port ---------------------------------------------------------

LATER = "2027-01-01T00:00:00Z"
# every read of the port, each through its parts where it has them
READS: dict[str, Callable[[ViewReader], object]] = {
    "position": lambda v: v.position(),
    "rows": lambda v: v.rows(SYSTEM, EVERY_KEY),
    "memories": lambda v: v.memories(SYSTEM),
    "tenant_names": lambda v: v.tenant_names(SYSTEM),
    "agent_query": lambda v: v.agent_query(
        tenant=None,
        access=SYSTEM,
        filters={},
        ids=["shared"],
        id_prefixes=None,
        match=None,
        content=None,
        usable_at=None,
        limit=2,
        offset=0,
    ),
    "text_matches": lambda v: v.text_matches(SYSTEM, ["서울"]),
    "texts": lambda v: list(v.texts(SYSTEM)),
    "past_expiry": lambda v: v.past_expiry(SYSTEM, LATER, 10),
    "due": lambda v: v.due(SYSTEM, LATER),
    "erasures": lambda v: v.erasures(EVERY_KEY),
    "lineage": lambda v: v.lineage(LineageQuery("up", (("acme", "d_bot"),))),
    "covered": lambda v: v.covered(Selected({"tenant": "acme"})),
    "revocations": lambda v: v.revocations(["acme"]),
    "revocation_records": lambda v: v.revocation_records(RevocationQuery()),
    "policies": lambda v: v.policies(),
    "policy": lambda v: v.policy("default"),
    "weekly": lambda v: v.weekly(),
    "outbox": lambda v: v.outbox().notices(),
    "vectors": lambda v: v.vectors().embedding_counts(),
    "side": lambda v: v.side().keys(),
}
# what PostgreSQL's snapshot read when it opened, so never asks its connection again
FROM_THE_OPENING = {"position", "policies"}


def test_every_read_of_the_port_is_in_the_list() -> None:
    methods = {name for name in vars(ViewReader) if not name.startswith("_")}
    assert methods == set(READS)
    assert len(methods) <= 20  # the port stays narrow


@pytest.mark.parametrize("inside", ["reading", "writing"])
@pytest.mark.parametrize("read", READS)
def test_a_driver_failure_under_a_read_is_memwardens_own_error(
    store: Warden, backend: Backend, read: str, inside: str
) -> None:
    failure = backend.driver_failure()
    opened = store.store.reading() if inside == "reading" else store.store.writing()
    # memwarden's own error: the store failed, or (SQLite's writer) the log could not be written
    with pytest.raises((StoreFailed, StorageError)) as raised:
        with opened as entered:
            view = entered if inside == "reading" else entered.view
            backend.fail_under(view, failure)  # every statement of this view fails from here on
            READS[read](view)
            if inside == "reading" and backend.name == "postgres" and read in FROM_THE_OPENING:
                raise failure  # answered without a statement: nothing to fail
    assert raised.value.__cause__ is failure  # the driver's error kept as the cause, never raised itself
    assert not isinstance(raised.value, type(failure))


def test_a_closed_connection_under_a_read_is_memwardens_own_error(backend: Backend, tmp_path: Path) -> None:
    warden = Warden(backend.db(tmp_path), clock=FrozenClock(START))
    try:
        save_memory(warden, "a", tenant="acme")
        with pytest.raises(StoreFailed) as raised, warden.store.writing() as tx:
            backend.sever(tx.view)
            tx.view.rows(SYSTEM, [("acme", "a")])
        assert raised.value.__cause__ is not None
    finally:
        with contextlib.suppress(Exception):
            warden.close()
