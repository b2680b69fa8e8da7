"""structlog, configured once, by an application's entry point (the command
line and the servers call ``configure_logging``; memwarden as a library
never does): JSON lines off a terminal, readable on one."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

from memwarden.events._log import configure_before_first_line

_configured = False
# a refused input is logged with what was refused, clipped: a megabyte id
# sent by a client must not become a megabyte log line (nor fill the disk)
MAX_LOGGED = 1000


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
            clip_long_values,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=structlog.ReturnLoggerFactory() if quiet else structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


def clip_long_values(_logger: object, _method: str, event: MutableMapping[str, Any]) -> dict[str, Any]:
    """Each value, nested ones too, at most ``MAX_LOGGED`` characters as the
    line shows it; a traceback keeps twenty times that, its frames being the point."""
    return {key: _clipped(value, MAX_LOGGED * (20 if key == "exception" else 1)) for key, value in event.items()}


def _clipped(value: object, most: int = MAX_LOGGED) -> object:
    if isinstance(value, str):
        return value if len(value) <= most else f"{value[:most]}…(+{len(value) - most} characters)"
    if isinstance(value, dict):
        return {key: _clipped(item, most) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_clipped(item, most) for item in value]
    return value
