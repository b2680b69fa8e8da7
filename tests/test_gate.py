"""The gate and the fold against a plain-Python reference, over thousands of
random single-memory histories (no database: this runs fast enough to be
thorough)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from memwarden.engine import decide
from memwarden.events import RecordedEvent
from memwarden.projections import MemoryRow, Revocation, fold_memory, revoke_row

from ._sizes import larger

T = [f"2026-01-05T{h:02d}:00:00.000000Z" for h in range(24)]

EVENT = st.one_of(
    st.tuples(st.just("saved"), st.integers(0, 20), st.sampled_from([None, 1, 3, 8]), st.sampled_from(["a", "b"])),
    st.tuples(st.just("verified"), st.integers(0, 20), st.sampled_from([None, 2, 6])),
    st.tuples(st.just("failed")),
    st.tuples(st.just("expired")),
    st.tuples(st.just("invalidated")),
    st.tuples(st.just("erased")),
    st.tuples(st.just("integrity")),
    st.tuples(st.just("resynced")),
    st.tuples(st.just("revoke"), st.sampled_from(["a", "b"]), st.integers(0, 23)),
    st.tuples(st.just("policy")),
)


def reference(history: list[tuple[Any, ...]], now: int) -> tuple[bool, str | None]:
    """Usability by the rules as written: status, policy version, expiry."""
    state: dict[str, Any] | None = None
    revocations: list[tuple[str, int]] = []
    horizon: int | None = None  # the latest effective time of a revocation that covered this memory
    policy = 1
    for step in history:
        kind = step[0]
        if kind == "revoke":
            revocations.append((step[1], step[2]))
            # it covers every version recorded before it, whatever its fetch time
            if state and state["status"] not in ("erased", "revoked") and state["tenant"] == step[1]:
                state["status"] = "revoked"
                horizon = step[2] if horizon is None else max(horizon, step[2])
            continue
        if kind == "policy":
            policy += 1
            continue
        if kind == "saved":  # a new version (after an erasure too: with a text of its own)
            fetched, ttl, tenant = step[1], step[2], step[3]
            state = {
                "status": "usable",
                "fetched": fetched,
                "expires": None if ttl is None else fetched + ttl,
                "pv": policy,
                "tenant": tenant,
                "before_quarantine": None,
            }
            blocking = [eff for t, eff in revocations if t == tenant and fetched <= eff]
            if blocking:
                state["status"] = "revoked"
                horizon = max([*blocking, *([horizon] if horizon is not None else [])])
            elif horizon is not None and fetched <= horizon:
                state["status"] = "revoked"  # no version fetched by then comes back, whatever its scope
            continue
        if state is None:
            continue
        if kind == "erased":
            state["status"] = "erased"
        elif state["status"] in ("erased", "revoked"):
            continue
        elif kind == "verified":
            state.update(
                status="usable", fetched=step[1], expires=None if step[2] is None else step[1] + step[2], pv=policy
            )
        elif kind == "failed":
            state["status"] = "unknown"
        elif kind == "expired":
            if state["status"] == "usable" and state["expires"] is not None:
                state["status"] = "expired"
        elif kind == "invalidated":
            state["status"] = "invalidated"
        elif kind == "integrity":
            if state["status"] != "quarantined":
                state["before_quarantine"], state["status"] = state["status"], "quarantined"
        elif kind == "resynced" and state["status"] == "quarantined":
            state["status"] = state["before_quarantine"] or "usable"
    if state is None:
        return False, "not_found"
    status = state["status"]
    reasons = {
        "erased": "erased",
        "revoked": "revoked",
        "quarantined": "integrity_failed",
        "invalidated": "source_changed",
        "unknown": "unknown",
    }
    if status in reasons:
        return False, reasons[status]
    if state["pv"] != policy:
        return False, "policy_changed"
    if status == "expired" or (state["expires"] is not None and now >= state["expires"]):
        return False, "expired"
    return True, None


def engine(history: list[tuple[Any, ...]], now: int) -> tuple[bool, str | None]:
    row: dict[str, Any] | None = None
    revocations: list[Revocation] = []
    policy = 1
    version = 0
    for seq, step in enumerate(history, start=1):
        kind = step[0]
        if kind == "revoke":
            rev = Revocation(f"r{seq}", {"tenant": step[1]}, T[step[2]], seq)
            revocations.append(rev)
            if row is not None:
                row = revoke_row(row, rev, seq) or row
            continue
        if kind == "policy":
            policy += 1
            continue
        payload: dict[str, Any] = {
            "tenant": row["tenant"] if row else "t",
            "memory_id": "m",
            "version": version or 1,
        }
        if kind == "saved":
            version += 1
            fetched, ttl, tenant = step[1], step[2], step[3]
            payload = {
                "tenant": tenant,
                "memory_id": "m",
                "version": version,
                "kind": "k",
                "summary": "s",
                "content_checksum": "sha256:" + "0" * 64,
                "source_url": "u",
                "fetched_at": T[fetched],
                "scope": {"tenant": tenant},
                "revocation_version": policy,
            }
            if ttl is not None:
                payload["expires_at"] = T[fetched + ttl] if fetched + ttl < 24 else "2026-01-06T00:00:00.000000Z"
            type_ = "memory.saved"
        elif kind == "verified":
            fetched, ttl = step[1], step[2]
            payload.update(
                fetched_at=T[fetched],
                verified_at=T[fetched],
                revocation_version=policy,
                content_checksum="sha256:" + "0" * 64,
            )
            if ttl is not None:
                payload["expires_at"] = T[fetched + ttl] if fetched + ttl < 24 else "2026-01-06T00:00:00.000000Z"
            type_ = "memory.verified"
        elif kind == "expired":
            payload["expires_at"] = row["expires_at"] if row and row["expires_at"] else T[0]
            type_ = "memory.expired"
        else:
            type_ = {
                "failed": "memory.verification_failed",
                "invalidated": "memory.invalidated",
                "erased": "memory.erased",
                "integrity": "memory.integrity_failed",
                "resynced": "memory.resynced",
            }[kind]
            payload.update(
                reason="source_changed",
                error="e",
                attempted_at=T[0],
                expected_checksum="x",
                content_checksum="x",
                resynced_from="s",
            )
        # recorded at the day's end: after every fetch it claims (a later claim is clamped)
        event = RecordedEvent(seq, f"e{seq}", type_, "m", seq, T[0], T[23], "a", 1, payload, "", "")
        row = fold_memory(row, event, revocations)
    if row is None:
        return False, "not_found"
    decision = decide(MemoryRow.of(row), now=T[now], policy_version=policy)
    return decision.usable, decision.reason


# 1,000 histories of up to twelve events by default, each against the reference (3,000 under --runslow)
@settings(max_examples=larger(1000, 3000), deadline=None)
@given(st.lists(EVENT, max_size=12), st.integers(0, 23))
def test_gate_and_fold_match_the_reference(history: list[tuple[Any, ...]], now: int) -> None:
    # clamp times the strategies may push past the day
    history = [(s[0], min(s[1], 23), *s[2:]) if s[0] in ("saved", "verified") else s for s in history]
    expected = reference(
        [
            (s[0], s[1], s[2] if s[2] is None or s[1] + s[2] < 24 else 24 - s[1], *s[3:])
            if s[0] in ("saved", "verified")
            else s
            for s in history
        ],
        now,
    )
    assert engine(history, now) == expected, history
