"""The rows the view's questions answer with, by name.

Named tuples rather than dicts or dataclasses: these are read by the
hundred or the thousand (a query's page, a sweep, the vectors), and
they cost what a tuple costs to make (a frozen dataclass costs a call
per field: those read a few at a time, ``_reads``' and ``MemoryRow``,
are dataclasses) and to read, still unpack where a caller wants every
field, and let callers read ``row.expires_at`` instead of counting positions.
Each is made where a backend's statement returns it (``SQLView`` and its
mixins), from the columns that statement selects, in that order.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ._rows import VIEW_COLUMNS


class ViewRow(NamedTuple):
    """A memory as the agent query and ``get`` select it: ``VIEW_COLUMNS``,
    then its summary and its stored content (bytes; None without one)."""

    memory_id: str
    version: int
    status: str
    kind: str
    checksum: str | None
    tenant: str
    project: str | None
    permission: str | None
    user: str | None
    agent: str | None
    tool: str | None
    source_url: str
    fetched_at: str
    expires_at: str | None
    verified_at: str | None
    policy: str
    revocation_version: int | str
    derived_from: str
    last_seq: int
    revoked_by: str | None
    invalidation_reason: str | None
    summary: str | None
    content: bytes | None


# the statements select VIEW_COLUMNS by that list, so the names must be it
if ViewRow._fields != (*VIEW_COLUMNS, "summary", "content"):
    raise AssertionError(f"ViewRow's fields are not VIEW_COLUMNS + summary, content: {ViewRow._fields}")


class Expiring(NamedTuple):
    """A usable memory at or past its expiry (``past_expiry``)."""

    tenant: str
    memory_id: str
    version: int
    expires_at: str


class DueRow(NamedTuple):
    """A memory to re-verify and why (``due``)."""

    tenant: str
    memory_id: str
    source_url: str
    reason: str


class Child(NamedTuple):
    """A memory drawn from another that is still in the read paths (``children``)."""

    tenant: str
    memory_id: str  # the child's
    version: int  # the child's current version
    parent_id: str


class VectorRow(NamedTuple):
    """A memory's current vectors and the scope a search filters by
    (``vector_rows``): only of a version that may yet be used."""

    memory_id: str
    agent: str | None
    project: str | None
    permission: str | None
    user: str | None
    tool: str | None
    kind: str
    vector: Any  # bytes (bytea on PostgreSQL): the version's vectors back to back


class EmbeddingCount(NamedTuple):
    """How many current versions one embedder's vectors of one size cover
    (``embedding_counts``; None, None: versions without a vector)."""

    embedder: str | None
    dims: int | None
    versions: int


class StaleVector(NamedTuple):
    """A current version whose vector the wanted embedder did not make (``stale_vectors``)."""

    tenant: str
    memory_id: str
    version: int
    checksum: str
    embedder: str | None  # what made its vector (None: it has none)
    dims: int | None
