"""memwarden.events.postgres: the PostgreSQL log and what the PostgreSQL
side of the store shares with it.

Apart from ``memwarden.events`` because it imports the driver, an extra
(``pip install 'memwarden[postgres]'``): ``import memwarden.events`` works
without it, and importing this module is what needs it."""

from __future__ import annotations

from ._postgres import PostgresEventLog, redacted
from ._postgres_driver import QmarkConnection, no_statistics, postgres_failure
from ._postgres_texts import PostgresTextStore
from ._postgres_write import NOTIFY_CHANNEL

__all__ = [
    "NOTIFY_CHANNEL",
    "PostgresEventLog",
    "PostgresTextStore",
    "QmarkConnection",
    "no_statistics",
    "postgres_failure",
    "redacted",
]
