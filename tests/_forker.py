"""Python processes forked from one that has imported what they need
already, for the tests that start tens of them (writers killed with
SIGKILL, children under a file-size limit): importing memwarden costs a
new interpreter about a second of CPU, a fork a few milliseconds.

Each child is a real OS process of its own, as ``subprocess.Popen`` makes
one: its own pid to kill, its own limits, its stdout (and stderr) a pipe
the test reads, and its exit status as the kernel reports it. Only the
interpreter's start and the imports are shared, done once in the forking
process before any child exists (it runs no thread, so a fork copies no
lock held elsewhere).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

# the forking process: runs the prelude (its imports), then forks a child per request (a script, its
# arguments, the fds for its stdout and stderr), answers its pid, and reaps it when asked
SERVER = r"""
import json, os, runpy, socket, sys, traceback
channel = socket.socket(fileno=int(sys.argv[1]))
exec(sys.argv[2], {})
channel.send(b"{}")
while True:
    message, fds, _, _ = socket.recv_fds(channel, 65536, 2)
    if not message:
        break
    request = json.loads(message)
    if "wait" in request:
        _, status = os.waitpid(request["wait"], 0)
        channel.send(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode())
        continue
    pid = os.fork()
    if pid == 0:
        channel.close()
        for fd, target in zip(fds, (1, 2)):
            os.dup2(fd, target)
            os.close(fd)
        sys.argv = [request["script"], *request["args"]]
        code = 0
        try:
            runpy.run_path(request["script"], run_name="__main__")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
    for fd in fds:
        os.close(fd)
    channel.send(json.dumps({"pid": pid}).encode())
"""


class Forked:
    """One forked child, as much of ``subprocess.Popen`` as the tests use."""

    def __init__(self, forker: Forker, pid: int, stdout: IO[str], stderr: IO[str] | None) -> None:
        self._forker = forker
        self.pid = pid
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None

    def wait(self) -> int:
        if self.returncode is None:
            self.returncode = int(self._forker._ask({"wait": self.pid})["returncode"])
        return self.returncode

    def communicate(self) -> tuple[str, str | None]:
        """What the child writes until it ends (stderr: None unless piped), and its end."""
        out = self.stdout.read()
        err = None if self.stderr is None else self.stderr.read()
        self.stdout.close()
        if self.stderr is not None:
            self.stderr.close()
        self.wait()
        return out, err


class Forker:
    """A process that has run ``prelude`` (the imports its children need:
    ``from memwarden.events import SQLiteEventLog``), forking a child per
    ``popen``."""

    def __init__(self, prelude: str) -> None:
        self._channel, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._process = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(theirs.fileno()), prelude], pass_fds=[theirs.fileno()]
        )
        theirs.close()
        self._channel.settimeout(300)
        self._channel.recv(16)  # the imports are done

    def _ask(self, request: dict[str, Any], fds: list[int] | None = None) -> dict[str, Any]:
        socket.send_fds(self._channel, [json.dumps(request).encode()], fds or [])
        answer = self._channel.recv(65536)
        if not answer:
            raise RuntimeError(f"the forking process ended (exit {self._process.wait()})")
        found: dict[str, Any] = json.loads(answer)
        return found

    def popen(self, script: Path | str, *args: str, stderr: bool = False) -> Forked:
        """The script run as ``python script args...`` would, in a forked
        child; its stdout (and, with ``stderr``, its stderr) a pipe."""
        pipes = [os.pipe() for _ in range(2 if stderr else 1)]
        try:
            answer = self._ask({"script": str(script), "args": list(args)}, [w for _, w in pipes])
        finally:
            for _, w in pipes:
                os.close(w)
        readers = [open(r, encoding="utf-8") for r, _ in pipes]
        return Forked(self, int(answer["pid"]), readers[0], readers[1] if stderr else None)

    def run(self, script: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
        """The script to its end, its stdout and stderr captured."""
        child = self.popen(script, *args, stderr=True)
        out, err = child.communicate()
        return subprocess.CompletedProcess([str(script), *args], child.wait(), out, err)

    def close(self) -> None:
        self._channel.close()
        self._process.wait(timeout=60)

    def __enter__(self) -> Forker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
