"""Talking to each kind of sink: deliver a notice, ask which covered ids it
still holds, say whether it answers at all. Every failure is a
``SinkUnavailable`` naming what failed; the outbox keeps the notice.

A webhook sink is reached over HTTP through the fetcher's address rules
(``Fetchers.client``), each request signed as Standard Webhooks specifies
(``webhook-id``, ``webhook-timestamp``, ``webhook-signature``: an HMAC over
all three with the sink's secret), so a receiver that checks it refuses a
forged notice, and one that remembers ids and checks the timestamp
refuses a replayed one. A Redis sink is a cache memwarden fills itself
under each memory's full key: a notice deletes the keys, a read-back asks
EXISTS of each.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from memwarden.events import Clock, canonical_json, format_ts, parse_ts
from standardwebhooks import Webhook

from .._addresses import AddressRefused
from .._errors import FetchFailed, InvalidInput, SinkUnavailable
from .._fetchers import Fetchers
from ._config import SinkSpec

if TYPE_CHECKING:  # httpx comes with the first delivery (``_post``): most commands deliver nothing
    import httpx

CHUNK = 1000  # keys per Redis round trip


# a signed answer to a delivery: its body and headers (an ack sink's acknowledgement)
Reply = tuple[bytes, dict[str, str]]


class SinkClient(Protocol):
    spec: SinkSpec

    def deliver(self, notice_id: str, body: str) -> Reply | None: ...
    def held(self, notice_id: str, ids: dict[str, list[str]]) -> dict[str, list[str]]: ...
    def ping(self) -> float: ...
    def close(self) -> None: ...


def client_for(spec: SinkSpec, fetchers: Fetchers, clock: Clock) -> SinkClient:
    if spec.kind == "redis":
        return RedisSink(spec, clock)
    return WebhookSink(spec, fetchers, clock)


def signed_headers(secret: str, msg_id: str, when: datetime, body: str) -> dict[str, str]:
    """Standard Webhooks' three headers for ``body``."""
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(when.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id, when, body),
        "content-type": "application/json",
    }


class WebhookSink:
    def __init__(self, spec: SinkSpec, fetchers: Fetchers, clock: Clock) -> None:
        self.spec = spec
        self.clock = clock
        self._fetchers = fetchers
        self._http = fetchers.client()

    def close(self) -> None:
        self._http.close()

    def _post(self, url: str, msg_id: str, body: str) -> httpx.Response:
        """The sink's answer, read whole within ``timeout`` seconds for all of
        it (a sink that drips its answer holds no job, and so no other sink,
        past that) and within the fetch's size cap."""
        import httpx

        try:
            headers = signed_headers(self.spec.secret(), msg_id, self.clock.now(), body)
        except InvalidInput as exc:  # the sink fails (recorded, retried), not the revocation that owes it
            raise SinkUnavailable(self.spec.name, f"{exc.field}: {exc.problem}") from None
        deadline = time.monotonic() + self.spec.timeout
        try:
            with self._http.stream(
                "POST", url, content=body.encode("utf-8"), headers=headers, timeout=self.spec.timeout
            ) as streamed:
                read = self._fetchers.capped(url, streamed.iter_bytes(), deadline, seconds=self.spec.timeout)
                response = httpx.Response(streamed.status_code, headers=streamed.headers, content=b"".join(read))
        except FetchFailed as exc:
            raise SinkUnavailable(self.spec.name, f"answer {exc.detail}") from None
        except AddressRefused as exc:
            raise SinkUnavailable(self.spec.name, f"refused address: {exc}") from None
        except httpx.HTTPError as exc:
            raise SinkUnavailable(self.spec.name, f"{type(exc).__name__}: {exc}") from None
        if not 200 <= response.status_code < 300:
            raise SinkUnavailable(self.spec.name, f"HTTP {response.status_code} from {url}")
        return response

    def deliver(self, notice_id: str, body: str) -> Reply | None:
        """Post the notice; an ack sink's answer when it is signed (its
        acknowledgement, which the worker verifies), else None."""
        response = self._post(self.spec.url, notice_id, body)
        if self.spec.ack and "webhook-signature" in response.headers:
            return response.content, {k.lower(): v for k, v in response.headers.items()}
        return None

    def held(self, notice_id: str, ids: dict[str, list[str]]) -> dict[str, list[str]]:
        """Which of ``ids`` the sink says it still holds (its probe URL)."""
        assert self.spec.probe_url is not None
        probe = canonical_json({"type": "probe", "notice_id": notice_id, "ids": ids})
        response = self._post(self.spec.probe_url, "prb_" + secrets.token_hex(12), probe)
        try:
            answer = response.json()
            held = answer["held"]
            if not isinstance(held, dict) or not all(
                isinstance(t, str) and isinstance(v, list) and all(isinstance(i, str) for i in v)
                for t, v in held.items()
            ):
                raise TypeError("held must map tenants to lists of ids")
        except (ValueError, KeyError, TypeError) as exc:
            raise SinkUnavailable(self.spec.name, f"probe answer not understood: {exc}") from None
        # only what was asked about counts: a sink cannot make other ids leak
        return {t: sorted(set(held.get(t, ())) & set(asked)) for t, asked in ids.items() if held.get(t)}

    def ping(self) -> float:
        started = time.perf_counter()
        if self.spec.ack:  # no probe to ask: a signed ping, which a receiver ignores
            self._post(self.spec.url, "png_" + secrets.token_hex(12), canonical_json({"type": "ping"}))
        else:
            self.held("ntc_test", {})
        return (time.perf_counter() - started) * 1000


class RedisSink:
    def __init__(self, spec: SinkSpec, clock: Clock) -> None:
        try:
            import redis
        except ImportError:
            raise SinkUnavailable(spec.name, "a redis sink needs redis-py: pip install 'memwarden[redis]'") from None
        self.spec = spec
        self.clock = clock
        self._errors = (redis.RedisError, OSError)
        self._redis = redis.Redis.from_url(spec.url, socket_timeout=spec.timeout, socket_connect_timeout=spec.timeout)

    def close(self) -> None:
        self._redis.close()

    def key(self, tenant: str, memory_id: str) -> str:
        """A memory's full cache key: its tenant and its id (a tool result's
        id already holds tool, version, input and scope)."""
        # the tenant escaped, so the first ":" after the prefix ends it: tenant
        # "a" with id "b:c" and tenant "a:b" with id "c" are two keys
        escaped = tenant.replace("%", "%25").replace(":", "%3A")
        return f"{self.spec.prefix}{escaped}:{memory_id}"

    def _keys(self, ids: dict[str, list[str]]) -> list[tuple[str, str, str]]:
        return [(t, m, self.key(t, m)) for t, ms in ids.items() for m in ms]

    def deliver(self, notice_id: str, body: str) -> Reply | None:
        import orjson

        ids = orjson.loads(body).get("ids") or {}
        keys = [k for _, _, k in self._keys(ids)]
        try:
            for start in range(0, len(keys), CHUNK):
                self._redis.delete(*keys[start : start + CHUNK])
        except self._errors as exc:
            raise SinkUnavailable(self.spec.name, f"{type(exc).__name__}: {exc}") from None
        return None

    def held(self, notice_id: str, ids: dict[str, list[str]]) -> dict[str, list[str]]:
        keys = self._keys(ids)
        out: dict[str, list[str]] = {}
        try:
            for start in range(0, len(keys), CHUNK):
                chunk = keys[start : start + CHUNK]
                pipe = self._redis.pipeline(transaction=False)
                for _, _, k in chunk:
                    pipe.exists(k)
                for (tenant, memory_id, _), found in zip(chunk, pipe.execute(), strict=True):
                    if found:
                        out.setdefault(tenant, []).append(memory_id)
        except self._errors as exc:
            raise SinkUnavailable(self.spec.name, f"{type(exc).__name__}: {exc}") from None
        return out

    def ping(self) -> float:
        started = time.perf_counter()
        try:
            self._redis.ping()
        except self._errors as exc:
            raise SinkUnavailable(self.spec.name, f"{type(exc).__name__}: {exc}") from None
        return (time.perf_counter() - started) * 1000

    def fill(self, memories: Iterable[Any]) -> int:
        """Put usable memories in the cache under their full keys, each
        expiring no later than its ``expires_at`` (one without: the sink's
        ``ttl``); an already expired one is not put. The count put."""
        now = self.clock.now()
        cap = now + self.spec.ttl
        put = 0
        try:
            pipe = self._redis.pipeline(transaction=False)
            for m in memories:
                ends = min(parse_ts(m.expires_at), cap) if m.expires_at else cap
                if ends <= now:
                    continue
                value = canonical_json(
                    {
                        "memory_id": m.memory_id,
                        "version": m.version,
                        "checksum": m.checksum,
                        "content": m.content,
                        "summary": m.summary,
                        "expires_at": format_ts(ends),
                        "source_url": m.source_url,
                    }
                )
                pipe.set(self.key(m.scope["tenant"], m.memory_id), value, pxat=int(ends.timestamp() * 1000))
                put += 1
                if put % CHUNK == 0:
                    pipe.execute()
            pipe.execute()
        except self._errors as exc:
            raise SinkUnavailable(self.spec.name, f"{type(exc).__name__}: {exc}") from None
        return put


def held_count(held: dict[str, Sequence[str]]) -> int:
    return sum(len(v) for v in held.values())
