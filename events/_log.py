"""memwarden's loggers: structlog's, configured by the application, never here.

memwarden is a library first: importing it or opening a store changes no
process-wide state, so it never calls ``structlog.configure`` (the command
line and the servers do, in ``memwarden.engine.configure_logging``, as their
entry points). Until the application configures structlog, structlog's
defaults would print every level to stdout, which is the application's; so
until then memwarden's own lines are warnings and worse, on stderr, as
structlog's default renderer writes them.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

_WARNINGS = structlog.make_filtering_bound_logger(logging.WARNING)


class LibraryLogger:
    """A named structlog logger that follows the application's configuration
    once there is one, and writes only warnings and worse to stderr before."""

    def __init__(self, name: str) -> None:
        self._name = name
        # structlog's lazy proxy: it reads the configuration on first use
        self._configured = structlog.get_logger(name)

    def __getattr__(self, method: str) -> Any:
        if structlog.is_configured():
            return getattr(self._configured, method)
        # stderr as it is now: a test's capture, or a process that swapped it
        unconfigured = structlog.wrap_logger(structlog.PrintLogger(sys.stderr), wrapper_class=_WARNINGS)
        return getattr(unconfigured, method)


def get_logger(name: str) -> LibraryLogger:
    return LibraryLogger(name)
