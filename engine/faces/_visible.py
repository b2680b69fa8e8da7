"""What of a stored text may reach a person as it is: the one rule the
command line and the console show text by.

An agent chooses its summaries, ids and contents. A terminal obeys control
characters (ESC ``[2J`` clears it, an OSC sets its title, ``[8m`` hides
what follows) and a direction override (U+202E) makes one id look like
another on any screen. So each such character is shown as its escape,
``\\u001b``, ``\\u202e``: visible, and in a JSON text the very same value
(the command line's ``--json`` stays valid JSON and loses nothing).
Line breaks and tabs are kept; a carriage return only as the first half
of a Windows line break.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from typing import IO, Any

# C0 (but tab and line feed), DEL, C1, a carriage return not before a line
# feed, the direction marks, embeddings, overrides and isolates, and a lone
# surrogate (a caller's bad JSON echoed in a refusal: no stream can write it)
_HIDDEN = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]|\r(?!\n)"
)


def _escape(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"


def visible(text: str) -> str:
    """``text`` with every control and direction character shown as its escape."""
    if text.isascii() and text.isprintable():  # the common case: one C scan, nothing to do
        return text
    return _HIDDEN.sub(_escape, text)


class VisibleStream:
    """A text stream that writes everything through ``visible``: the
    command line's stdout and stderr, so no command can print an agent's
    text raw, whichever line printed it. Rich's own styling (colours on a
    terminal) goes to ``raw``, its cells already made visible."""

    def __init__(self, raw: IO[str]) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # a text stream, as click asks (``_is_binary_writer``)
            raise TypeError("write() argument must be str")
        self.raw.write(visible(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, encoding, isatty, fileno, buffer...
        return getattr(self.raw, name)


@contextlib.contextmanager
def visible_output() -> Iterator[None]:
    """stdout and stderr through ``visible`` while the block runs (once:
    a command group inside another finds them so already)."""
    saved = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, VisibleStream):
        sys.stdout = VisibleStream(sys.stdout)
    if not isinstance(sys.stderr, VisibleStream):
        sys.stderr = VisibleStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def raw_output() -> None:
    """Undo ``visible_output`` for the rest of the run: a service (``serve``)
    writes only its log, structured and escaped by its own handlers."""
    sys.stdout, sys.stderr = raw_stream(sys.stdout), raw_stream(sys.stderr)


def raw_stream(stream: IO[str]) -> IO[str]:
    """The stream under a ``VisibleStream``, for a writer that escapes its own text."""
    return stream.raw if isinstance(stream, VisibleStream) else stream
