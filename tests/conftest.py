from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from memwarden.engine import OPERATOR, Principal, Warden, configure_logging
from memwarden.engine.faces.cli import cli
from memwarden.events import FrozenClock, MemorySaved, Scope, SQLiteEventLog, content_checksum

from ._sizes import FLAG
from .backends import BACKENDS, Backend

START = "2026-01-05T09:00:00Z"

configure_logging(level="WARNING")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", help="run the larger settings too")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--runslow"):
        os.environ[FLAG] = "1"


# files of a test or two that take minutes, most of it waiting on their suites' sleeps and
# servers: handed out first, so that the test workers' other files fill those waits instead of the
# run's end waiting on them (xdist hands out the files with the most tests first)
FIRST = ("test_langgraph_conformance", "test_promises")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LongFilesFirst(LoadFileScheduling):
        def _assign_work_unit(self, node: Any) -> None:
            for scope in [s for s in self.workqueue if Path(s).name.startswith(FIRST)]:
                self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return LongFilesFirst(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="larger setting: pass --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """At a module's end (its fixtures torn down), its stores go back to
    their backends, to be emptied and lent again."""
    yield
    if nextitem is None or nextitem.path != item.path:
        for backend in BACKENDS:
            backend.module_ended()


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(START)


@pytest.fixture(scope="session", params=BACKENDS, ids=lambda b: b.name)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The store every contract test runs against, once per backend. One
    that cannot run here is skipped with its reason, except under
    ``CI=true``, where every backend must run."""
    chosen = ready(request.param)
    yield chosen
    chosen.close()


def ready(chosen: Backend) -> Backend:
    """``chosen``, if it can run here; else the test is skipped with the
    reason (failed under ``CI=true``, where every backend must run)."""
    missing = chosen.available()
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true needs the {chosen.name} backend: {missing}")
        pytest.skip(missing)
    return chosen


@pytest.fixture
def db_path(tmp_path: Path, backend: Backend) -> Path:
    return backend.db(tmp_path)


@pytest.fixture
def fresh_log(db_path: Path, clock: FrozenClock) -> Iterator[SQLiteEventLog]:
    log = SQLiteEventLog(db_path, clock=clock)
    yield log
    log.close()


@pytest.fixture
def warden(db_path: Path, clock: FrozenClock) -> Iterator[Warden]:
    w = Warden(db_path, clock=clock)
    yield w
    w.close()


def scratch_warden(backend: Backend, tmp_path: Path, name: str = "scratch", **options: Any) -> Warden:
    """A Warden on a store as new, for one example of a property test
    (``Backend.scratch``: PostgreSQL's lent database emptied, not made)."""
    return Warden(backend.scratch(tmp_path, name), clock=FrozenClock(START), **options)


def agent_key(*tenants: str, agent: str | None = None, key_id: str = "test") -> Principal:
    """An agent key's caller, bound to ``tenants`` (and ``agent``)."""
    return Principal(key_id, "agent", tenants, agent)


def saved(i: int, *, tenant: str = "acme", memory_id: str | None = None, version: int = 1, **extra: Any) -> MemorySaved:
    """A valid memory.saved event, for log-level tests."""
    text = f"content {i} 한국어 내용"
    data: dict[str, Any] = dict(
        memory_id=f"m{i}" if memory_id is None else memory_id,
        version=version,
        kind="external_fact",
        summary=f"summary {i} 요약",
        content_checksum=content_checksum(text),
        content_length=len(text.encode()),
        source_url=f"https://example.org/{i}",
        fetched_at=datetime(2026, 1, 5, 9, 0, tzinfo=FrozenClock(START).now().tzinfo),
        expires_at=datetime(2026, 1, 5, 15, 0, tzinfo=FrozenClock(START).now().tzinfo),
        scope=Scope(tenant=tenant, project="p1"),
    )
    data.update(extra)
    return MemorySaved(**data)


def save_memory(
    w: Warden,
    memory_id: str,
    *,
    tenant: str = "acme",
    project: str = "p1",
    content: str | None = None,
    ttl: str | timedelta | None = "6h",
    **extra: Any,
) -> Any:
    return w.save(
        caller=extra.pop("caller", OPERATOR),
        memory_id=memory_id,
        kind=extra.pop("kind", "external_fact"),
        summary=extra.pop("summary", f"about {memory_id}"),
        content=content if content is not None else f"text of {memory_id} 내용",
        source_url=extra.pop("source_url", f"https://example.org/{memory_id}"),
        scope={"tenant": tenant, "project": project, **extra.pop("scope", {})},
        ttl=ttl,
        **extra,
    )


@pytest.fixture
def scoped(warden: Warden, clock: FrozenClock) -> Warden:
    """The query tests' corpus: three memories of acme in two projects and
    scopes, Korean and English, a second apart, and one of globex."""
    save_memory(
        warden,
        "a",
        tenant="acme",
        project="p1",
        summary="서울에서 열린 회의",
        kind="external_fact",
        scope={"user": "kim", "agent": "planner", "permission": "calendar"},
    )
    clock.advance("1s")
    save_memory(
        warden,
        "b",
        tenant="acme",
        project="p2",
        summary="부산 출장 계획",
        kind="research_result",
        scope={"user": "lee", "agent": "travel"},
        content="KTX 08:00 출발",
        ttl=None,
    )
    clock.advance("1s")
    save_memory(
        warden,
        "c",
        tenant="acme",
        project="p1",
        summary="Quarterly budget",
        kind="project_rule",
        scope={"tool": "sheets"},
    )
    clock.advance("1s")
    save_memory(warden, "x", tenant="globex", project="p1", summary="서울 사무실 이전")
    return warden


class Cli:
    """Runs the real click command in-process against one database."""

    def __init__(self, db: Path | str) -> None:
        self.db = db
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None) -> Result:
        return self.runner.invoke(cli, ["--db", str(self.db), *args], input=input, catch_exceptions=False)

    def json(self, *args: str, code: int = 0) -> Any:
        result = self(*args, "--json")
        assert result.exit_code == code, (result.exit_code, result.output, result.stderr)
        return json.loads(result.stdout)


@pytest.fixture
def run_cli(db_path: Path) -> Cli:
    return Cli(db_path)


def memwarden_subprocess(
    db: Path | str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a user would run it."""
    exe = Path(sys.executable).with_name("memwarden")
    return subprocess.run(
        [str(exe), "--db", str(db), *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
    )
