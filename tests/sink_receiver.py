"""A webhook sink on loopback, as a downstream index would run one: it
verifies every request with ``standardwebhooks.Webhook.verify``, applies
each notice once (by its ``webhook-id``), drops the ids a notice names and
answers the probe with the ids it still holds. Its faults are switched by
the test: down, answering 500, slow, keeping copies."""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


class Receiver:
    def __init__(self, secret: str, port: int = 0) -> None:
        self.secret = secret
        self.webhook = Webhook(secret)
        self.held: dict[str, set[str]] = {}
        self.applied: list[dict[str, Any]] = []  # notices applied, in arrival order, once each
        self.requests: list[tuple[str, bytes, dict[str, str]]] = []  # every verified request as received
        self.seen: set[str] = set()
        self.refused = 0
        self.duplicates = 0
        self.fail_next = 0  # answer 500 to this many notices (after applying them: the sender sees a failure)
        self.slow = 0.0
        self.keep: set[str] = set()  # ids this sink keeps whatever it is told (a stale copy)
        # "response": it answers each notice with a signed acknowledgement of what
        # it removed; "callback": it keeps them (``acks``) for the test to post later
        self.ack_mode: str | None = None
        self.acks: list[tuple[bytes, dict[str, str]]] = []
        self.signer = self.webhook  # what it signs acknowledgements with (a test may forge them)
        self.lock = threading.Lock()
        self.port = port
        self._server: ThreadingHTTPServer | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/notices"

    @property
    def probe_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/probe"

    def hold(self, tenant: str, ids: list[str]) -> None:
        self.held.setdefault(tenant, set()).update(ids)

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                code, answer, *extra = receiver.handle(self.path, body, headers)
                data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                for name, value in (extra[0] if extra else {}).items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler, bind_and_activate=False)
        self._server.daemon_threads = True  # a request hanging in ``slow`` never holds up ``stop``
        self._server.block_on_close = False
        self._server.allow_reuse_address = True
        self._server.server_bind()
        self._server.server_activate()
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Down: nothing listens on the port until ``start``."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def ack(
        self, notice_id: str, removed: dict[str, list[str]], msg_id: str | None = None
    ) -> tuple[bytes, dict[str, str]]:
        """A signed acknowledgement of ``notice_id`` (body, headers), as a sink sends one."""
        body = json.dumps({"type": "ack", "notice_id": notice_id, "removed": removed}).encode()
        msg_id = msg_id or "ack_" + secrets.token_hex(12)
        when = datetime.now(UTC)
        headers = {
            "webhook-id": msg_id,
            "webhook-timestamp": str(int(when.timestamp())),
            "webhook-signature": self.signer.sign(msg_id, when, body.decode()),
        }
        return body, headers

    def handle(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[Any, ...]:
        try:
            payload = self.webhook.verify(body, headers)
        except WebhookVerificationError as exc:
            with self.lock:
                self.refused += 1
            return 400, {"error": str(exc)}
        if self.slow:
            time.sleep(self.slow)
        with self.lock:
            if path == "/probe":
                held = {
                    t: sorted((self.held.get(t, set()) | self.keep) & set(ids)) for t, ids in payload["ids"].items()
                }
                return 200, {"held": {t: v for t, v in held.items() if v}}
            if payload.get("type") == "ping":
                return 200, {"ok": True}
            self.requests.append((path, body, headers))
            msg_id = headers["webhook-id"]
            if msg_id in self.seen:
                self.duplicates += 1  # a retry of one already applied: acknowledged, not applied again
            else:
                self.seen.add(msg_id)
                self.applied.append(payload)
                for tenant, ids in payload.get("ids", {}).items():
                    self.held.get(tenant, set()).difference_update(ids)
            if self.fail_next:
                self.fail_next -= 1
                return 500, {"error": "try again"}
            if self.ack_mode and "ids" in payload:
                removed = {t: sorted(set(ids) - self.keep) for t, ids in payload["ids"].items()}
                acked = self.ack(payload["notice_id"], removed)
                if self.ack_mode == "response":
                    return 200, *acked
                self.acks.append(acked)
        return 200, {"ok": True}
