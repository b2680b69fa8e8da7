"""memwarden as one caller sees it: the Warden's operations with the
caller already named.

``Memories`` is the protocol both an in-process Warden acting for a caller
(``Warden.acting_as(caller)``, an ``Acting``) and the HTTP client
(``memwarden.client.Client``, whose caller is its key) implement, so code
written against one runs against the other, and one contract suite
(``tests/test_client.py``) holds both to the same answers.

Both speak log positions as the caller is given them (``_tokens``): a
caller that may not read the log (an agent key) is answered tokens in
every ``seq`` and gives them back as ``min_seq``; staff get seqs. (The
Warden's own methods, which take ``caller=`` each time, speak seqs: a
process holding the Warden holds the store.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from ._limits import Page
from ._rights import Principal
from ._tokens import MinSeq
from ._views import DueItem, ErasureResult, Found, MemoryView, RevocationResult, SaveResult, VerifyResult


class Memories(Protocol):
    """The operations a caller may ask for, in the Warden's own terms."""

    def save(self, **fields: Any) -> SaveResult: ...
    def save_many(self, memories: Iterable[Mapping[str, Any]]) -> list[SaveResult]: ...
    def get(self, memory_id: str, *, tenant: str | None = None, min_seq: MinSeq = None) -> MemoryView: ...
    def query(self, *, tenant: str, **filters: Any) -> list[MemoryView]: ...
    def search(
        self, *, tenant: str, query: str | None = None, vector: Sequence[float] | None = None, **options: Any
    ) -> Page[Found]: ...
    def verify(self, memory_id: str, *, tenant: str | None = None, accept: bool = False) -> VerifyResult: ...
    def due(self, *, limit: int | None = None) -> list[DueItem]: ...
    def explain(self, memory_id: str, *, tenant: str | None = None, as_of: str | None = None) -> dict[str, Any]: ...
    def erase(
        self, *, memory_id: str | None = None, user: str | None = None, tenant: str | None = None, reason: str
    ) -> ErasureResult: ...
    def revoke(self, selector: Mapping[str, Any], *, reason: str) -> RevocationResult: ...
    def preview_revocation(self, selector: Mapping[str, Any]) -> dict[str, Any]: ...
    def revocation(self, revocation_id: str) -> dict[str, Any]: ...
    def revocations(self, *, limit: int = 100, offset: int = 0) -> list[dict[str, Any]]: ...
    def set_policy(self, policy: str, version: int | str) -> int: ...
    def policies(self) -> dict[str, int | str]: ...
    def tenants(self) -> list[str]: ...
    def memory_save(self, *, agent: str, key: str, content: str, tenant: str | None = None) -> dict[str, Any]: ...
    def memory_load(self, *, agent: str, tenant: str | None = None, history: bool = False) -> dict[str, Any]: ...
    def audit_head(self) -> dict[str, Any]: ...


class Acting:
    """A Warden acting for one caller: every operation of ``Memories``,
    passed on with ``caller``, its positions as the caller is given them."""

    def __init__(self, warden: Any, caller: Principal) -> None:  # the Warden, which imports this module
        if not isinstance(caller, Principal):
            raise TypeError(f"caller must be a Principal, not {type(caller).__name__}")
        self.warden = warden
        self.caller = caller
        self.positions = warden.positions(caller)

    def save(self, **fields: Any) -> SaveResult:
        return self.positions.saved(self.warden.save(**fields, caller=self.caller))

    def save_many(self, memories: Iterable[Mapping[str, Any]]) -> list[SaveResult]:
        return [self.positions.saved(r) for r in self.warden.save_many(memories, caller=self.caller)]

    def get(self, memory_id: str, *, tenant: str | None = None, min_seq: MinSeq = None) -> MemoryView:
        floor = self.positions.taken(min_seq)
        with self.positions.waiting():
            view = self.warden.get(memory_id, tenant=tenant, min_seq=floor, caller=self.caller)
        return self.positions.view(view)

    def query(self, *, tenant: str, **filters: Any) -> list[MemoryView]:
        if "min_seq" in filters:
            filters["min_seq"] = self.positions.taken(filters["min_seq"])
        with self.positions.waiting():
            return self.positions.views(self.warden.query(tenant=tenant, **filters, caller=self.caller))

    def search(
        self, *, tenant: str, query: str | None = None, vector: Sequence[float] | None = None, **options: Any
    ) -> Page[Found]:
        if "min_seq" in options:
            options["min_seq"] = self.positions.taken(options["min_seq"])
        with self.positions.waiting():
            found = self.warden.search(tenant=tenant, query_text=query, vector=vector, **options, caller=self.caller)
        return self.positions.found(found)

    def verify(self, memory_id: str, *, tenant: str | None = None, accept: bool = False) -> VerifyResult:
        return self.positions.verified(self.warden.verify(memory_id, tenant=tenant, accept=accept, caller=self.caller))

    def due(self, *, limit: int | None = None) -> list[DueItem]:
        return self.warden.due(limit=limit, caller=self.caller)

    def explain(self, memory_id: str, *, tenant: str | None = None, as_of: str | None = None) -> dict[str, Any]:
        return self.positions.explained(self.warden.explain(memory_id, tenant=tenant, as_of=as_of, caller=self.caller))

    def erase(
        self, *, memory_id: str | None = None, user: str | None = None, tenant: str | None = None, reason: str
    ) -> ErasureResult:
        return self.warden.erase(memory_id=memory_id, user=user, tenant=tenant, reason=reason, caller=self.caller)

    def revoke(self, selector: Mapping[str, Any], *, reason: str) -> RevocationResult:
        return self.warden.revoke(dict(selector), reason=reason, caller=self.caller)

    def preview_revocation(self, selector: Mapping[str, Any]) -> dict[str, Any]:
        return self.warden.preview_revocation(dict(selector), caller=self.caller)

    def revocation(self, revocation_id: str) -> dict[str, Any]:
        return self.warden.revocation(revocation_id, caller=self.caller)

    def revocations(self, *, limit: int = 100, offset: int = 0) -> list[dict[str, Any]]:
        return self.warden.revocations(limit=limit, offset=offset, caller=self.caller)

    def set_policy(self, policy: str, version: int | str) -> int:
        return self.warden.set_policy(policy, version, caller=self.caller)

    def policies(self) -> dict[str, int | str]:
        return self.warden.policies(caller=self.caller)

    def tenants(self) -> list[str]:
        return self.warden.tenants(caller=self.caller)

    def memory_save(self, *, agent: str, key: str, content: str, tenant: str | None = None) -> dict[str, Any]:
        saved = self.warden.memory_save(tenant=tenant, agent=agent, key=key, content=content, caller=self.caller)
        return self.positions.answer(saved)

    def memory_load(self, *, agent: str, tenant: str | None = None, history: bool = False) -> dict[str, Any]:
        return self.warden.memory_load(tenant=tenant, agent=agent, history=history, caller=self.caller)

    def audit_head(self) -> dict[str, Any]:
        return self.warden.audit_head(caller=self.caller)
