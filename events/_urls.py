"""One spelling for every http(s) source: what a revocation's
``source_prefix`` is compared with. Saves, revocations and the fold all
spell a source through ``spelled``, so a prefix covers every spelling of
the same resource, whichever path wrote it (a save, an import of an old
export, a re-fold)."""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

_AUTHORITY = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://([^/\\?#]*)(.*)$", re.DOTALL)
_DEFAULT_PORTS = {"http": "80", "https": "443"}
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_HIGH_RUN = re.compile(r"(?:%[89A-Fa-f][0-9A-Fa-f])+")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def has_user_info(url: str) -> bool:
    found = _AUTHORITY.match(url)
    return found is not None and found.group(1).lower() in _DEFAULT_PORTS and "@" in found.group(2)


def spelled(url: str) -> str:
    """``spelling``, remembered for short URLs. Kept: a save spells its
    source, then the fold spells the spelled form again under the write
    lock (one spelling whichever path wrote the event), and most sources
    are in their normal form already. Only URLs of at most 200 characters are
    kept, 16,384 of them: a few megabytes at most."""
    return _remembered(url) if len(url) <= 200 else spelling(url)


@lru_cache(maxsize=16_384)
def _remembered(url: str) -> str:
    return spelling(url)


def spelling(url: str) -> str:
    """An http(s) URL (or the start of one) in its normal form (RFC 3986,
    6.2.2, and as web servers read a path): scheme and host in lower case,
    no default port, no trailing dot on the host; in the path, escapes of
    unreserved characters and of UTF-8 text decoded (``%73`` is ``s``,
    ``%ED%82%A4`` is ``키``), other escapes in upper case, ``\\`` read as
    ``/``, ``.`` and ``..`` segments resolved, runs of ``/`` read as one; a
    host in another script in its DNS form (``xn--``).
    Other URLs, and URLs with user info (refused where a caller gives one),
    are left as given."""
    found = _AUTHORITY.match(url)
    if found is None:
        return url
    scheme, authority, rest = found.groups()
    scheme = scheme.lower()
    if scheme not in _DEFAULT_PORTS or "@" in authority:
        return url
    host, port = authority, ""
    if authority.startswith("["):  # an IPv6 literal: [::1]:8080
        host, _, after = authority.partition("]")
        host += "]"
        port = after[1:] if after.startswith(":") else ""
    elif ":" in authority:
        host, _, port = authority.rpartition(":")
    host = _host(host.lower().rstrip("."))
    port = "" if port in ("", _DEFAULT_PORTS[scheme]) else port
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    path, tail = rest[:cut], rest[cut:]
    return f"{scheme}://{host}{':' + port if port else ''}{_path(path)}{_escapes(tail)}"


def _host(host: str) -> str:
    # a name in another script as DNS asks for it (xn--...), one form for both spellings
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


def _escapes(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        char = chr(int(m.group(1), 16))
        return char if char in _UNRESERVED else "%" + m.group(1).upper()

    def text_of(m: re.Match[str]) -> str:
        # escaped UTF-8 (Korean in a path, say) read as the characters it spells
        raw = bytes(int(h, 16) for h in m.group(0).split("%")[1:])
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return m.group(0).upper()

    return _HIGH_RUN.sub(text_of, _ESCAPE.sub(one, text))


def _path(path: str) -> str:
    if not path:
        return path
    # a backslash is a slash in an http(s) path, as browsers and many servers read it
    path = re.sub("/{2,}", "/", _escapes(path).replace("\\", "/"))
    # RFC 3986, 5.2.4, over whole segments (the path starts with "/")
    kept: list[str] = []
    segments = path.split("/")[1:]
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == ".":
            if last:
                kept.append("")
        elif segment == "..":
            if kept:
                kept.pop()
            if last:
                kept.append("")
        else:
            kept.append(segment)
    return "/" + "/".join(kept)


# libpq's query parameters that carry a secret (``?password=``)
_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})


def redacted(url: str) -> str:
    """``url`` without its secrets, for messages and logs: the password of
    its user information (split at the last ``@``, as the URL is parsed
    whatever the password holds) and every secret query parameter. Read
    from the text alone, so a URL too broken to connect with (a port out
    of range) is redacted all the same."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not even a URL's shape (an unclosed IPv6 bracket)
        return "<a URL memwarden cannot read>" if "@" in url or "password" in url.lower() else url
    netloc = parts.netloc
    if "@" in netloc:
        user_info, _, host = netloc.rpartition("@")
        user, colon, _ = user_info.partition(":")
        netloc = f"{user}:***@{host}" if colon else f"{user}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(name.lower() in _SECRET_PARAMETERS for name, _ in pairs):
            query = urlencode([(n, "***" if n.lower() in _SECRET_PARAMETERS else v) for n, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def scrubbed(text: str, url: str) -> str:
    """``text`` (a driver's message about ``url``) with the URL's secrets
    shown as ``***``: a message may quote what the driver read as a host."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return text
    secrets = [parts.netloc.rpartition("@")[0].partition(":")[2]] if "@" in parts.netloc else []
    secrets += [v for n, v in parse_qsl(parts.query, keep_blank_values=True) if n.lower() in _SECRET_PARAMETERS]
    for secret in sorted(filter(None, secrets), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text
