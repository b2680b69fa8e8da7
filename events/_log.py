"""memwarden's loggers: structlog's, configured by the application, never here.

memwarden is a library first: importing it or opening a store changes no
process-wide state, so it never calls ``structlog.configure`` (the command
line and the servers do, in ``memwarden.engine.configure_logging``, as their
entry points). Until the application configures structlog, structlog's
defaults would print every level to stdout, which is the application's; so
until then memwarden's own lines are warnings and worse, on stderr, as
structlog's default renderer writes them.

structlog itself (and rich, which it loads) is imported with the first line
logged, and not for a line below warnings before any configuration: a
command that logs nothing starts without it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

# the application's configuration, held back until memwarden logs a line (``configure_before_first_line``)
_deferred: list[Callable[[], None]] = []


def configure_before_first_line(configure: Callable[[], None]) -> None:
    """Run ``configure`` (an application's structlog configuration) just
    before memwarden's first log line, rather than now."""
    _deferred[:] = [configure]


class LibraryLogger:
    """A named structlog logger that follows the application's configuration
    once there is one, and writes only warnings and worse to stderr before."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._configured: Any = None  # structlog's lazy proxy, made with the first line

    def __getattr__(self, method: str) -> Any:
        if method in _BELOW_WARNING and not _deferred and "structlog" not in sys.modules:
            # no application has configured structlog (it would have imported it), so the
            # line would be filtered out: dropped here without loading structlog and rich,
            # which cost a library caller's first save about a tenth of a second
            return _dropped
        import structlog

        while _deferred:
            _deferred.pop()()
        if structlog.is_configured():
            if self._configured is None:
                self._configured = structlog.get_logger(self._name)
            return getattr(self._configured, method)
        # stderr as it is now: a test's capture, or a process that swapped it
        unconfigured = structlog.wrap_logger(
            structlog.PrintLogger(sys.stderr), wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING)
        )
        return getattr(unconfigured, method)


_BELOW_WARNING = frozenset({"debug", "info", "msg"})


def _dropped(*args: Any, **kwargs: Any) -> None:
    return None


def get_logger(name: str) -> LibraryLogger:
    return LibraryLogger(name)
