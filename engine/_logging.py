"""structlog, configured once, by an application's entry point (the command
line and the servers call ``configure_logging``; memwarden as a library
never does): JSON lines off a terminal, readable on one."""

from __future__ import annotations

import logging
import sys

from memwarden.events._log import configure_before_first_line

_configured = False


def configure_logging(*, json: bool | None = None, level: str = "INFO", quiet: bool = False) -> None:
    """Log lines go to stderr, never stdout: stdout carries command output.
    ``quiet``: no log lines at all (a command's own messages say enough)."""
    global _configured
    if _configured:
        return
    _configured = True
    # libraries that log through the standard library: only what matters
    for name in ("apscheduler", "mcp", "httpx", "uvicorn.access"):
        logging.getLogger(name).setLevel(logging.WARNING)
    if quiet and "structlog" not in sys.modules:
        # nothing has logged, and a one-shot command may never: structlog
        # (and rich with it) is loaded and told to keep quiet only when
        # memwarden logs its first line, not in every command's start
        configure_before_first_line(lambda: _configure(json, level, quiet))
        return
    _configure(json, level, quiet)


def _configure(json: bool | None, level: str, quiet: bool) -> None:
    import structlog

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
