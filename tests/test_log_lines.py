"""A log line stays a line: what a client sent is logged clipped, so a
refused megabyte id does not become a megabyte line (an attacker filling
the disk, or a log shipper dropping the line and the refusal with it)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from memwarden.engine._logging import MAX_LOGGED, clip_long_values


def test_long_values_are_clipped_and_say_how_much_was_left_out() -> None:
    event = {"event": "refused", "memory_id": "x" * 100_000, "first": {"problem": ["y" * 5_000]}, "n": 7}
    clipped = clip_long_values(None, "warning", event)
    assert clipped["memory_id"] == "x" * MAX_LOGGED + f"…(+{100_000 - MAX_LOGGED} characters)"
    assert clipped["first"] == {"problem": ["y" * MAX_LOGGED + f"…(+{5_000 - MAX_LOGGED} characters)"]}
    assert clipped["n"] == 7 and clipped["event"] == "refused"
    trace = "frame\n" * 1_000  # a traceback keeps its frames
    assert clip_long_values(None, "error", {"exception": trace})["exception"] == trace


def test_the_entry_points_logging_writes_clipped_lines() -> None:
    script = textwrap.dedent(
        """
        from memwarden.engine._logging import configure_logging
        from memwarden.events import get_logger
        configure_logging(json=True)
        get_logger("test").warning("save_refused", memory_id="위" * 1_000_000)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, encoding="utf-8", timeout=60)
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.splitlines()
    assert len(line) < 2 * MAX_LOGGED
    assert json.loads(line)["memory_id"].endswith(f"…(+{1_000_000 - MAX_LOGGED} characters)")
