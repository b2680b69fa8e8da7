"""Consistency tokens: a log position as a caller that may not read the log
is given it, and takes it back.

A seq is a count of every tenant's writes: a key bound to one tenant that
was answered seq 812 on one save and 1,415 on the next has learnt that the
other tenants wrote 602 events between them, and by polling, when. So a
caller that may not review the log (an agent key; ``may(caller, "review")``
is false) is given each position as a token (``mwt_`` and 48 characters):
the seq encrypted and authenticated under a secret only the store holds,
with a random nonce. The same position gives a different token each time,
no two tokens can be ordered or subtracted, and a token altered, forged or
made by another store fails its authentication and is refused, naming the
field. The caller passes it back as ``min_seq`` ("at least as fresh as"),
as SpiceDB's ZedTokens are passed back.

Staff keys and the local operator, who may read the whole log
(``/v1/events``), keep integers: for them a seq is the log's own
coordinate (the feed, replay, the chain), and they may give either.

The cipher is AES-256-GCM-SIV (``cryptography``): a random nonce repeated
by chance, after billions of tokens, shows at most that two tokens name one
position, where plain GCM would lose its authenticity. The secret is made
once per store and kept in it (``server_secrets``), so every node of a
PostgreSQL deployment reads the others' tokens; it is never logged.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, overload

from ._core import Core
from ._errors import InvalidInput, StaleView
from ._limits import Page
from ._rights import Principal, may
from ._views import Found, MemoryView, SaveResult, VerifyResult

TOKEN_PREFIX = "mwt_"
_TOKEN = re.compile(r"mwt_[A-Za-z0-9_-]{48}")  # 12 bytes of nonce, 8 of seq, 16 of tag
_SECRET = "consistency_tokens"  # its name in the store's server_secrets
_CONTEXT = b"memwarden consistency token v1"  # bound into each tag: no other use of the key verifies
MAX_POSITION = 2**62  # as a seq in a query is bounded: it fits every backend's integers
# the positions one read may name: a client's writes still in flight when it
# reads, which it cannot order (``memwarden.client``), each one token
MAX_GIVEN = 32

# what a read's min_seq may be: a token or a seq, or several of them (the read waits for the newest)
Position = int | str
MinSeq = Position | Sequence[Position] | None


def is_token(value: object) -> bool:
    """Whether ``value`` has a token's shape (a client checks what a server answers by it)."""
    return isinstance(value, str) and _TOKEN.fullmatch(value) is not None


class Tokens:
    """Tokens under one store's secret."""

    __slots__ = ("_cipher",)

    def __init__(self, secret: bytes) -> None:
        # cryptography is imported by the first token issued or read, not by every command
        from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV

        self._cipher = AESGCMSIV(secret)

    def __repr__(self) -> str:
        return "Tokens(<secret withheld>)"

    def issue(self, seq: int) -> str:
        nonce = os.urandom(12)
        sealed = self._cipher.encrypt(nonce, seq.to_bytes(8, "big"), _CONTEXT)
        return TOKEN_PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode("ascii")

    def position(self, token: str, field: str) -> int:
        """The seq ``token`` stands for; ``InvalidInput`` naming ``field`` if
        this store did not issue it."""
        from cryptography.exceptions import InvalidTag

        if not is_token(token):
            raise InvalidInput(field, "is not a consistency token (mwt_ and 48 characters, as an answer gives it)")
        try:
            raw = base64.urlsafe_b64decode(token[len(TOKEN_PREFIX) :])
            plain = self._cipher.decrypt(raw[:12], raw[12:], _CONTEXT)
        except (InvalidTag, binascii.Error, ValueError):
            raise InvalidInput(
                field, "is not a token this server issued: altered, forged, or from another store"
            ) from None
        return int.from_bytes(plain, "big")


def store_tokens(core: Core) -> Tokens:
    """The store's tokens: its secret read, or made and kept on first use
    (a writer on another node that kept one first wins, and this one reads it)."""
    with core.reading() as view:
        secret = view.side().server_secrets(_SECRET).get(_SECRET)
    if secret is None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV

        with core.transaction() as tx:
            secret = tx.view.keep_server_secret(_SECRET, AESGCMSIV.generate_key(256), core.now())
    return Tokens(secret)


class Positions:
    """Log positions as one caller is given them and gives them back: seqs
    for a caller that may read the log, tokens for any other. Each face a
    tenant-bound key reaches (HTTP, MCP, the console, ``Acting``) passes
    its answers and its ``min_seq`` through here."""

    def __init__(self, caller: Principal, tokens: Callable[[], Tokens]) -> None:
        self.reads_log = may(caller, "review")
        self._tokens = tokens  # asked only for a caller given tokens: staff never make the secret

    # -- what the caller gives ------------------------------------------------------------

    def taken(self, given: object, field: str = "min_seq") -> int | None:
        """The seq a read must be at least as fresh as: the newest of the
        positions ``given`` (one, or a list), or None for none."""
        if given is None:
            return None
        values = list(given) if isinstance(given, list | tuple) else [given]
        if len(values) > MAX_GIVEN:
            raise InvalidInput(field, f"names at most {MAX_GIVEN} tokens")
        return max((self._one(v, field) for v in values if v is not None), default=None)

    def _one(self, value: object, field: str) -> int:
        if isinstance(value, str) and value.startswith(TOKEN_PREFIX):
            return self._tokens().position(value, field)
        if not self.reads_log:
            raise InvalidInput(
                field, "must be a consistency token as an answer's seq gives it: this key is given tokens, not seqs"
            )
        if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 19:
            value = int(value)  # a seq in a query string
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_POSITION:
            return value
        raise InvalidInput(field, f"must be a consistency token or a seq (a whole number from 0 to {MAX_POSITION})")

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """A read under ``min_seq``: a view behind it is refused without the
        view's position or the token's, for a caller given tokens."""
        try:
            yield
        except StaleView as exc:
            if self.reads_log or exc.have is None:
                raise
            raise StaleView(None, None, ahead=exc.ahead) from None

    # -- what the caller is given -----------------------------------------------------------

    @overload
    def shown(self, seq: int) -> Position: ...
    @overload
    def shown(self, seq: int | None) -> Position | None: ...
    def shown(self, seq: int | None) -> Position | None:
        if seq is None or self.reads_log:
            return seq
        return self._tokens().issue(seq)

    def answer(self, data: dict[str, Any], key: str = "seq") -> dict[str, Any]:
        """``data`` with its position at ``key`` as the caller is given it."""
        return data if self.reads_log or key not in data else {**data, key: self.shown(data[key])}

    # a result whose seq is a token (str) already is given as it is
    def saved(self, result: SaveResult) -> SaveResult:
        if self.reads_log or isinstance(result.seq, str):
            return result
        return replace(result, seq=self.shown(result.seq))

    def verified(self, result: VerifyResult) -> VerifyResult:
        if self.reads_log or isinstance(result.seq, str):
            return result
        return replace(result, seq=self.shown(result.seq))

    def memory(self, answer: dict[str, Any]) -> dict[str, Any]:
        """A memory's JSON answer (``MemoryView.as_dict``, a search's ``Found``)
        without its log position (``last_seq``) for a caller given tokens: a
        token for each of a page's memories would cost more than any use it has."""
        if not self.reads_log:
            answer["last_seq"] = None
        return answer

    def view(self, view: MemoryView) -> MemoryView:
        """A memory as ``memory`` gives it, as the engine's type (``Acting``;
        ``last_seq`` is its last field)."""
        return view if self.reads_log else MemoryView._make((*view[:-1], None))

    def views(self, page: Page[MemoryView]) -> Page[MemoryView]:
        """A page of memories as ``view`` gives each (``truncated`` kept)."""
        if self.reads_log:
            return page
        hidden = [MemoryView._make((*v[:-1], None)) for v in page]
        return Page.of(hidden, truncated=page.truncated, next_offset=page.next_offset)

    def found(self, page: Page[Found]) -> Page[Found]:
        """A search's answer as ``view`` gives each memory."""
        if self.reads_log:
            return page
        shown = Page.of([f._replace(view=self.view(f.view)) for f in page], truncated=page.truncated)
        shown.hidden = page.hidden
        return shown

    def explained(self, data: dict[str, Any]) -> dict[str, Any]:
        """An explanation: its point as a token, and its steps in order without their seqs."""
        if self.reads_log:
            return data
        return {
            **data,
            "seq": self.shown(data.get("seq")),
            "history": [{**step, "seq": None} for step in data.get("history", [])],
        }
