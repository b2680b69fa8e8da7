"""Sign-in for the web console: an API key, posted once through a form,
becomes a server-side session.

What the key never does: travel in a URL (the form posts it), reach a log
line (nothing here logs it), or come back in a page (a failed sign-in
says only that it failed). The browser holds a random session token in an
HttpOnly, SameSite=Strict cookie scoped to ``/console``; the session
names the key's id, and every request checks that the key is still
active, so ``memwarden keys revoke`` ends its sessions at once. Sessions
end after ``idle`` seconds without a request and ``lifetime`` seconds in
all. Every state-changing form carries the session's CSRF token, and a
request whose Origin is another site's is refused before it is read.
Sessions live in the serving process: with several ``serve`` processes
behind one address, pin a browser to one (or sign in again).
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from memwarden.engine import KeyStore, Principal

COOKIE = "mw_console"
LOGIN_COOKIE = "mw_console_login"


@dataclass
class Session:
    token: str
    key_id: str
    csrf: str
    started: float
    seen: float
    jobs: dict[str, dict[str, object]] = field(default_factory=dict)
    notice: dict[str, Any] | None = None  # a change's answer, shown by the next page once


class Sessions:
    """The console's sessions, in this process."""

    def __init__(self, keys: KeyStore, *, idle: float = 1800.0, lifetime: float = 12 * 3600.0) -> None:
        self.keys = keys
        self.idle = idle
        self.lifetime = lifetime
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def start(self, key: str) -> tuple[Session, Principal] | None:
        """A new session for a valid, active key; None for any other."""
        who = self.keys.authenticate(key)
        if who is None:
            return None
        now = time.monotonic()
        session = Session(secrets.token_urlsafe(32), who.key_id, secrets.token_urlsafe(32), now, now)
        with self._lock:
            self._drop_expired(now)
            self._sessions[session.token] = session
        return session, who

    def find(self, request: Request) -> tuple[Session, Principal] | None:
        """The request's session and who it is, while both are valid."""
        token = request.cookies.get(COOKIE)
        if not token:
            return None
        now = time.monotonic()
        with self._lock:
            session = self._sessions.get(token)
            if session is None:
                return None
            if now - session.seen > self.idle or now - session.started > self.lifetime:
                del self._sessions[token]
                return None
            session.seen = now
        who = self.keys.principal(session.key_id)
        if who is None:  # the key was revoked since: so is the session
            self.end(token)
            return None
        return session, who

    def end(self, token: str | None) -> None:
        if token:
            with self._lock:
                self._sessions.pop(token, None)

    def _drop_expired(self, now: float) -> None:
        stale = [t for t, s in self._sessions.items() if now - s.seen > self.idle or now - s.started > self.lifetime]
        for token in stale:
            del self._sessions[token]


def same_origin(request: Request) -> bool:
    """A browser sends Origin with every cross-site POST: one naming another
    host than the one asked is a forged request."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    return origin.split("://", 1)[-1] == host


def token_matches(expected: str, given: object) -> bool:
    return isinstance(given, str) and given.isascii() and secrets.compare_digest(expected, given)
