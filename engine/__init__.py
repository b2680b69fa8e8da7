"""memwarden.engine: commands, the usability gate, fetchers and the faces."""

from __future__ import annotations

from memwarden.projections import EVERYONE, Access

from ._addresses import AddressPolicy, AddressRefused
from ._errors import (
    AmbiguousMemory,
    BatchRefused,
    ChecksumMismatch,
    FetchFailed,
    InvalidInput,
    MemoryErased,
    MemoryIdTaken,
    MemoryNotFound,
    RevocationNotFound,
    RevokedScope,
    ScopeNotAllowed,
    StaleView,
)
from ._fetchers import Fetchers
from ._gate import ACTIONS, REASONS, Decision, decide
from ._keys import KeyStore, Principal
from ._limits import Limits, TooLarge, refuse_local_source
from ._logging import configure_logging
from ._policy import KindRule, PolicyFile, TtlPolicy
from ._readback import read_back, readback_records
from ._reading import search_words
from ._scheduler import HostBackoff, Scheduler, SharedBackoff, expiry_event_id
from ._views import DueItem, ImportResult, MemoryView, RevocationResult, SaveResult, VerifyResult
from ._warden import Warden

__all__ = [
    "ACTIONS",
    "Access",
    "AddressPolicy",
    "AddressRefused",
    "AmbiguousMemory",
    "BatchRefused",
    "ChecksumMismatch",
    "Decision",
    "DueItem",
    "EVERYONE",
    "FetchFailed",
    "Fetchers",
    "HostBackoff",
    "ImportResult",
    "InvalidInput",
    "KeyStore",
    "KindRule",
    "Limits",
    "MemoryErased",
    "MemoryIdTaken",
    "MemoryNotFound",
    "MemoryView",
    "PolicyFile",
    "Principal",
    "REASONS",
    "RevocationNotFound",
    "RevocationResult",
    "RevokedScope",
    "ScopeNotAllowed",
    "SaveResult",
    "Scheduler",
    "SharedBackoff",
    "StaleView",
    "TooLarge",
    "TtlPolicy",
    "VerifyResult",
    "Warden",
    "configure_logging",
    "decide",
    "expiry_event_id",
    "read_back",
    "readback_records",
    "refuse_local_source",
    "search_words",
]
