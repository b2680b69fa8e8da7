"""Fetching a memory's source again: files, git, http(s), named callables."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import httpx

from ._errors import FetchFailed

SourceFn = Callable[[dict[str, Any]], str]


class Fetchers:
    """Knows how to read a memory's source; ``fetch`` returns its text."""

    def __init__(
        self,
        *,
        timeout: float = 10.0,
        max_bytes: int = 5 * 1024 * 1024,
        max_redirects: int = 5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.transport = transport
        self._callables: dict[str, SourceFn] = {}

    def register(self, name: str, fn: SourceFn) -> None:
        """``source_url = "callable:NAME"`` memories are fetched by ``fn(row)``."""
        self._callables[name] = fn

    def describe(self, row: dict[str, Any]) -> str:
        if row.get("repo") and row.get("source"):
            return f"git {row['repo']} {row.get('branch') or 'HEAD'}:{row['source']}"
        return str(row["source_url"])

    def fetch(self, row: dict[str, Any]) -> str:
        if row.get("repo") and row.get("source"):
            return self._git(row["repo"], row.get("branch") or "HEAD", row["source"])
        url = str(row["source_url"])
        if url.startswith("callable:"):
            name = url.removeprefix("callable:")
            fn = self._callables.get(name)
            if fn is None:
                raise FetchFailed(url, f"no callable registered under {name!r}")
            try:
                return fn(row)
            except Exception as exc:  # a user's callable: any failure is a fetch failure
                raise FetchFailed(url, f"{type(exc).__name__}: {exc}") from exc
        if url.startswith(("http://", "https://")):
            return self._http(url)
        if url.startswith("file://"):
            return self._file(Path(unquote(urlparse(url).path)))
        if row.get("source"):
            return self._file(Path(row["source"]))
        if url.startswith("/"):
            return self._file(Path(url))
        raise FetchFailed(url, "no fetcher for this source (use file://, http(s)://, callable:NAME or a git source)")

    def _file(self, path: Path) -> str:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise FetchFailed(str(path), exc.strerror or str(exc)) from None
        return _decode(str(path), data)

    def _git(self, repo: str, branch: str, source: str) -> str:
        try:
            done = subprocess.run(
                ["git", "-C", repo, "show", f"{branch}:{source}"],
                capture_output=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise FetchFailed(f"{repo}:{branch}:{source}", str(exc)) from None
        if done.returncode != 0:
            raise FetchFailed(f"{repo}:{branch}:{source}", done.stderr.decode("utf-8", "replace").strip())
        return _decode(source, done.stdout)

    def _http(self, url: str) -> str:
        try:
            with (
                httpx.Client(
                    timeout=self.timeout,
                    follow_redirects=True,
                    max_redirects=self.max_redirects,
                    transport=self.transport,
                ) as client,
                client.stream("GET", url) as response,
            ):
                response.raise_for_status()
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise FetchFailed(url, f"response larger than {self.max_bytes} bytes")
                    chunks.append(chunk)
                data = b"".join(chunks)
                encoding = response.charset_encoding or "utf-8"
        except httpx.HTTPError as exc:
            raise FetchFailed(url, f"{type(exc).__name__}: {exc}") from None
        try:
            return data.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            raise FetchFailed(url, f"body is not valid {encoding}") from None


def _decode(where: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FetchFailed(where, f"not UTF-8 text (byte {exc.start})") from None
