"""Reading memories: every read checks the text against its checksum and asks the gate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memwarden.events import actual_checksum, check_storable, content_checksum, unstorable
from memwarden.projections import STATUSES, TERMINAL, Access, AgentQuery, MemoryRow, ViewReader, ViewRow, row_of

from ._content_filter import content_tests
from ._core import Core, log
from ._derivation import Judge
from ._errors import AmbiguousMemory, FetchFailed, InvalidInput, MemoryNotFound
from ._gate import Decision, GateRow, ParentState, decide
from ._limits import MAX_PAGE, AnswerBudget, Page
from ._rights import Principal, confine_agent, confine_tenant, operation, shows_text, told_of
from ._versions import in_force
from ._views import MemoryView

MAX_LIMIT = MAX_PAGE
MAX_OFFSET = 100_000


@operation("read")
def get(
    core: Core, memory_id: str, *, tenant: str | None = None, caller: Principal, min_seq: int | None = None
) -> MemoryView:
    """One memory with its content checked against its checksum now.
    ``tenant`` names it where the id alone is ambiguous for the caller;
    the lookup is confined to what ``caller`` may read."""
    if not isinstance(memory_id, str) or unstorable(memory_id) is not None:
        raise MemoryNotFound(str(memory_id))  # no store holds such an id: none to find
    if tenant is not None:
        check_storable("tenant", tenant)  # refused naming it, as the query refuses it
        if not tenant.strip():
            raise InvalidInput("tenant", "is empty: name a tenant, or leave it out")
    now = core.now()
    with core.reading(min_seq) as view:
        # up to two: one per tenant holding the id, among those the caller may read
        found = view.agent_query(
            tenant=tenant,
            access=caller.access,
            filters={},
            ids=[memory_id],
            id_prefixes=None,
            match=None,
            content=None,
            usable_at=None,
            limit=2,
            offset=0,
        )
        if not found:
            raise MemoryNotFound(memory_id)
        if len(found) > 1:
            raise AmbiguousMemory(memory_id)
        values = found[0]
        policies = view.policies()  # one read for the memory's version and its evidence's
        # a memory drawn from nothing has no evidence to judge: no Judge to
        # build (as the query's ``evidence`` skips such rows)
        parents = Judge(view, now, policies).parents(values) if values.derived_from != "[]" else ()
    return _judge(core, values, in_force(policies, values.policy), now, parents, caller)


def _judge(
    core: Core,
    values: ViewRow,
    policy_version: int | str,
    now: str,
    parents: Sequence[ParentState],
    caller: Principal,
) -> MemoryView:
    """Apply the gate to one row selected as ``VIEW_COLUMNS`` with its
    summary and stored content, its evidence
    already judged; on a checksum mismatch, record it, quarantine, and
    try a resync. What the caller is told of it is ``_rights``': a detail
    naming evidence it may not see is said without that evidence's state
    (``told_of``), and of a memory whose text it may not receive
    (``shows_text``) it gets no summary and no checksum (a short text is
    found again from its hash)."""
    status, data = values.status, values.content
    tenant = values.tenant

    def judged(row: GateRow, content_ok: bool | None) -> Decision:
        decision = decide(row, now=now, policy_version=policy_version, content_ok=content_ok, parents=parents)
        return told_of(caller, tenant, decision, parents)

    if status == "erased" or status == "revoked":
        view = MemoryView.of_values(values, judged(values, None), None, values.summary)
    elif (ok := actual_checksum(data) == values.checksum) and status != "quarantined" and data is not None:
        decision = judged(values, True)
        view = MemoryView.of_values(values, decision, data.decode("utf-8") if decision.usable else None, values.summary)
    else:
        row, ok, text = _integrity(core, (tenant, values.memory_id), data, ok)
        if row is None:
            raise MemoryNotFound(values.memory_id)
        view = MemoryView.of(row, judged(row, ok), text if ok else None, values.summary)
    if not shows_text(caller, view.status):
        view = view._replace(summary=None, checksum=None)
    return view


def _integrity(
    core: Core, key: tuple[str, str], data: bytes | None, ok: bool
) -> tuple[MemoryRow | None, bool, str | None]:
    # the event models (and pydantic) load here, where a read may write: a text intact reads without them
    from memwarden.events import MemoryIntegrityFailed, MemoryResynced

    tenant, memory_id = key
    with core.reading() as view:
        row = row_of(view, Access.system(), tenant, memory_id)  # every column: the fetchers need the source's
    if row is None:
        return None, False, None
    if not ok and row.status != "quarantined":
        log.error("integrity_failed", memory_id=memory_id, expected=row.checksum, actual=actual_checksum(data))
        with core.transaction() as tx:
            current = row_of(tx.view, Access.system(), tenant, memory_id)
            if current is not None and current.status != "quarantined" and current.status not in TERMINAL:
                tx.append(
                    [
                        MemoryIntegrityFailed(
                            tenant=tenant,
                            memory_id=memory_id,
                            version=current.version,
                            expected_checksum=current.checksum,
                            actual_checksum=actual_checksum(data),
                            actor="memwarden",
                        )
                    ]
                )
    # Resync: the memory's own source may still hold the recorded text.
    try:
        text = core.fetchers.fetch(row.as_dict())
    except FetchFailed as exc:
        log.warning("resync_failed", memory_id=memory_id, category=exc.category)
        text = None
    if text is None and ok:
        text = data.decode("utf-8") if data is not None else None  # the blob was restored meanwhile
    with core.transaction() as tx:
        current = row_of(tx.view, Access.system(), tenant, memory_id)
        if (
            text is not None
            and current is not None
            and content_checksum(text) == current.checksum
            and current.status == "quarantined"
        ):
            tx.texts.restore(tenant, memory_id, current.version, current.checksum, text)
            tx.append(
                [
                    MemoryResynced(
                        tenant=tenant,
                        memory_id=memory_id,
                        version=current.version,
                        content_checksum=current.checksum,
                        resynced_from=core.fetchers.describe(current.as_dict()),
                        actor="memwarden",
                    )
                ]
            )
            log.info("memory_resynced", memory_id=memory_id)
            return row_of(tx.view, Access.system(), tenant, memory_id) or current, True, text
    return current or row, False, None


@operation("read")
def query(
    core: Core,
    *,
    tenant: str,
    project: str | None = None,
    permission: str | None = None,
    user: str | None = None,
    agent: str | None = None,
    tool: str | None = None,
    kind: str | None = None,
    text: str | None = None,
    include_unusable: bool = False,
    limit: int = 100,
    min_seq: int | None = None,
    with_content: bool = True,
    ids: Sequence[str] | None = None,
    caller: Principal,
    status: str | None = None,
    offset: int = 0,
    id_prefix: str | Sequence[str] | None = None,
    where: Mapping[str, Any] | None = None,
) -> Page[MemoryView]:
    """Usable memories in a scope, newest first; with ``include_unusable``,
    every memory in it and why it is not usable. ``ids`` narrows the
    scope to those memories (read-back uses it to ask about exactly the
    memories a revocation covers, through this same path). The statement
    itself is confined to what ``caller`` may read: a tenant it is not
    bound to is refused, and a bound key reads its own agent's memories. ``status``
    narrows to the view's stored status; ``offset`` skips that many
    answers (a page of a listing). ``id_prefix`` (one or a list) keeps the
    memories whose id starts with it; ``where`` the ones whose content, read
    as JSON, passes its conditions (``_content_filter``): both are decided
    in the query's own statement, so ``limit`` and ``offset`` count only
    what passes. The answer's contents are held to
    ``Limits.max_answer_bytes``: past it the page stops early, ``truncated``,
    and the next page starts at its ``next_offset``."""
    if not isinstance(tenant, str) or not tenant:
        raise InvalidInput("tenant", "is required")
    check_storable("tenant", tenant)
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput("limit", f"must be between 1 and {MAX_LIMIT}")
    confine_tenant(caller, tenant)
    agent = confine_agent(caller, agent)
    access = caller.access
    if not isinstance(offset, int) or not 0 <= offset <= MAX_OFFSET:
        raise InvalidInput("offset", f"must be between 0 and {MAX_OFFSET}")
    if status is not None and status not in STATUSES:
        raise InvalidInput("status", f"must be one of {', '.join(STATUSES)}")
    filters = dict(project=project, permission=permission, user=user, agent=agent, tool=tool, kind=kind, status=status)
    if ids is not None:
        ids = list(ids)
        if not ids or len(ids) > MAX_LIMIT:
            raise InvalidInput("ids", f"give between 1 and {MAX_LIMIT} ids")
    match = search_words(text) if text is not None else None
    prefixes = _id_prefixes(id_prefix)
    tests = content_tests(where) if where is not None else None
    now = core.now()
    views: list[MemoryView] = []
    budget = AnswerBudget(core.limits.max_answer_bytes)
    skipped = 0  # answers before ``offset``: judged (the gate decides what counts), not kept
    position = 0
    rows = _FIRST_ROWS

    def evidence(view: ViewReader, policies: dict[str, str], rows: list[ViewRow]) -> dict[str, Any]:
        judge = Judge(view, now, policies)
        return {v.memory_id: judge.parents(v) for v in rows if v.derived_from != "[]"}

    while len(views) < limit and not budget.truncated:
        size = max(min(limit + offset - skipped - len(views), rows), 16)
        query = AgentQuery(
            tenant=tenant,
            access=access,
            filters=filters,
            ids=ids,
            id_prefixes=prefixes,
            match=match,
            content=tests,
            usable_at=None if include_unusable else now,
            limit=size,
            offset=position,
        )
        page = core.agent_page(min_seq, query, evidence)
        for values in page.rows:
            parents = page.evidence.get(values.memory_id, ())
            view = _judge(core, values, in_force(page.policies, values.policy), now, parents, caller)
            if not with_content:
                view = _without_content(view)
            if not (include_unusable or view.usable):
                continue
            if skipped < offset:
                skipped += 1
            elif not budget.admits(view.content):
                break
            else:
                views.append(view)
                if len(views) >= limit:
                    break
        if len(page.rows) < size:
            break
        position += size
        rows = _next_rows(rows, page.rows, core.limits.max_answer_bytes)
    return Page.of(views, truncated=budget.truncated, next_offset=offset + len(views))


MAX_ID_PREFIXES = 16


def _id_prefixes(id_prefix: str | Sequence[str] | None) -> list[str] | None:
    if id_prefix is None:
        return None
    prefixes = [id_prefix] if isinstance(id_prefix, str) else list(id_prefix)
    if not prefixes or len(prefixes) > MAX_ID_PREFIXES:
        raise InvalidInput("id_prefix", f"give between 1 and {MAX_ID_PREFIXES} prefixes")
    for prefix in prefixes:
        if not isinstance(prefix, str) or not prefix or len(prefix) > 512 or unstorable(prefix) is not None:
            raise InvalidInput("id_prefix", f"{prefix!r} is not the start of an id (1 to 512 characters of text)")
    return prefixes


# rows a page of the agent query reads at first, and the factor it grows by
# while the rows' stored contents are small: every row read holds its
# content, so a page of 10,000 large rows would hold gigabytes before the
# answer's budget could stop it
_FIRST_ROWS = 128
_GROWTH = 4


def _next_rows(rows: int, page: list[ViewRow], budget: int) -> int:
    """How many rows the next page reads: more while a page's contents are
    a small share of the answer's budget, fewer when they are not."""
    held = sum(len(r.content) for r in page if r.content is not None)
    if held * _GROWTH <= budget:
        return rows * _GROWTH
    return max(16, rows * budget // (held * _GROWTH))


@operation("read")
def search_ids(core: Core, text: str, *, tenant: str | None = None, caller: Principal) -> list[str]:
    """Ids of memories whose summary or text match (any status): the raw
    text-index path, used by read-back to prove nothing leaks there."""
    with core.reading() as view:
        return view.text_matches(caller.access, search_words(text), tenant)


def _without_content(view: MemoryView) -> MemoryView:
    return view._replace(content=None)


def search_words(text: str) -> list[str]:
    """The words of a caller's text search, checked: the store matches each
    as a prefix of a word in a memory's summary or content, so a Korean stem
    finds its inflected forms (서울 finds 서울에서)."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("text", "must be non-empty")
    if any(ord(c) < 32 and c not in "\t\n\r" for c in text) or len(text) > 1000:
        raise InvalidInput("text", "must be at most 1000 characters, without NUL or other control characters")
    words = distinct_words(text)
    if not words:
        raise InvalidInput("text", "has no searchable words")
    if len(words) > MAX_SEARCH_WORDS:
        raise InvalidInput("text", f"must have at most {MAX_SEARCH_WORDS} distinct words, has {len(words)}")
    return words


def distinct_words(text: str) -> list[str]:
    """The words a text search matches, each once: every word is a prefix
    term the index walks, so a repeat adds cost and no meaning, and past
    ``MAX_SEARCH_WORDS`` distinct ones no search is cheap."""
    return list(dict.fromkeys(w for w in text.split() if w.strip('"')))


MAX_SEARCH_WORDS = 32
