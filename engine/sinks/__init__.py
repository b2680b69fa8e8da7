"""The copies outside memwarden a revocation must reach: each sink's
settings (``_config``), the outbox its notices wait in (``_outbox``), the
worker that delivers them and reads each sink back (``_worker``) through a
client per kind (``_clients``, ``_index``), the signed acknowledgements
(``_acks``), the events an auditor sees (``_records``) and the Warden's
operations over them (``_ops``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memwarden.events import lazy_exports

if TYPE_CHECKING:
    from ._clients import signed_headers
    from ._config import NOTICE_TYPES, SinkSpec, sinks_from_table
    from ._worker import SinkWorker

__getattr__ = lazy_exports(__name__, __file__)

__all__ = ["NOTICE_TYPES", "SinkSpec", "SinkWorker", "signed_headers", "sinks_from_table"]
