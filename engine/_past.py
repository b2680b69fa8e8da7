"""For auditors: the past. What the agents could use at a past moment
(``replay``, paged and streamed), and one memory's story with the gate's
answer then (``explain``).

Both are answered from the view as of a seq (``Store.as_of``: each
memory's stream folded up to it, through the indexes), so a question costs
what its answer holds, never a replay of the whole log. The past shows that
a memory existed, never a text erased since: summaries come from today's
text store, and contents are never shown.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import json
from collections.abc import Iterator
from typing import Any

from memwarden.events import RecordedEvent, canonical_json, check_range, format_ts, parse_ts
from memwarden.projections import COLUMNS, Access, CheckResult, Key, MemoryRow, story

from ._core import Core
from ._derivation import Judge
from ._errors import InvalidInput, MemoryNotFound
from ._gate import decide
from ._limits import MAX_PAGE
from ._reading import get
from ._rights import Principal, operation, shows_text, told_of
from ._versions import in_force
from ._views import MemoryView

# memories folded and judged together in a replay; the answer streams on
# page by page, so a replay's memory stays flat however large the view
PAGE = 500
MAX_LIMIT = MAX_PAGE


def resolve_point(warden: Core, *, as_of: str | None = None, seq: int | None = None) -> tuple[int, str]:
    """(seq, time) of a past point given either a time or a seq."""
    if (as_of is None) == (seq is None):
        raise InvalidInput("as_of", "give exactly one of as_of or seq")
    if as_of is None:  # the seq is given
        head = warden.log.head().seq
        if not isinstance(seq, int) or seq < 0 or seq > head:
            raise InvalidInput("seq", f"must be between 0 and the head seq {head}")
        event = warden.log.get(seq) if seq else None
        return seq, event.recorded_at if event else warden.now()
    try:
        when = format_ts(check_range(parse_ts(as_of)))  # times start in 1970
    except ValueError as exc:
        raise InvalidInput("as_of", str(exc)) from None
    return warden.log.seq_at(when), when


# -- replay -------------------------------------------------------------------------------------


def cursor_of(key: Key) -> str:
    """The opaque ``after`` a page hands on: where the next one starts."""
    return base64.urlsafe_b64encode(canonical_json(list(key)).encode()).decode().rstrip("=")


def key_of(cursor: str) -> Key:
    try:
        tenant, memory_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if isinstance(tenant, str) and isinstance(memory_id, str):
            return tenant, memory_id
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        pass
    raise InvalidInput("after", "is not a cursor this server handed out (use a page's 'next')")


def replay_memories(
    warden: Core,
    point: int,
    when: str,
    *,
    tenant: str | None = None,
    include_unusable: bool = False,
    after: Key | None = None,
) -> Iterator[tuple[Key, dict[str, Any]]]:
    """The memories of the view as of ``point`` (usable then, or all of
    them) with their keys, by tenant and id, one page of the view at a time."""
    with warden.store.as_of(point) as past:
        policies = past.policies()
        while True:
            rows = past.page(tenant, after, PAGE)
            if not rows:
                return
            after = (rows[-1].tenant, rows[-1].memory_id)
            judge = Judge(past, when, policies)
            shown = [(row, d) for row in rows if (d := judge.decide(row)).usable or include_unusable]
            with warden.reading() as live:
                versions = [(row.tenant, row.memory_id, row.version) for row, _ in shown]
                labels = {text.key: text.summary for text in live.texts(Access.system(), versions)}
            past.forget()
            for row, decision in shown:
                label = labels.get((row.tenant, row.memory_id))
                view = MemoryView.of(row, decision, None, label).as_dict()
                view.pop("content")
                if label is None:  # the version's texts are erased: its checksum is not shown either
                    view["checksum"] = None
                yield (row.tenant, row.memory_id), view


@operation("review")
def replay(
    warden: Core,
    *,
    caller: Principal,
    as_of: str | None = None,
    seq: int | None = None,
    tenant: str | None = None,
    include_unusable: bool = False,
    after: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """The view as of a past point. With ``limit``, one page of it and the
    ``next`` cursor (None on the last page); without, all of it."""
    if limit is not None and not (isinstance(limit, int) and 1 <= limit <= MAX_LIMIT):
        raise InvalidInput("limit", f"must be between 1 and {MAX_LIMIT}")
    start = key_of(after) if after is not None else None
    point, when = resolve_point(warden, as_of=as_of, seq=seq)
    memories: list[dict[str, Any]] = []
    last: Key | None = None
    more = False
    for key, memory in replay_memories(
        warden, point, when, tenant=tenant, include_unusable=include_unusable, after=start
    ):
        if limit is not None and len(memories) == limit:
            more = True
            break
        memories.append(memory)
        last = key
    out: dict[str, Any] = {"as_of": when, "seq": point, "memories": memories}
    if limit is not None:
        out["next"] = cursor_of(last) if more and last is not None else None
    return out


@operation("review")
def replay_stream(
    warden: Core,
    *,
    caller: Principal,
    as_of: str | None = None,
    seq: int | None = None,
    tenant: str | None = None,
    include_unusable: bool = False,
) -> Iterator[str]:
    """``replay``'s whole answer as canonical JSON text, a memory at a time:
    the same bytes, never all of it in memory at once."""
    point, when = resolve_point(warden, as_of=as_of, seq=seq)  # a bad point is refused before a byte is sent
    memories = replay_memories(warden, point, when, tenant=tenant, include_unusable=include_unusable)

    def chunks() -> Iterator[str]:
        # the keys in canonical order (as_of, memories, seq): byte for byte
        # what canonical_json(replay(...)) writes
        yield '{"as_of":' + canonical_json(when) + ',"memories":['
        for n, (_key, memory) in enumerate(memories):
            yield ("," if n else "") + canonical_json(memory)
        yield f'],"seq":{point}}}'

    return chunks()


# -- explain ------------------------------------------------------------------------------------


@operation("read")
def explain(
    warden: Core,
    memory_id: str,
    *,
    tenant: str | None = None,
    caller: Principal,
    as_of: str | None = None,
) -> dict[str, Any]:
    """The memory's history, the status after each step, and the gate's
    answer at ``as_of`` (default now). Uses the projection's own fold, so
    the story told here is the one the view was built from. The memory is
    found among those ``caller`` may read, as every read finds it."""
    access = caller.access
    if as_of is not None:
        point, when = resolve_point(warden, as_of=as_of)
    else:
        point, when = warden.log.head().seq, warden.now()
    with warden.reading() as view:
        tenant = warden.find_row(view, memory_id, tenant=tenant, access=access).tenant
        # an erased text's checksum is withheld with it: a short text is found again from its hash
        erased_through = view.erasures([(tenant, memory_id)]).get((tenant, memory_id), 0)
    row: MemoryRow | None = None
    history: list[dict[str, Any]] = []
    events = warden.log.memories_events([(tenant, memory_id)], until_seq=point)
    for event, row in story(events, warden.log.context_events(until_seq=point), tenant, memory_id):
        history.append(
            {
                "seq": event.seq,
                "recorded_at": event.recorded_at,
                "occurred_at": event.occurred_at,
                # a step of staff's that is not this memory's own (a revocation, a policy change)
                # may span tenants: an agent is told it happened, not who did it or why
                "actor": event.actor if caller.is_staff or event.type not in STAFF_STEPS else None,
                "event": event.type,
                "status_after": row.status,
                "version": row.version,
                "checksum": None if row.version <= erased_through else row.checksum,
                "note": _note(
                    event, erased=row.version <= erased_through, bound=caller.agent is not None, staff=caller.is_staff
                ),
            }
        )
    if row is None:
        raise MemoryNotFound(memory_id, as_of)
    # the evidence (and its own evidence) as the view stood at that point
    with warden.reading() if as_of is None else warden.store.as_of(point) as then:
        judge = Judge(then, when, then.policies())
        parents = judge.parents(row)
        answer: Any = told_of(
            caller,
            tenant,
            decide(row, now=when, policy_version=in_force(judge.policies, row.policy), parents=parents),
            parents,
        )
        tree = judge.tree(row, access=access) if row.derived_from != "[]" else None
        drawn = judge.drawn(row, access=access)
    if as_of is None and answer.usable:
        answer = get(warden, memory_id, tenant=tenant, caller=caller)  # the live answer also checks the text
    withheld = not shows_text(caller, row.status)
    if withheld:  # what the caller may not receive of the memory, in none of its steps
        for step in history:
            step["checksum"] = None
    return {
        "memory_id": memory_id,
        "as_of": when,
        "seq": point,
        "usable": answer.usable,
        "reason": answer.reason,
        "action": answer.action,
        "detail": answer.detail,
        "status": row.status,
        "version": row.version,
        "checksum": None if withheld or row.version <= erased_through else row.checksum,
        "fetched_at": row.fetched_at,
        "expires_at": row.expires_at,
        "history": history,
        "tenant": tenant,
        "derivation": tree,
        "drawn_from_it": drawn,
    }


# the steps of a memory's story that are staff's acts over every tenant, not this memory's own
STAFF_STEPS = frozenset({"revocation.issued", "policy.version_changed"})


def _note(event: RecordedEvent, *, erased: bool = False, bound: bool = False, staff: bool = True) -> str | None:
    """What a step of a memory's story says. ``bound``: the caller is a key
    bound to one agent, which is not told the state of evidence another
    agent's memory gave (``_rights.told_of``); ``erased``: no checksum of an
    erased text; ``staff``: the caller is told a revocation's reason (an
    agent only its id: the reason may name other tenants)."""
    p = event.payload
    if event.type == "revocation.issued":
        return f"{p['revocation_id']}: {p['reason']}" if staff else f"{p['revocation_id']}: revoked by security staff"
    if event.type == "policy.version_changed":
        return f"policy {p['policy']} now at version {p['version']}"
    if event.type == "memory.saved":
        return f"version {p['version']} from {p['source_url']}, expires {p.get('expires_at') or 'never (events only)'}"
    if event.type == "memory.verified":
        return f"re-verified, expires {p.get('expires_at') or 'never'}"
    if event.type == "memory.verification_failed":
        return p["error"]
    if event.type == "memory.expired":
        return f"expired at {p['expires_at']}"
    if event.type == "memory.invalidated":
        if bound and p["reason"] == "derived_from_unusable":
            return "derived_from_unusable: a memory it was drawn from may not be used now"
        return p["reason"] + (f": {p['detail']}" if p.get("detail") else "")
    if event.type == "memory.erased":
        return f"erased: {p['reason']}"
    if event.type == "memory.integrity_failed":
        if erased:
            return "the stored text did not match its checksum"
        return f"stored text hashed to {p.get('actual_checksum')}, expected {p['expected_checksum']}"
    if event.type == "memory.resynced":
        return f"text restored from {p['resynced_from']}"
    if event.type == "memory.reembedded":
        return f"vector made again by {p['embedder']} (before: {p.get('previous_embedder') or 'none'})"
    return None


# -- the two ways to the past, compared -----------------------------------------------------------


@operation("review")
def check_as_of(warden: Core, *, as_of: str | None = None, seq: int | None = None, caller: Principal) -> CheckResult:
    """The view as of a past point as the indexes answer it, against a full
    replay of the log to that point: every memory's row, the policies in
    force, and what was drawn from each memory then."""
    point, _ = resolve_point(warden, as_of=as_of, seq=seq)
    replayed = warden.store.view_rows(point)
    with warden.store.as_of(point) as past:
        rows = [tuple(getattr(row, c) for c in COLUMNS) for row in past.every_row()]
        policies = sorted(past.policies().items())
        drawn = sorted(
            (tenant, parent, child)
            for tenant, parent in sorted({(t, p) for t, _c, p, _v in replayed["derivations"]})
            for child in past.drawn_from(tenant, parent)
        )
    sides = {
        "memories": (rows, [tuple(r) for r in replayed["memories"]]),
        "policies": (policies, sorted((r[0], r[1]) for r in replayed["policies"])),
        "derivations": (drawn, sorted((t, p, c) for t, c, p, _v in replayed["derivations"])),
    }
    digests = {name: (_digest(indexed), _digest(full)) for name, (indexed, full) in sides.items()}
    first, memory_id = None, None
    for name, (indexed, full) in sides.items():
        if indexed != full:
            first = name
            if name == "memories":
                memory_id = next(
                    (a or b)[COLUMNS.index("memory_id")] for a, b in itertools.zip_longest(indexed, full) if a != b
                )
            break
    return CheckResult(first is None, point, point, digests, first, memory_id)


def _digest(rows: list[tuple[Any, ...]]) -> str:
    return hashlib.sha256(canonical_json([list(r) for r in rows], floats=False).encode()).hexdigest()
