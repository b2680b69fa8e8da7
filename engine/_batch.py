"""Saving many memories at once: one transaction, all or nothing.

Each memory is checked exactly as a single save checks it (``_saving``),
with what a batch can share done once: each tenant's revocations are read
once, and the events are appended together, so the log, the view, the text
index and the chain are written in one pass. A memory that names one saved earlier in
the same batch as evidence (or repeats its id with evidence, an event id or
a policy version), or a save that adopts a policy version, sees the batch
so far: what is pending is appended first. A plain repeat of an id reads
the row the batch leaves (``Reads.saved``) instead, so a batch repeating
one id is appended in one pass, as one of distinct ids is (#38).
Every item is checked before anything is refused, so a refusal lists each
bad item by index and field; nothing of the batch is written then.

A large batch holds the store's one write transaction for a while, and
every other writer waits for it, a revocation too. So its plain items'
events are built before the lock is taken, from a reader's view
(``_prepared``), and checked against that view's revocations; under the
lock each is taken as built when the row, the policy version and the
tenant's revocations it was built and checked on are unchanged, and built
or checked again when not: the state the batch commits on decides. That
preparation is paced (``_pace``), so that it takes at most half the
interpreter from the requests beside it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memwarden.events import Event, MemorySaved, Texts, Vector, format_ts
from memwarden.projections import Key, Revocation, ViewReader

from ._core import Core, log
from ._errors import BatchRefused
from ._limits import MAX_BATCH
from ._pace import Pace, unpaced
from ._rights import Principal, operation
from ._save_events import Checked, Held, Reads, built_event, refuse_if_revoked, saved_event
from ._saving import check_input, embedded, retried, vector_of
from ._versions import current_version
from ._views import SaveResult


def _problem(index: int, exc: Exception) -> dict[str, Any]:
    named = getattr(exc, "field", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return {"index": index, "field": named, "problem": problem, "error": type(exc).__name__}


def _named(item: Checked) -> set[Key]:
    """The memories of its own tenant an item names: itself and its evidence."""
    tenant = item.scope.tenant
    parents = item.fields["derived_from"]
    if isinstance(parents, str):
        parents = [parents]
    named = {(tenant, item.memory_id)}
    for parent in parents or ():
        parent_id = parent if isinstance(parent, str) else getattr(parent, "memory_id", None)
        if parent_id is None and isinstance(parent, Mapping):
            parent_id = parent.get("memory_id")
        if isinstance(parent_id, str):
            named.add((tenant, parent_id))
    return named


def _may_adopt(view: ViewReader, item: Checked, set_policies: set[str]) -> bool:
    """Whether ``item`` names a version of a policy never set (which it
    would adopt). Asked only of a save that names a version, and of each
    policy until it is found set (``set_policies``: a set policy stays set)."""
    policy = item.fields.get("policy") or "default"
    if item.fields.get("revocation_version") is None or policy in set_policies:
        return False
    if current_version(view, policy) is None:
        return True
    set_policies.add(policy)
    return False


def _plain(item: Checked) -> bool:
    """A save that names nothing but itself and adopts no policy version."""
    f = item.fields
    return not f["derived_from"] and f["event_id"] is None and f["revocation_version"] is None


def _keys(checked: Sequence[tuple[int, Checked]]) -> list[Key]:
    return [(item.scope.tenant, item.memory_id) for _, item in checked if isinstance(item.memory_id, str)]


@dataclass(frozen=True)
class _Ready:
    """A plain item's event built and checked before the lock, and what it
    read to build it."""

    event: MemorySaved
    basis: tuple[Any, ...] | None  # the row's holder, version and last revocation; None for a new memory
    policy_version: int | str | None


@dataclass(frozen=True)
class _Prepared:
    """What a large batch built before the lock: its plain items' events by
    index, and each tenant's revocations as the view they were checked in
    had them."""

    ready: dict[int, _Ready] = field(default_factory=dict)
    revocations: dict[str, list[Revocation]] = field(default_factory=dict)


def _basis(row: Held | None) -> tuple[Any, ...] | None:
    if row is None:
        return None
    return (row.tenant, row.agent, row.version, row.revoked_until, row.last_revocation)


def _large(core: Core, checked: Sequence[object]) -> bool:
    """Large as the write turns count it: a smaller batch holds the lock
    briefly, and is prepared there, unpaced."""
    return len(checked) >= core.write_turns.large


def _pace(core: Core, given: Sequence[object]) -> Callable[[], None]:
    """A large batch's pace where it shares the interpreter (a server):
    alone in a process, a pause would only make it slower."""
    if _large(core, given) and core.large_write_share < 1:
        return Pace(share=core.large_write_share)
    return unpaced


def _prepared(
    core: Core, checked: Sequence[tuple[int, Checked]], caller: Principal, pace: Callable[[], None]
) -> _Prepared:
    """The events of a large batch's plain items whose ids it names once,
    by index, built and checked in a reader's view. An item this view
    refuses is left to the lock, where its refusal is decided."""
    if not _large(core, checked):
        return _Prepared()
    once = Counter(_keys(checked))
    plain = [
        (index, item)
        for index, item in checked
        if _plain(item) and isinstance(item.memory_id, str) and once[(item.scope.tenant, item.memory_id)] == 1
    ]
    if not plain:
        return _Prepared()
    ready: dict[int, _Ready] = {}
    with core.reading() as view:
        reads = Reads(view, _keys(plain))
        shares = view.revocations({item.scope.tenant for _, item in plain})
        for index, item in plain:
            pace()
            tenant = item.scope.tenant
            try:
                event, _ = built_event(core, view, item, caller, reads)
                row = reads.row(tenant, event.memory_id)
                refuse_if_revoked(shares[tenant], event, row)
            except (ValueError, PermissionError, LookupError):
                continue
            policy = item.fields["policy"]
            ready[index] = _Ready(
                event,
                _basis(row),
                reads.version_of(policy) if isinstance(policy, str) else None,
            )
    return _Prepared(ready, shares)


def _still(ready: _Ready, item: Checked, reads: Reads) -> bool:
    """Whether the row and the policy version ``ready`` was built on are
    what the lock's view says."""
    if _basis(reads.row(item.scope.tenant, ready.event.memory_id)) != ready.basis:
        return False
    policy = item.fields["policy"]
    return not isinstance(policy, str) or reads.version_of(policy) == ready.policy_version


@operation("save")
def save_many(
    core: Core,
    memories: Iterable[Mapping[str, Any]],
    *,
    caller: Principal,
    check: Callable[[Mapping[str, Any]], None] | None = None,
) -> list[SaveResult]:
    """Save every memory of ``memories`` (each the keyword arguments of
    ``save``) in one transaction, or none: a refusal raises ``BatchRefused``
    listing each refused item (index, field, problem) and writes nothing.
    ``check`` is a face's own rule for each item (a server refusing local
    sources), raising as the engine's checks do."""
    given = list(memories)
    if not given:
        raise BatchRefused([{"index": None, "field": "memories", "problem": "is empty", "error": "InvalidInput"}])
    if len(given) > MAX_BATCH:
        raise BatchRefused(
            [
                {
                    "index": None,
                    "field": "memories",
                    "problem": f"holds {len(given)}; the limit is {MAX_BATCH} a batch (MAX_BATCH): send it in batches",
                    "error": "TooLarge",
                }
            ]
        )
    problems: list[dict[str, Any]] = []
    checked: list[tuple[int, Checked]] = []
    pace = _pace(core, given)
    for index, fields in enumerate(given):
        pace()
        try:
            if not isinstance(fields, Mapping):
                raise TypeError("each memory must be an object of the fields of a save")
            if check is not None:
                check(fields)
            checked.append((index, check_input(core, caller=caller, **fields)))
        except TypeError as exc:  # an unknown field, or one missing: said in a user's words, not Python's
            text = str(exc).replace("check_input() ", "")
            quoted = re.search(r"'(\w+)'", text)
            name = quoted.group(1) if quoted else None
            if name is not None and "missing" in text:
                text = "is required"
            elif name is not None and "unexpected keyword" in text:
                text = "is not a field of a save"
            problems.append({"index": index, "field": name, "problem": text, "error": "InvalidInput"})
        except (ValueError, PermissionError, LookupError) as exc:
            problems.append(_problem(index, exc))
    if problems and len(problems) == len(given):
        _refuse(problems, len(given))
    checked = list(zip([i for i, _ in checked], embedded(core, [item for _, item in checked]), strict=True))
    prepared = _prepared(core, checked, caller, pace)
    results: list[tuple[Checked, Any] | SaveResult] = []
    with core.transaction(size=len(checked)) as tx:
        # each tenant's revocations read once for the batch (a save appends
        # none), and every memory's row and policy version once, not per item
        shares = tx.view.revocations({item.scope.tenant for _, item in checked})
        # compared once a tenant, not once an item: where a tenant's
        # revocations are those its items were checked on before the lock,
        # (with their rows' own, in their basis) those checks hold
        unchanged = {tenant for tenant, now in shares.items() if prepared.revocations.get(tenant) == now}
        reads = Reads(tx.view, _keys(checked))
        pending: list[Event] = []
        pending_texts: list[Texts] = []
        pending_vectors: list[Vector] = []
        pending_keys: set[Key] = set()
        seq_of: dict[int, int] = {}  # id(event) -> its seq

        def flush(last: bool = False) -> None:
            """Append what is pending; the view then reads differently for
            the memories it wrote, so their rows are read again (unless it
            is the ``last``: nothing reads them after)."""
            if not pending:
                return
            tx.texts.put_many(pending_texts)  # before the fold, which indexes them
            tx.texts.put_vectors(pending_vectors)
            for event, seq in zip(pending, tx.append(pending), strict=True):
                seq_of[id(event)] = seq
            pending.clear()
            pending_texts.clear()
            pending_vectors.clear()
            if not last:
                reads.refresh(pending_keys)
            pending_keys.clear()

        set_policies: set[str] = set()
        for index, item in checked:
            named = _named(item) & pending_keys
            # a plain repeat of an id this batch saves (no evidence, no event
            # id, no policy to adopt) reads only the row the batch would
            # leave, which ``reads`` is told below: no append needed first
            repeat = named == {(item.scope.tenant, item.memory_id)} and _plain(item)
            if named and not repeat:
                flush()  # it names a memory this batch saves: the view must hold it
            elif pending and _may_adopt(tx.view, item, set_policies):
                flush()  # an adoption is refused past memories under version 1: the view must hold the batch's
            try:
                first = retried(core, tx.view, item)
                if first is not None:  # a retry of a save already recorded: its first answer
                    results.append(first)
                    continue
                ready = prepared.ready.get(index)
                if ready is not None and _still(ready, item, reads):
                    event, adopted = ready.event, None
                    tenant = item.scope.tenant
                    if tenant not in unchanged:
                        refuse_if_revoked(shares[tenant], event, reads.row(tenant, event.memory_id))
                else:
                    event, adopted = saved_event(core, tx.view, item, shares[item.scope.tenant], caller, reads)
            except (ValueError, PermissionError, LookupError) as exc:
                problems.append(_problem(index, exc))
                continue
            pending_texts.append(Texts(item.scope.tenant, event.memory_id, event.version, item.summary, item.content))
            pending_vectors.extend(vector_of(item, event))
            pending.extend([adopted, event] if adopted else [event])
            pending_keys.add((item.scope.tenant, event.memory_id))
            reads.saved(event)
            results.append((item, event))
            if adopted:
                flush()  # the next save of this policy reads its version from the view
        if problems:
            _refuse(problems, len(given))  # raised inside: the transaction rolls back
        flush(last=True)
    log.info("memories_saved", count=len(results), last_seq=max(seq_of.values(), default=None))
    return [
        result
        if isinstance(result, SaveResult)
        else SaveResult(
            result[1].memory_id,
            result[1].version,
            result[0].checksum,
            seq_of[id(result[1])],
            format_ts(result[0].expires) if result[0].expires else None,
            result[0].scope.tenant,
        )
        for result in results
    ]


def _refuse(problems: list[dict[str, Any]], total: int) -> None:
    problems.sort(key=lambda p: (p["index"] is None, p["index"] or 0))
    log.warning("batch_refused", refused=len(problems), total=total, first=problems[0])
    raise BatchRefused(problems)
