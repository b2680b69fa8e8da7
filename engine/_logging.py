"""structlog, configured once: JSON lines off a terminal, readable on one."""

from __future__ import annotations

import logging
import sys

import structlog

_configured = False


def configure_logging(*, json: bool | None = None, level: str = "INFO", quiet: bool = False) -> None:
    """Log lines go to stderr, never stdout: stdout carries command output.
    ``quiet``: no log lines at all (a command's own messages say enough)."""
    global _configured
    if _configured:
        return
    _configured = True
    as_json = not sys.stderr.isatty() if json is None else json
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer(ensure_ascii=False) if as_json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=structlog.ReturnLoggerFactory() if quiet else structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    # libraries that log through the standard library: only what matters
    for name in ("apscheduler", "mcp", "httpx", "uvicorn.access"):
        logging.getLogger(name).setLevel(logging.WARNING)
