"""Fetching a memory's source again: files, git, http(s), named callables.

Every failure is a ``FetchFailed`` with a category; the detail goes to the
server log only. Network fetches connect only to addresses the operator
allows (``_addresses``), follow redirects one checked hop at a time, and
hold a total deadline and a size cap.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from memwarden.events import get_logger

from . import _metrics
from ._addresses import AddressPolicy, AddressRefused, Resolver, resolve
from ._errors import FetchFailed

SourceFn = Callable[[dict[str, Any]], str]
log = get_logger("memwarden.fetch")

if TYPE_CHECKING:  # httpx and httpcore are imported by the first HTTP exchange: most commands have none
    import ssl

    import httpx


class Fetchers:
    """Knows how to read a memory's source; ``fetch`` returns its text.

    ``timeout`` is the deadline of a whole fetch (every redirect hop and
    every byte of the body), not of one read. ``transport`` replaces the
    network (tests); with it, addresses are not checked.
    """

    def __init__(
        self,
        *,
        timeout: float = 10.0,
        max_bytes: int = 5 * 1024 * 1024,
        max_redirects: int = 5,
        addresses: AddressPolicy | None = None,
        resolver: Resolver = resolve,
        transport: httpx.BaseTransport | None = None,
        backoff: float = 30.0,
    ) -> None:
        self.timeout = timeout
        # the scheduler's wait before it fetches again from a host that just
        # failed (doubling per failure), so one bad source is not hammered
        self.backoff = backoff
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.addresses = addresses or AddressPolicy()
        self.resolver = resolver
        self.transport = transport
        self._callables: dict[str, SourceFn] = {}

    @classmethod
    def from_settings(cls, settings: dict[str, Any], *, allow_local: bool = False) -> Fetchers:
        """From the policy file's ``[fetch]`` table (already validated)."""
        return cls(
            timeout=settings.get("timeout", 10.0),
            max_bytes=settings.get("max_bytes", 5 * 1024 * 1024),
            max_redirects=settings.get("max_redirects", 5),
            backoff=settings.get("backoff", 30.0),
            addresses=AddressPolicy.of(settings.get("allow", ()), allow_local=allow_local),
        )

    def allowing_local(self) -> Fetchers:
        """The same fetchers (and registered callables), allowed every address (development)."""
        other = copy.copy(self)
        other.addresses = dataclasses.replace(self.addresses, allow_local=True)
        return other

    def register(self, name: str, fn: SourceFn) -> None:
        """``source_url = "callable:NAME"`` memories are fetched by ``fn(row)``,
        the memory's row as a dict (``MemoryRow.as_dict``), as every fetch takes it."""
        self._callables[name] = fn

    def describe(self, row: dict[str, Any]) -> str:
        if row.get("repo") and row.get("source"):
            return f"git {row['repo']} {row.get('branch') or 'HEAD'}:{row['source']}"
        return str(row["source_url"])

    def fetch(self, row: dict[str, Any]) -> str:
        try:
            return self._fetch(row)
        except FetchFailed as exc:
            log.warning("fetch_failed", source=exc.source, category=exc.category, detail=exc.detail)
            _metrics.FETCH_FAILURES.labels(exc.category).inc()
            raise

    def _fetch(self, row: dict[str, Any]) -> str:
        if row.get("repo") and row.get("source"):
            return self._git(row["repo"], row.get("branch") or "HEAD", row["source"])
        url = str(row["source_url"])
        if url.startswith("callable:"):
            name = url.removeprefix("callable:")
            fn = self._callables.get(name)
            if fn is None:
                raise FetchFailed(url, "no_fetcher", f"no callable registered under {name!r}")
            try:
                text = fn(row)
            except Exception as exc:  # a user's callable: any failure is a fetch failure
                raise FetchFailed(url, "unreachable", f"{type(exc).__name__}: {exc}") from exc
            if len(text.encode("utf-8")) > self.max_bytes:
                raise FetchFailed(url, "too_large", f"larger than {self.max_bytes} bytes")
            return text
        if url.startswith(("http://", "https://")):
            return self._http(url)
        if url.startswith("file://"):
            return self._file(Path(unquote(urlparse(url).path)))
        if row.get("source"):
            return self._file(Path(row["source"]))
        if url.startswith("/"):
            return self._file(Path(url))
        raise FetchFailed(url, "no_fetcher", "use file://, http(s)://, callable:NAME or a git source")

    def _file(self, path: Path) -> str:
        try:
            with path.open("rb") as fh:
                data = fh.read(self.max_bytes + 1)
        except OSError as exc:
            raise FetchFailed(str(path), "unreachable", exc.strerror or str(exc)) from None
        if len(data) > self.max_bytes:
            raise FetchFailed(str(path), "too_large", f"larger than {self.max_bytes} bytes")
        return _decode(str(path), data)

    def _git(self, repo: str, branch: str, source: str) -> str:
        where = f"{repo}:{branch}:{source}"
        try:
            done = subprocess.run(
                ["git", "-C", repo, "show", f"{branch}:{source}"],
                capture_output=True,
                timeout=self.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise FetchFailed(where, "timeout", f"git took longer than {self.timeout} s") from None
        except OSError as exc:
            raise FetchFailed(where, "unreachable", str(exc)) from None
        if done.returncode != 0:
            raise FetchFailed(where, "unreachable", done.stderr.decode("utf-8", "replace").strip())
        if len(done.stdout) > self.max_bytes:
            raise FetchFailed(where, "too_large", f"larger than {self.max_bytes} bytes")
        return _decode(source, done.stdout)

    def client(self) -> httpx.Client:
        """An HTTP client held to the address rules: the sinks' deliveries and
        probes and the embedder's endpoint leave through it, as fetches do."""
        return self._client()

    def _client(self) -> httpx.Client:
        import httpx

        transport = self.transport
        if transport is None:
            transport = httpx.HTTPTransport(verify=_tls())
            # httpx takes no network backend; the pool it builds is replaced by
            # one whose every TCP connection goes through the address check
            import httpcore

            from ._checked_backend import CheckedBackend

            transport._pool = httpcore.ConnectionPool(
                ssl_context=_tls(),
                network_backend=CheckedBackend(self.addresses, self.resolver),
                max_connections=4,
            )
        # trust_env=False: a proxy from the environment would connect for us,
        # to an address we never checked
        return httpx.Client(transport=transport, follow_redirects=False, trust_env=False)

    def post_json(self, url: str, body: Any, *, headers: dict[str, str], max_bytes: int | None = None) -> Any:
        """POST ``body`` as JSON and read the JSON answer under the fetch's
        rules: the address check, one deadline for all of it, a size cap
        (``max_bytes``, else the fetch's), no redirect. ``FetchFailed`` otherwise."""
        deadline = time.monotonic() + self.timeout
        cap = self.max_bytes if max_bytes is None else max_bytes
        with (
            _failures(url),
            self._client() as client,
            client.stream("POST", url, json=body, headers=headers, timeout=self.timeout) as response,
        ):
            if response.status_code >= 300:
                raise FetchFailed(url, "http_status", f"HTTP {response.status_code}")
            data = b"".join(self.capped(url, response.iter_bytes(), deadline, cap))
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as exc:  # not JSON, or nested past the parser's depth
            raise FetchFailed(url, "not_text", f"not JSON: {type(exc).__name__}: {exc}"[:500]) from None

    def _http(self, url: str) -> str:
        deadline = time.monotonic() + self.timeout
        import httpx

        with _failures(url), self._client() as client:
            target = httpx.URL(url)
            for _ in range(self.max_redirects + 1):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise FetchFailed(url, "timeout", f"no answer within {self.timeout} s")
                with client.stream("GET", target, timeout=remaining) as response:
                    if not response.is_redirect:
                        return self._body(url, response, deadline)
                    location = response.headers.get("location", "")
                target = target.join(location)
                if target.scheme not in ("http", "https"):
                    raise FetchFailed(url, "refused_address", f"redirect to {target.scheme}: is not followed")
            raise FetchFailed(url, "http_status", f"more than {self.max_redirects} redirects")

    def _body(self, url: str, response: httpx.Response, deadline: float) -> str:
        if response.status_code >= 400:
            raise FetchFailed(url, "http_status", f"HTTP {response.status_code}")
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise FetchFailed(url, "too_large", f"declares {declared} bytes, the cap is {self.max_bytes}")
        data = b"".join(self.capped(url, response.iter_bytes(), deadline))
        encoding = response.charset_encoding or "utf-8"
        try:
            return data.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            raise FetchFailed(url, "not_text", f"body is not valid {encoding}") from None

    def capped(
        self, url: str, chunks: Iterator[bytes], deadline: float, cap: int | None = None, seconds: float | None = None
    ) -> Iterator[bytes]:
        """``chunks`` of an answer from ``url``, until past ``cap`` bytes (the
        fetch's own cap unless given) or past ``deadline``: ``FetchFailed``.
        Fetches, the embedder and the sinks read their answers through it."""
        size, cap = 0, self.max_bytes if cap is None else cap
        for chunk in chunks:
            size += len(chunk)
            if size > cap:
                raise FetchFailed(url, "too_large", f"larger than {cap} bytes")
            if time.monotonic() > deadline:  # a body dripped slowly never ends on a read timeout
                raise FetchFailed(url, "timeout", f"body not complete within {seconds or self.timeout} s")
            yield chunk


@contextlib.contextmanager
def _failures(url: str) -> Iterator[None]:
    """What an HTTP exchange with ``url`` raises, as the fetch's categories."""
    import httpx

    try:
        yield
    except AddressRefused as exc:
        raise FetchFailed(url, "refused_address", str(exc)) from None
    except httpx.TimeoutException as exc:
        raise FetchFailed(url, "timeout", f"{type(exc).__name__}: {exc}") from None
    except (httpx.HTTPError, httpx.InvalidURL, UnicodeError, ValueError) as exc:
        raise FetchFailed(url, "unreachable", f"{type(exc).__name__}: {exc}") from None


@functools.cache
def _tls() -> ssl.SSLContext:
    """One verifying TLS context for the process: loading the CA bundle
    takes longer than a loopback delivery, so it is not done per client."""
    import httpx

    return httpx.create_ssl_context()


def _decode(where: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FetchFailed(where, "not_text", f"not UTF-8 text (byte {exc.start})") from None
