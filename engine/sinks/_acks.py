"""Signed acknowledgement read-back (a webhook sink with ``ack = true``).

Instead of answering a probe, the sink acknowledges a notice: in its
answer to the delivery (its response signed like a request) or later by
``POST /v1/sinks/NAME/ack`` (``Warden.sink_ack``), with the body
``{"type": "ack", "notice_id": "ntc_…", "removed": {tenant: [ids]}}``
signed as Standard Webhooks specifies (``webhook-id``,
``webhook-timestamp``, ``webhook-signature``) with the sink's own secret.
memwarden verifies it with ``standardwebhooks``: a forged or tampered
acknowledgement, or one older than five minutes, is refused, and so is one
whose ``webhook-id`` was received before (a replay within those minutes).
The notice id is inside what is signed, so one notice's acknowledgement
cannot confirm another. The read-back then counts as leaked every covered
id the sink's acknowledgements do not name as removed.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Mapping
from typing import Any

import orjson
from memwarden.events import get_logger
from standardwebhooks import Webhook, WebhookVerificationError

from .._core import Core
from .._errors import AckRefused, InvalidInput, SinkNotFound
from .._rights import Principal, operation
from ._config import SinkSpec

log = get_logger("memwarden.sinks")

MAX_ACK_BYTES = 4 << 20  # an acknowledgement names at most what a notice did


class _Stranger:
    """What an acknowledgement to a name that is no ack sink is checked
    against: a secret nobody holds, so it is refused exactly as a wrong
    signature is (the route needs no key: its answers tell no sink's name or kind)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()

    def secret(self) -> str:
        return self._secret


def _spec(core: Core, name: str) -> SinkSpec:
    for spec in core.sinks:
        if spec.name == name and spec.ack:
            return spec
    return _Stranger(name)  # type: ignore[return-value]


def verify_ack(spec: SinkSpec, body: bytes, headers: Mapping[str, str]) -> tuple[str, str, dict[str, list[str]]]:
    """(webhook-id, notice id, removed ids by tenant) of a genuine
    acknowledgement from ``spec``; ``AckRefused`` or ``InvalidInput`` naming
    what is wrong otherwise."""
    if len(body) > MAX_ACK_BYTES:
        raise InvalidInput("body", f"an acknowledgement is at most {MAX_ACK_BYTES} bytes")
    lower = {k.lower(): v for k, v in headers.items()}
    for header in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        if not lower.get(header):
            raise AckRefused(header, f"sink {spec.name!r}: the acknowledgement has no {header} header")
    try:
        Webhook(spec.secret()).verify(body, lower)
    except WebhookVerificationError as exc:
        raise AckRefused("webhook-signature", f"sink {spec.name!r}: acknowledgement refused: {exc}") from None
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise InvalidInput("body", "an acknowledgement is a JSON object") from None
    if not isinstance(payload, dict) or payload.get("type") != "ack":
        raise InvalidInput("type", 'an acknowledgement has "type": "ack"')
    notice_id = payload.get("notice_id")
    if not isinstance(notice_id, str) or not notice_id.startswith("ntc_"):
        raise InvalidInput("notice_id", "must be the id of the notice acknowledged (ntc_...)")
    removed = payload.get("removed")
    if not isinstance(removed, dict) or not all(
        isinstance(t, str) and isinstance(ids, list) and all(isinstance(i, str) for i in ids)
        for t, ids in removed.items()
    ):
        raise InvalidInput("removed", "must map each tenant to the list of ids the sink removed")
    return lower["webhook-id"], notice_id, {t: sorted(set(ids)) for t, ids in removed.items()}


def accept_ack(core: Core, spec: SinkSpec, body: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
    """Verify and keep an acknowledgement; what it acknowledged."""
    ack_id, notice_id, removed = verify_ack(spec, body, headers)
    with core.store.outbox() as outbox:
        if outbox.notice(spec.name, notice_id) is None:
            raise SinkNotFound("notice_id", notice_id)
        if not outbox.add_ack(spec.name, ack_id, notice_id, removed, core.now()):
            problem = f"sink {spec.name!r}: acknowledgement {ack_id} was received before (a replay)"
            raise AckRefused("webhook-id", problem)
    log.info("sink_ack_accepted", sink=spec.name, notice_id=notice_id, removed=sum(len(v) for v in removed.values()))
    return {"sink": spec.name, "notice_id": notice_id, "ack_id": ack_id, "removed": removed}


@operation("confirm")
def sink_ack(core: Core, name: str, body: bytes, headers: Mapping[str, str], *, caller: Principal) -> dict[str, Any]:
    """Accept sink ``name``'s signed acknowledgement of a notice (a
    callback after the delivery). The signature is the sink's credential:
    the HTTP route needs no API key and calls this as memwarden itself."""
    if not isinstance(body, bytes):
        raise InvalidInput("body", "must be the acknowledgement's bytes as signed")
    return accept_ack(core, _spec(core, name), body, headers)
