"""memwarden is a guest in its users' processes: using the library leaves
the process-wide state it found (the garbage collector, the interpreter's
switch interval and recursion limit, signal and exception hooks, the root
logger, structlog's configuration) as it was. Only a server entry point
(``engine/faces/cli/_*.py``), which owns its process, may change them."""

from __future__ import annotations

import gc
import logging
import multiprocessing
import re
import signal
import subprocess
import sys
import textwrap
import threading
import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog
from memwarden.engine import OPERATOR, Warden
from memwarden.events import FrozenClock

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("events", "projections", "engine", "client", "integrations")
# calls that change the whole process: a library never makes them
FORBIDDEN = re.compile(
    r"gc\.disable|gc\.freeze|gc\.set_threshold|malloc_trim|setswitchinterval|setrecursionlimit|sys\.setprofile"
)


def process_state() -> dict[str, Any]:
    root = logging.getLogger()
    return {
        "gc.isenabled": gc.isenabled(),
        "gc.thresholds": gc.get_threshold(),
        "gc.frozen": gc.get_freeze_count(),
        "switchinterval": sys.getswitchinterval(),
        "recursionlimit": sys.getrecursionlimit(),
        "root.level": root.level,
        "root.handlers": list(root.handlers),
        "root.filters": list(root.filters),
        "logging.disable": logging.root.manager.disable,
        "structlog.configured": structlog.is_configured(),
        "structlog.config": structlog.get_config(),
        "signals": {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)},
        "excepthook": sys.excepthook,
        "threading.excepthook": threading.excepthook,
        "warnings.filters": list(warnings.filters),
        "multiprocessing.start_method": multiprocessing.get_start_method(allow_none=True),
    }


def item(i: int, tenant: str = "acme") -> dict[str, Any]:
    return {
        "memory_id": f"g{i}",
        "kind": "external_fact",
        "summary": f"fact {i} 사실",
        "content": f"the text of fact {i} 본문",
        "source_url": f"https://example.org/g/{i}",
        "scope": {"tenant": tenant, "project": "p1"},
        "ttl": "6h",
    }


class WatchingClock(FrozenClock):
    """A clock that notes what the process looks like each time memwarden
    reads it, inside its write transactions too: a change made for the span
    of a write and undone after it is a change the application sees."""

    def __init__(self) -> None:
        super().__init__("2026-01-05T09:00:00Z")
        self.seen: set[tuple[Any, ...]] = set()

    def now(self) -> datetime:
        self.seen.add((gc.isenabled(), gc.get_threshold(), sys.getswitchinterval(), sys.getrecursionlimit()))
        return super().now()


def use_the_library(db: Any) -> set[tuple[Any, ...]]:
    """What an embedding application does: saves one by one and in a batch
    large enough to be prepared outside the lock, a revocation, reads. What
    the process looked like each time memwarden read its clock."""
    clock = WatchingClock()
    warden = Warden(db, clock=clock)
    try:
        for i in range(3):
            warden.save(**item(i), caller=OPERATOR)
        results = warden.save_many([item(i) for i in range(3, 403)], caller=OPERATOR)
        assert len(results) == 400
        assert len(warden.query(tenant="acme", project="p1", limit=1000, caller=OPERATOR)) == 403
        revoked = warden.revoke({"tenant": "acme", "project": "p1"}, reason="withdrawn", caller=OPERATOR)
        assert revoked.seq > 0
        assert warden.query(tenant="acme", project="p1", caller=OPERATOR) == []
        assert warden.audit_verify(caller=OPERATOR)["ok"]
    finally:
        warden.close()
    return clock.seen


def watched() -> tuple[Any, ...]:
    return (gc.isenabled(), gc.get_threshold(), sys.getswitchinterval(), sys.getrecursionlimit())


def test_using_the_library_leaves_the_process_as_it_found_it(db_path: Path) -> None:
    before = process_state()
    seen = use_the_library(db_path)
    after = process_state()
    assert {k: v for k, v in after.items() if before[k] != v} == {}
    assert seen == {watched()}  # while it wrote, too


def test_the_library_keeps_the_callers_own_settings(db_path: Path) -> None:
    """An application that chose its own collector and switch interval keeps them."""
    thresholds, interval = gc.get_threshold(), sys.getswitchinterval()
    gc.disable()
    gc.set_threshold(1234, 5, 6)
    sys.setswitchinterval(0.002)
    try:
        seen = use_the_library(db_path)
        assert watched()[:3] == (False, (1234, 5, 6), 0.002)
        assert seen == {watched()}
    finally:
        gc.enable()
        gc.set_threshold(*thresholds)
        sys.setswitchinterval(interval)


def test_importing_and_using_it_in_a_fresh_process_changes_nothing(tmp_path: Path) -> None:
    """What an import does too, where nothing of memwarden is loaded yet
    (structlog's import-time default is left to its own test)."""
    script = textwrap.dedent(
        f"""
        import gc, logging, signal, sys, threading
        def state():
            root = logging.getLogger()
            return (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count(), sys.getswitchinterval(),
                    sys.getrecursionlimit(), root.level, list(root.handlers), logging.root.manager.disable,
                    [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)],
                    sys.excepthook, threading.excepthook)
        before = state()
        import memwarden.events, memwarden.projections, memwarden.engine, memwarden.client
        sys.path.insert(0, {str(ROOT)!r})
        from tests.test_guest import use_the_library
        use_the_library({str(tmp_path / "fresh.db")!r})
        after = state()
        print("same" if before == after else f"changed: {{before}} -> {{after}}")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "same"


def test_no_library_source_changes_process_wide_state() -> None:
    # the server's own process: the serve command and what it does to it (``_own_process``)
    cli = sorted((ROOT / "engine" / "faces" / "cli").glob("_*.py"))
    entry_points = [p for p in cli if p.name != "_commands.py" and not p.name.startswith("__")]
    entry_points += [ROOT / "engine/faces/_own_process.py"]
    assert entry_points, "the server entry points moved: this test must name them again"
    found = [
        f"{path.relative_to(ROOT)}:{number}: {match.group(0)}"
        for package in LIBRARY
        for path in sorted((ROOT / package).rglob("*.py"))
        if path not in entry_points
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for match in [FORBIDDEN.search(line)]
        if match
    ]
    assert found == [], f"library code changing the whole process: {found}"
