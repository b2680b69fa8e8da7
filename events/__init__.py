"""memwarden.events: event models, the canonical encoding and the log backends.

What only one backend's store shares with its log has a public module of
its own: ``memwarden.events.sqlite`` (schema helpers) and
``memwarden.events.postgres`` (the PostgreSQL log, which needs the driver,
an extra; its names are also here, imported when first asked for)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

# what type checkers and the docs read; each name is imported when first
# asked for (``lazy_exports``): importing the package costs next to nothing
if TYPE_CHECKING:
    from ._bytes import UnstorableText, check_storable, json_storable, unstorable, unstorable_fields
    from ._canonical import GENESIS_HASH, canonical_json, content_checksum, sha256_hex
    from ._errors import (
        DATABASE_ERRORS,
        SERVER_ERRORS,
        EventIdReused,
        EventRowDamaged,
        InvalidField,
        LogDamaged,
        LogDiverged,
        Refusal,
        StorageError,
        StoreDamaged,
        StoreFailed,
        StoreUnavailable,
        TextErased,
        VersionConflict,
    )
    from ._files import FILE_MODE, FOLDER_MODE, private_file, private_folder, write_private
    from ._jsonl import JsonlEventLog, read_texts, read_verified, verify_export, verify_file, write_export
    from ._log import get_logger
    from ._models import (
        EVENT_ADAPTER,
        EVENT_TYPES,
        Event,
        MemoryErased,
        MemoryExpired,
        MemoryIntegrityFailed,
        MemoryInvalidated,
        MemoryReembedded,
        MemoryResynced,
        MemorySaved,
        MemoryVerificationFailed,
        MemoryVerified,
        PolicyVersionChanged,
        ReadbackConfirmed,
        ReadbackFailed,
        RevocationIssued,
        SinkReadbackRecorded,
    )
    from ._recorded import (
        ROW_COLUMNS,
        ChainReport,
        EventLog,
        Head,
        RecordedEvent,
        event_from_row,
    )
    from ._sqlite import SQLiteEventLog, WriteTransaction, legacy_tenants
    from ._sqlite_connect import SQLiteOptions, Synchronous, connect
    from ._streams import memory_stream
    from ._texts import CONTENT_BYTES, SUMMARY_TEXT, TEXT_JOIN, Texts, TextStore, actual_checksum, migrate_blobs
    from ._time import (
        CLOCK_SKEW,
        MAX_DURATION,
        UTC,
        Clock,
        FrozenClock,
        SystemClock,
        canonical_ts,
        check_range,
        format_ts,
        iso_week,
        parse_duration,
        parse_ts,
        to_utc,
    )
    from ._translated import translated
    from ._types import PolicyVersion
    from ._upcasting import LegacyTenants, current_schema_version, register_upcaster
    from ._urls import has_user_info, redacted, scrubbed, spelled
    from ._values import CacheKey, ParentRef, Scope, Selector, new_id
    from ._vectors import MAX_EMBEDDINGS, Vector, check_vector, check_vectors
    from ._version_keys import version_key, version_number, version_value

    # the PostgreSQL log needs the driver, an extra: like every name here,
    # imported only when asked for
    from .postgres import PostgresEventLog as PostgresEventLog
    from .postgres import PostgresTextStore as PostgresTextStore
    from .postgres import QmarkConnection as QmarkConnection

__getattr__ = lazy_exports(__name__, __file__)

__all__ = [
    "CLOCK_SKEW",
    "CONTENT_BYTES",
    "DATABASE_ERRORS",
    "EVENT_ADAPTER",
    "EVENT_TYPES",
    "FILE_MODE",
    "FOLDER_MODE",
    "GENESIS_HASH",
    "MAX_DURATION",
    "MAX_EMBEDDINGS",
    "ROW_COLUMNS",
    "SERVER_ERRORS",
    "SUMMARY_TEXT",
    "TEXT_JOIN",
    "UTC",
    "CacheKey",
    "ChainReport",
    "Clock",
    "Event",
    "EventIdReused",
    "EventLog",
    "EventRowDamaged",
    "FrozenClock",
    "Head",
    "InvalidField",
    "JsonlEventLog",
    "LegacyTenants",
    "LogDamaged",
    "LogDiverged",
    "MemoryErased",
    "MemoryExpired",
    "MemoryIntegrityFailed",
    "MemoryInvalidated",
    "MemoryReembedded",
    "MemoryResynced",
    "MemorySaved",
    "MemoryVerificationFailed",
    "MemoryVerified",
    "ParentRef",
    "PolicyVersion",
    "PolicyVersionChanged",
    "ReadbackConfirmed",
    "ReadbackFailed",
    "RecordedEvent",
    "Refusal",
    "RevocationIssued",
    "SQLiteEventLog",
    "SQLiteOptions",
    "Scope",
    "Selector",
    "SinkReadbackRecorded",
    "StorageError",
    "StoreDamaged",
    "StoreFailed",
    "StoreUnavailable",
    "Synchronous",
    "SystemClock",
    "TextErased",
    "TextStore",
    "Texts",
    "UnstorableText",
    "Vector",
    "VersionConflict",
    "WriteTransaction",
    "actual_checksum",
    "canonical_json",
    "canonical_ts",
    "check_range",
    "check_storable",
    "check_vector",
    "check_vectors",
    "connect",
    "content_checksum",
    "current_schema_version",
    "event_from_row",
    "format_ts",
    "get_logger",
    "has_user_info",
    "iso_week",
    "json_storable",
    "lazy_exports",
    "legacy_tenants",
    "memory_stream",
    "migrate_blobs",
    "new_id",
    "parse_duration",
    "parse_ts",
    "private_file",
    "private_folder",
    "read_texts",
    "read_verified",
    "redacted",
    "register_upcaster",
    "scrubbed",
    "sha256_hex",
    "spelled",
    "to_utc",
    "translated",
    "unstorable",
    "unstorable_fields",
    "verify_export",
    "verify_file",
    "version_key",
    "version_number",
    "version_value",
    "write_export",
    "write_private",
]
