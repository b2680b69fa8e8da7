"""memwarden.engine: commands, the usability gate, fetchers and the faces."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memwarden.events import lazy_exports

# what type checkers and the docs read; each name is imported when first
# asked for (``lazy_exports``): importing the package costs next to nothing
if TYPE_CHECKING:
    from memwarden.projections import Access, IndexSettings

    from . import _metrics as metrics  # the Prometheus families, for the faces that serve them
    from ._addresses import AddressPolicy, AddressRefused
    from ._answers import Answer, answer, refusal_from
    from ._committed import read_back_committed, settle_committed
    from ._errors import (
        AckRefused,
        AmbiguousMemory,
        BatchRefused,
        ChecksumMismatch,
        FetchFailed,
        Forbidden,
        InvalidInput,
        MemoryErased,
        MemoryIdTaken,
        MemoryNotFound,
        RevocationNotFound,
        RevokedScope,
        ScopeNotAllowed,
        ServerRefused,
        SinkNotFound,
        SinkUnavailable,
        StaleView,
        StoreDamaged,
        StoreUnavailable,
        TooLarge,
        TooManyWaiters,
        Unauthorized,
        UserNotFound,
    )
    from ._fetchers import Fetchers
    from ._gate import ACTIONS, REASONS, Decision, decide
    from ._keys import KeyStore
    from ._limits import MAX_BATCH, MAX_PAGE, Limits, Page, refuse_local_source
    from ._logging import configure_logging
    from ._memories import Acting, Memories
    from ._policy import KindRule, PolicyFile, TtlPolicy
    from ._readback import read_back, readback_records
    from ._reading import search_words
    from ._restore import restore
    from ._rights import OPERATOR, SYSTEM, Principal, may
    from ._scheduler import HostBackoff, Scheduler, SharedBackoff, expiry_event_id
    from ._validation import field_problems
    from ._views import (
        DueItem,
        ErasureResult,
        Found,
        ImportResult,
        MemoryView,
        RevocationResult,
        SaveResult,
        VerifyResult,
    )
    from ._warden import Warden
    from .recall._embedders import (
        CallableEmbedder,
        Embedder,
        EmbedderFailed,
        HashEmbedder,
        HttpEmbedder,
        register_embedder,
    )
    from .recall._search import MODES as SEARCH_MODES
    from .recall._search import RRF_K
    from .sinks._clients import signed_headers
    from .sinks._config import NOTICE_TYPES, SinkSpec, sinks_from_table
    from .sinks._worker import SinkWorker

__getattr__ = lazy_exports(__name__, __file__)

__all__ = [
    "ACTIONS",
    "MAX_BATCH",
    "MAX_PAGE",
    "NOTICE_TYPES",
    "OPERATOR",
    "REASONS",
    "RRF_K",
    "SEARCH_MODES",
    "SYSTEM",
    "Access",
    "AckRefused",
    "Acting",
    "AddressPolicy",
    "AddressRefused",
    "AmbiguousMemory",
    "Answer",
    "BatchRefused",
    "CallableEmbedder",
    "ChecksumMismatch",
    "Decision",
    "DueItem",
    "Embedder",
    "EmbedderFailed",
    "ErasureResult",
    "FetchFailed",
    "Fetchers",
    "Forbidden",
    "Found",
    "HashEmbedder",
    "HostBackoff",
    "HttpEmbedder",
    "ImportResult",
    "IndexSettings",
    "InvalidInput",
    "KeyStore",
    "KindRule",
    "Limits",
    "Memories",
    "MemoryErased",
    "MemoryIdTaken",
    "MemoryNotFound",
    "MemoryView",
    "Page",
    "PolicyFile",
    "Principal",
    "RevocationNotFound",
    "RevocationResult",
    "RevokedScope",
    "SaveResult",
    "Scheduler",
    "ScopeNotAllowed",
    "ServerRefused",
    "SharedBackoff",
    "SinkNotFound",
    "SinkSpec",
    "SinkUnavailable",
    "SinkWorker",
    "StaleView",
    "StoreDamaged",
    "StoreUnavailable",
    "TooLarge",
    "TooManyWaiters",
    "TtlPolicy",
    "Unauthorized",
    "UserNotFound",
    "VerifyResult",
    "Warden",
    "answer",
    "configure_logging",
    "decide",
    "expiry_event_id",
    "field_problems",
    "may",
    "metrics",
    "read_back",
    "read_back_committed",
    "readback_records",
    "refusal_from",
    "refuse_local_source",
    "register_embedder",
    "restore",
    "search_words",
    "settle_committed",
    "signed_headers",
    "sinks_from_table",
]
