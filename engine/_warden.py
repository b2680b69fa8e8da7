"""The Warden: memwarden's Python API. Every face (CLI, HTTP, MCP) speaks to it.

A plain class: each public operation is a method with its own signature,
return type and docstring, which an editor, mypy and the docs follow. What
it does lives in the module the method names (``_saving``, ``_reading``,
``_revoking``, ...), a function of the ``Core`` it is given, and the method
imports that module when first called. So creating a Warden, or importing
this module, loads only ``Core`` and what every operation shares: a
command that reads one memory does not load the batch writer, the record
importer, the backup, the sinks' operations or semantic recall. (Mixins
holding the operations, one per capability, were the other shape: a
class imports its bases when it is made, the very cost this avoids.)
After the first call, a method's import is a lookup in ``sys.modules``.
What staff ask for (revocation, erasure, sinks, the past, the chain,
copies) is in ``_staff``, the part of the class they use.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, BinaryIO

from ._errors import InvalidInput
from ._memories import Acting
from ._rights import Principal, authorize, tenants_seen
from ._staff import StaffOperations
from ._tokens import Positions, Tokens, store_tokens
from ._views import DueItem

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from datetime import datetime, timedelta
    from pathlib import Path

    from memwarden.events import ParentRef, Scope

    from ._limits import Page
    from ._views import Found, ImportResult, MemoryView, SaveResult, VerifyResult
    from .recall._reembed import ReembedResult


class Warden(StaffOperations):
    """Decides whether a remembered fact may be used now.

    Open one per process (or per thread). What it owns is ``Core``: the
    store behind the ``--db`` URL (writes serialised by the store's write
    lock, reads of committed state), the clock, the TTL policy, the
    fetchers and the limits. Each operation (here, and staff's in
    ``StaffOperations``) passes that state to the function of the module
    it names, which checks the caller's right first; none reaches into
    another's private parts.
    """

    # -- saving, reading, recall and the tool cache ------------------------------------

    def save(
        self,
        *,
        memory_id: str,
        kind: str,
        summary: str,
        content: str,
        source_url: str,
        scope: Scope | dict[str, Any],
        fetched_at: datetime | str | None = None,
        expires_at: datetime | str | None = None,
        ttl: timedelta | str | None = None,
        verified_at: datetime | str | None = None,
        source: str | None = None,
        repo: str | None = None,
        branch: str | None = None,
        policy: str = "default",
        revocation_version: int | str | None = None,
        checksum: str | None = None,
        derived_from: Sequence[str | ParentRef | dict[str, Any]] = (),
        cache_key: dict[str, Any] | None = None,
        actor: str | None = None,
        event_id: str | None = None,
        embedding: Sequence[float] | None = None,
        embeddings: Sequence[Sequence[float]] | None = None,
        caller: Principal,
    ) -> SaveResult:
        """Record a memory with its provenance (a new version if its id exists in the tenant)."""
        from ._saving import save

        return save(
            self,
            memory_id=memory_id,
            kind=kind,
            summary=summary,
            content=content,
            source_url=source_url,
            scope=scope,
            fetched_at=fetched_at,
            expires_at=expires_at,
            ttl=ttl,
            verified_at=verified_at,
            source=source,
            repo=repo,
            branch=branch,
            policy=policy,
            revocation_version=revocation_version,
            checksum=checksum,
            derived_from=derived_from,
            cache_key=cache_key,
            actor=actor,
            event_id=event_id,
            embedding=embedding,
            embeddings=embeddings,
            caller=caller,
        )

    def save_many(
        self,
        memories: Iterable[Mapping[str, Any]],
        *,
        caller: Principal,
        check: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> list[SaveResult]:
        """Save every memory of ``memories`` in one transaction, or none."""
        from ._batch import save_many

        return save_many(self, memories, caller=caller, check=check)

    def get(
        self, memory_id: str, *, tenant: str | None = None, caller: Principal, min_seq: int | None = None
    ) -> MemoryView:
        """One memory with its content checked against its checksum now."""
        from ._reading import get

        return get(self, memory_id, tenant=tenant, caller=caller, min_seq=min_seq)

    def query(
        self,
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
        """Usable memories in a scope, newest first (every status with ``include_unusable``)."""
        from ._reading import query

        return query(
            self,
            tenant=tenant,
            project=project,
            permission=permission,
            user=user,
            agent=agent,
            tool=tool,
            kind=kind,
            text=text,
            include_unusable=include_unusable,
            limit=limit,
            min_seq=min_seq,
            with_content=with_content,
            ids=ids,
            caller=caller,
            status=status,
            offset=offset,
            id_prefix=id_prefix,
            where=where,
        )

    def search_ids(self, text: str, *, tenant: str | None = None, caller: Principal) -> list[str]:
        """Ids of memories whose summary or text match, in any status."""
        from ._reading import search_ids

        return search_ids(self, text, tenant=tenant, caller=caller)

    def search(
        self,
        *,
        tenant: str,
        query_text: str | None = None,
        vector: Sequence[float] | None = None,
        limit: int = 10,
        mode: str = "hybrid",
        weights: tuple[float, float] = (1.0, 1.0),
        project: str | None = None,
        permission: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        tool: str | None = None,
        kind: str | None = None,
        include_hidden: bool = False,
        min_seq: int | None = None,
        with_content: bool = True,
        min_similarity: float | None = None,
        caller: Principal,
    ) -> Page[Found]:
        """The memories of ``tenant`` closest in meaning (and words) to a query, usable now, best first."""
        from .recall._search import search

        return search(
            self,
            tenant=tenant,
            query_text=query_text,
            vector=vector,
            limit=limit,
            mode=mode,
            weights=weights,
            project=project,
            permission=permission,
            user=user,
            agent=agent,
            tool=tool,
            kind=kind,
            include_hidden=include_hidden,
            min_seq=min_seq,
            with_content=with_content,
            min_similarity=min_similarity,
            caller=caller,
        )

    def embedding_status(self, *, tenant: str | None = None, caller: Principal) -> dict[str, Any]:
        """Which embedders made the current vectors, and how many the configured one did not make."""
        from .recall._reembed import embedding_status

        return embedding_status(self, tenant=tenant, caller=caller)

    def reembed(
        self,
        *,
        tenant: str | None = None,
        batch: int = 500,
        max_batches: int | None = None,
        caller: Principal,
        actor: str | None = None,
    ) -> ReembedResult:
        """Make every stale vector again with the configured embedder, a batch at a time."""
        from .recall._reembed import reembed

        return reembed(self, tenant=tenant, batch=batch, max_batches=max_batches, caller=caller, actor=actor)

    def cache_put(
        self,
        *,
        tool: str,
        tool_version: str,
        input_hash: str,
        scope: Scope | dict[str, Any],
        content: str,
        source_url: str,
        ttl: timedelta | str | None = None,
        kind: str = "tool_result",
        actor: str | None = None,
        caller: Principal,
    ) -> SaveResult:
        """Store a tool result under its full cache key (tool, version, input, scope)."""
        from ._cache import cache_put

        return cache_put(
            self,
            tool=tool,
            tool_version=tool_version,
            input_hash=input_hash,
            scope=scope,
            content=content,
            source_url=source_url,
            ttl=ttl,
            kind=kind,
            actor=actor,
            caller=caller,
        )

    def cache_get(
        self, *, tool: str, tool_version: str, input_hash: str, scope: Scope | dict[str, Any], caller: Principal
    ) -> tuple[bool, MemoryView | None, str]:
        """A tool result by its full cache key: (hit, view, reason)."""
        from ._cache import cache_get

        return cache_get(self, tool=tool, tool_version=tool_version, input_hash=input_hash, scope=scope, caller=caller)

    # -- re-verification and the article's record format --------------------------------

    def verify(
        self, memory_id: str, *, tenant: str | None = None, caller: Principal, accept: bool = False
    ) -> VerifyResult:
        """Fetch the source again and compare it with the recorded checksum."""
        from ._verify import verify

        return verify(self, memory_id, tenant=tenant, caller=caller, accept=accept)

    def verify_due(self, *, accept: bool = False, limit: int | None = None, caller: Principal) -> list[VerifyResult]:
        """Verify every memory due for re-verification now (``due``)."""
        from ._verify import verify_due

        return verify_due(self, accept=accept, limit=limit, caller=caller)

    def due(self, *, limit: int | None = None, caller: Principal) -> list[DueItem]:
        """What must be re-verified now, in precedence (invalidated first)."""
        from ._due import due

        return due(self, limit=limit, caller=caller)

    def import_records(
        self, path: str | Path | BinaryIO, *, caller: Principal, progress: Callable[[int], None] | None = None
    ) -> ImportResult:
        """Turn a file of memory records (the article's format, or a binary
        stream of them, read once) into events."""
        from ._records import import_records

        return import_records(self, path, caller=caller, progress=progress)

    # -- the Memory API pair: (tenant, agent, key) memories --------------------------------

    def memory_save(
        self, *, tenant: str | None = None, agent: str, key: str, content: str, caller: Principal
    ) -> dict[str, Any]:
        """``/memory/save``: the memory (tenant, agent, key), a new version each time."""
        from ._memory_api import save

        return save(self, tenant=tenant, agent=agent, key=key, content=content, caller=caller)

    def memory_load(
        self, *, tenant: str | None = None, agent: str, history: bool = False, caller: Principal
    ) -> dict[str, Any]:
        """``/memory/load``: every key of an agent; texts only while they may be used."""
        from ._memory_api import load

        return load(self, tenant=tenant, agent=agent, history=history, caller=caller)

    # -- the caller's view, positions -------------------------------------------------------

    def acting_as(self, caller: Principal) -> Acting:
        """This Warden as ``caller`` sees it: every operation with the caller
        named once (``memwarden.engine.Memories``, which the HTTP client
        implements too)."""
        return Acting(self, caller)

    @functools.cached_property
    def tokens(self) -> Tokens:
        """The store's consistency tokens (``_tokens``): its secret, read or made once."""
        return store_tokens(self)

    def positions(self, caller: Principal) -> Positions:
        """Log positions as ``caller`` is given them: seqs, or for a caller
        that may not read the log, tokens (``_tokens``)."""
        return Positions(caller, lambda: self.tokens)

    def scan_records(self, path: str | Path, *, caller: Principal) -> list[DueItem]:
        """What the article's scan prints for a file of records (nothing is written)."""
        from ._records import scan_records

        authorize(caller, "read")
        return scan_records(path, self.clock.now())

    # -- reporting ----------------------------------------------------------------------

    def stats(self, *, caller: Principal) -> list[dict[str, Any]]:
        """The counters per ISO week (saves, re-fetches after expiry, blocks by revocation, ...)."""
        authorize(caller, "review")
        with self.reading() as view:
            return [week.as_dict() for week in view.weekly()]

    def tenants(self, *, caller: Principal) -> list[str]:
        """The tenants the caller may see (``_rights.tenants_seen``): those
        holding memories it may read (up to 1,000), and an agent key's own."""
        authorize(caller, "read")
        with self.reading() as view:
            return tenants_seen(caller, view.tenant_names(caller.access))

    def tail(self, n: int = 20, *, caller: Principal) -> list[dict[str, Any]]:
        authorize(caller, "review")
        return [e.envelope() for e in self.log.tail(n)]

    def head_seq(self) -> int:
        """The seq of the last event in the log (0 for an empty log): a
        count of events, readable by anyone who may ask the server whether
        it is alive, so no caller is named."""
        return self.log.head().seq

    def events_after(self, after: int, limit: int, *, caller: Principal) -> list[dict[str, Any]]:
        """Up to ``limit`` events after seq ``after``, as envelopes (the feed
        downstream caches follow). An ``after`` beyond the head is refused at
        once: it is no cursor of this log (a store restored from an older
        backup, or a mistake), and a long-poll on it would wait its whole time."""
        authorize(caller, "review")
        events = [e.envelope() for e in self.log.read(after_seq=after, until_seq=after + limit)]
        if not events and after > (head := self.log.head().seq):  # asked only of an empty answer
            raise InvalidInput(
                "after", f"is beyond the log's head, seq {head}: no such position in this log; follow on from the head"
            )
        return events
