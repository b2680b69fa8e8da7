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
(``_prepared``); under the lock each is taken as built when the row and
the policy version it was built on are unchanged, and built again when
not. The revocations are checked there, always: that is the state the
batch commits on.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memwarden.events import Event, MemorySaved, Texts, Vector, format_ts
from memwarden.projections import Key

from ._core import Core, log
from ._errors import BatchRefused
from ._limits import MAX_PAGE
from ._rights import Principal, operation
from ._save_events import Checked, Reads, built_event, refuse_if_revoked, saved_event
from ._saving import check_input, embedded, retried, vector_of
from ._views import SaveResult

MAX_BATCH = MAX_PAGE


def _problem(index: int, exc: Exception) -> dict[str, Any]:
    field = getattr(exc, "field", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return {"index": index, "field": field, "problem": problem, "error": type(exc).__name__}


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


def _plain(item: Checked) -> bool:
    """A save that names nothing but itself and adopts no policy version."""
    f = item.fields
    return not f["derived_from"] and not f["event_id"] and f["revocation_version"] is None


def _keys(checked: Sequence[tuple[int, Checked]]) -> list[Key]:
    return [(item.scope.tenant, item.memory_id) for _, item in checked if isinstance(item.memory_id, str)]


@dataclass(frozen=True)
class _Ready:
    """A plain item's event built before the lock, and what it read to build it."""

    event: MemorySaved
    basis: tuple[Any, ...] | None  # the row's holder and version, None for a new memory
    policy_version: int | str | None


def _basis(row: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
    return None if row is None else (row["tenant"], row["agent"], row["version"])


def _prepared(core: Core, checked: Sequence[tuple[int, Checked]], caller: Principal) -> dict[int, _Ready]:
    """The events of a large batch's plain items whose ids it names once,
    by index, built in a reader's view. Large as the write turns count it:
    a smaller batch holds the lock briefly, and is built there. An item
    this view refuses is left to the lock, where its refusal is decided."""
    if len(checked) < core.write_turns.large:
        return {}
    once = Counter(_keys(checked))
    plain = [
        (index, item)
        for index, item in checked
        if _plain(item) and isinstance(item.memory_id, str) and once[(item.scope.tenant, item.memory_id)] == 1
    ]
    ready: dict[int, _Ready] = {}
    if not plain:
        return ready
    with core.reading() as view:
        reads = Reads(view, _keys(plain))
        for index, item in plain:
            try:
                event, _ = built_event(core, view, item, caller, reads)
            except (ValueError, PermissionError, LookupError):
                continue
            policy = item.fields["policy"]
            ready[index] = _Ready(
                event,
                _basis(reads.row(item.scope.tenant, event.memory_id)),
                reads.version_of(policy) if isinstance(policy, str) else None,
            )
    return ready


def _still(ready: _Ready, item: Checked, reads: Reads) -> bool:
    """Whether what ``ready`` was built on is what the lock's view says."""
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
                    "problem": f"holds {len(given)}; at most {MAX_BATCH} a batch",
                    "error": "TooLarge",
                }
            ]
        )
    problems: list[dict[str, Any]] = []
    checked: list[tuple[int, Checked]] = []
    for index, fields in enumerate(given):
        try:
            if not isinstance(fields, Mapping):
                raise TypeError("each memory must be an object of the fields of a save")
            if check is not None:
                check(fields)
            checked.append((index, check_input(core, caller=caller, **fields)))
        except TypeError as exc:  # an unknown field, or one missing
            text = str(exc).replace("check_input() ", "")
            named = re.search(r"'(\w+)'", text)
            problems.append(
                {"index": index, "field": named.group(1) if named else None, "problem": text, "error": "InvalidInput"}
            )
        except (ValueError, PermissionError, LookupError) as exc:
            problems.append(_problem(index, exc))
    if problems and len(problems) == len(given):
        _refuse(problems, len(given))
    checked = list(zip([i for i, _ in checked], embedded(core, [item for _, item in checked]), strict=True))
    prepared = _prepared(core, checked, caller)
    results: list[tuple[Checked, Any] | SaveResult] = []
    with core.transaction(size=len(checked)) as tx:
        # each tenant's revocations read once for the batch (a save appends
        # none), and every memory's row and policy version once, not per item
        shares = tx.view.revocation_shares({item.scope.tenant for _, item in checked})
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

        for index, item in checked:
            named = _named(item) & pending_keys
            # a plain repeat of an id this batch saves (no evidence, no event
            # id, no policy to adopt) reads only the row the batch would
            # leave, which ``reads`` is told below: no append needed first
            repeat = named == {(item.scope.tenant, item.memory_id)} and _plain(item)
            if named and not repeat:
                flush()  # it names a memory this batch saves: the view must hold it
            try:
                first = retried(core, tx.view, item)
                if first is not None:  # a retry of a save already recorded: its first answer
                    results.append(first)
                    continue
                ready = prepared.get(index)
                if ready is not None and _still(ready, item, reads):
                    event, adopted = ready.event, None
                    refuse_if_revoked(shares[item.scope.tenant], event, reads.row(item.scope.tenant, event.memory_id))
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
