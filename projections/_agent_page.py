"""One page of the agent query, as the engine asks a store for it.

The engine's hottest read wants four things of one committed state: the
view's position (for ``min_seq``), the policies in force, the page's rows,
and, for the rows drawn from other memories, what their evidence is then.
``Store.agent_page`` answers all four. A store reads them in a snapshot
(``read_page``), or, where a snapshot costs round trips, in one statement
whose snapshot holds the first three, and in a snapshot only when a row
needs its evidence read too (PostgreSQL: ``_postgres_store``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol, TypedDict, TypeVar, Unpack

from ._access import Access
from ._content_tests import ContentTest
from ._named import ViewRow


class AgentQuery(TypedDict):
    """What a page of the agent query asks (``SQLView.agent_query_sql``)."""

    # None: every tenant ``access`` allows (a memory named by id alone: ``get``)
    tenant: str | None
    access: Access
    filters: dict[str, str | None]
    ids: list[str] | None
    # only memories whose id starts with one of these (None: any id)
    id_prefixes: list[str] | None
    match: Sequence[str] | None
    # only memories whose content, read as JSON, passes every test (None: any)
    content: list[ContentTest] | None
    usable_at: str | None
    limit: int
    offset: int


class PageView(Protocol):
    """What ``read_page`` asks of a view: a part of the port's ``ViewReader``,
    named here because the port's module imports this one."""

    def position(self) -> int: ...
    def policies(self) -> dict[str, str]: ...
    def agent_query(self, **query: Unpack[AgentQuery]) -> list[ViewRow]: ...


View = TypeVar("View", bound=PageView)
# what the engine finds about a page's derived rows, read in the page's
# own state: (view, policies, rows) -> by memory id; the view is the
# port's ``ViewReader`` (``Evidence`` in ``_port``)
PageEvidence = Callable[[View, dict[str, str], list[ViewRow]], dict[str, Any]]


class AgentPage(NamedTuple):
    """A page of the agent query and what it was judged against, all of
    one committed state of the view."""

    position: int
    policies: dict[str, str]
    rows: list[ViewRow]
    # what ``Evidence`` found for the rows drawn from other memories ({} if none is)
    evidence: dict[str, Any]


def holds_derived(rows: Sequence[ViewRow]) -> bool:
    """Whether a row of the page was drawn from other memories: its
    evidence must be read in the same state as the row."""
    return any(row.derived_from != "[]" for row in rows)


def read_page(view: View, query: AgentQuery, evidence: PageEvidence[View]) -> AgentPage:
    """The page, read in ``view``'s snapshot."""
    rows = view.agent_query(**query)
    policies = view.policies()
    found = evidence(view, policies, rows) if holds_derived(rows) else {}
    return AgentPage(view.position(), policies, rows, found)
