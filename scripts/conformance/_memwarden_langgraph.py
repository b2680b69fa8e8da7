"""A pytest plugin: LangGraph's own store tests, run against ``MemwardenStore``.

Loaded by ``scripts/conformance/langgraph`` into a pytest run of the tests
shipped in LangGraph's source distributions. Where a test module builds
LangGraph's store (``InMemoryStore(...)``, ``SqliteStore.from_conn_string``,
``AsyncSqliteStore.from_conn_string``), the name is bound, for the test's
duration, to a class that builds a ``MemwardenStore`` instead, in a fresh
tenant of the leg's memwarden store (the tenant is memwarden's wall: a
store sees nothing of another's). Every test runs on every leg:

* ``sqlite``: a Warden on a SQLite file, in process;
* ``postgres``: a Warden on a fresh PostgreSQL database, in process;
* ``client``: a live ``memwarden serve`` on 127.0.0.1 (a process of its
  own, over a SQLite file), a ``Client`` where the test builds a
  blocking store and an ``AsyncClient`` where it builds an async one,
  each with an agent key bound to the store's tenant.

A test their suites run twice, once for a ``SqliteStore`` in memory and
once on a file (the ``store`` and ``conn_string`` fixtures, ``conn_type``),
runs once: both build the same ``MemwardenStore``.

The committed list of intended differences (``--memwarden-differences``)
marks its tests as expected to fail, strictly: an unlisted failure fails
the run, and so does a listed test that passes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from memwarden.client import AsyncClient, Client
from memwarden.engine import OPERATOR, KeyStore, Principal, Scheduler, Warden
from memwarden.integrations.langgraph import MemwardenStore

LEGS = ("sqlite", "postgres", "client")
POSTGRES = os.environ.get("MEMWARDEN_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432")


# -- the legs ------------------------------------------------------------------------------------


class Leg:
    """One memwarden store, in which each LangGraph store a test builds is
    a fresh tenant."""

    name: str

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.warden: Warden  # the operator's own, on the same store: expiry sweeps, keys
        self._scheduler: Scheduler | None = None
        self._made = 0

    def tenant(self) -> str:
        self._made += 1
        return f"lg{self._made}-{uuid.uuid4().hex[:8]}"

    def memories(self, tenant: str, *, asynchronous: bool) -> Any:
        """What a store in ``tenant`` acts through: an agent bound to it."""
        return self.warden.acting_as(Principal(f"conformance-{tenant}", "agent", (tenant,)))

    def sweep(self) -> int:
        """What a TTL sweep is in memwarden: the scheduler's expiry job, which
        records a ``memory.expired`` for every memory past its TTL (a read
        already leaves each out from that moment on); how many it recorded."""
        if self._scheduler is None:
            self._scheduler = Scheduler(self.warden)
        return self._scheduler.expire_due()

    def close(self) -> None:
        self.warden.close()


def sqlite_url(path: Path) -> str:
    """A SQLite store whose commits do not wait for the disk: a test's store
    outlives no crash (as the test suite's PostgreSQL databases commit
    without ``synchronous_commit``)."""
    return f"sqlite:///{path}?synchronous=normal"


class SQLiteLeg(Leg):
    name = "sqlite"

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.warden = Warden(sqlite_url(folder / "sqlite.db"))


class PostgresLeg(Leg):
    name = "postgres"

    def __init__(self, folder: Path) -> None:
        import psycopg

        super().__init__(folder)
        self.database = f"memwarden_conformance_{uuid.uuid4().hex[:12]}"
        self._admin = psycopg.connect(f"{POSTGRES}/postgres", autocommit=True, connect_timeout=5)
        self._admin.execute(f'CREATE DATABASE "{self.database}"')
        self._admin.execute(f'ALTER DATABASE "{self.database}" SET synchronous_commit = off')
        self.warden = Warden(f"{POSTGRES}/{self.database}")
        # an erasure waits (30 s at most) for every older transaction on the
        # server, other databases' too, before its VACUUM FULL: on a server
        # shared with other suites each of a test's thousand deletes would
        # wait so. These tests ask nothing of the erased bytes' leaving the
        # files (tests/test_erase.py does): the vacuum runs without the wait.
        self.warden.store.erasure_wait = 0.0

    def close(self) -> None:
        super().close()
        self._admin.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
        self._admin.close()


class ClientLeg(Leg):
    """A live server; each store an agent key of its own, bound to its tenant."""

    name = "client"

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        db = sqlite_url(folder / "served.db")
        self.warden = Warden(db)
        self.keys = KeyStore(self.warden)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.log = folder / "server.log"
        with open(self.log, "w", encoding="utf-8") as out:
            memwarden = Path(sys.executable).with_name("memwarden")
            command = [str(memwarden), "--db", db, "serve", "--host", "127.0.0.1", "--port", str(port)]
            self.server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"memwarden serve did not start: {self.log.read_text(encoding='utf-8')}")
            time.sleep(0.1)
        self.clients: list[Client] = []

    def memories(self, tenant: str, *, asynchronous: bool) -> Any:
        key, _ = self.keys.create("agent", tenants=[tenant], caller=OPERATOR)
        if asynchronous:
            return AsyncClient(self.url, key)
        client = Client(self.url, key)
        self.clients.append(client)
        return client

    def closed_clients(self) -> None:
        while self.clients:
            self.clients.pop().close()

    def close(self) -> None:
        self.closed_clients()
        self.server.terminate()
        self.server.wait(timeout=30)
        super().close()


_legs: dict[str, Leg] = {}
_current: list[Leg] = []
_built: list[bool] = [False]  # whether the running test built a store


def leg() -> Leg:
    _built[0] = True
    return _current[-1]


# -- where their tests build their stores ---------------------------------------------------------


class InMemoryStore(MemwardenStore):
    """Built where a test builds LangGraph's ``InMemoryStore``: a
    ``MemwardenStore`` in a fresh tenant (over a blocking ``Client`` on the
    client leg)."""

    def __init__(self, *, index: Any = None, ttl: Any = None) -> None:
        current = leg()
        tenant = current.tenant()
        super().__init__(current.memories(tenant, asynchronous=False), tenant=tenant, index=index, ttl=ttl)


class SqliteStore(InMemoryStore):
    """Built where a test builds LangGraph's ``SqliteStore``, with the
    methods of its own the tests call (the connection string names no
    memwarden store: each is a fresh tenant of the leg's)."""

    _sweeper: tuple[threading.Thread, threading.Event] | None = None

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str, *, index: Any = None, ttl: Any = None) -> Iterator[SqliteStore]:
        yield cls(index=index, ttl=ttl)

    def setup(self) -> None:
        """memwarden makes its schema as its store opens: nothing is left to set up."""

    def sweep_ttl(self) -> int:
        return _current[-1].sweep()

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> concurrent.futures.Future[None]:
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        interval = 60 * float(sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5)
        stop = threading.Event()
        current = _current[-1]

        def sweeping() -> None:
            while not stop.wait(interval):
                current.sweep()
            done.set_result(None)

        thread = threading.Thread(target=sweeping, daemon=True)
        thread.start()
        self._sweeper = (thread, stop)
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        if self._sweeper is None:
            return True
        thread, stop = self._sweeper
        stop.set()
        thread.join(timeout)
        return not thread.is_alive()


class AsyncSqliteStore(MemwardenStore):
    """Built where a test builds LangGraph's ``AsyncSqliteStore`` (in a
    running event loop): over an ``AsyncClient`` on the client leg."""

    _sweeper: asyncio.Task[None] | None = None

    def __init__(self, *, index: Any = None, ttl: Any = None) -> None:
        current = leg()
        tenant = current.tenant()
        super().__init__(current.memories(tenant, asynchronous=True), tenant=tenant, index=index, ttl=ttl)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, conn_string: str, *, index: Any = None, ttl: Any = None
    ) -> AsyncIterator[AsyncSqliteStore]:
        store = cls(index=index, ttl=ttl)
        try:
            yield store
        finally:
            await store.stop_ttl_sweeper()
            if isinstance(store.memories, AsyncClient):
                await store.memories.aclose()

    async def setup(self) -> None:
        """memwarden makes its schema as its store opens: nothing is left to set up."""

    async def sweep_ttl(self) -> int:
        return await asyncio.to_thread(_current[-1].sweep)

    async def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> asyncio.Task[None]:
        interval = 60 * float(sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5)

        async def sweeping() -> None:
            while True:
                await asyncio.sleep(interval)
                await self.sweep_ttl()

        self._sweeper = asyncio.create_task(sweeping())
        return self._sweeper

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        if self._sweeper is None:
            return True
        self._sweeper.cancel()
        done, _ = await asyncio.wait([self._sweeper], timeout=timeout)
        self._sweeper = None
        return bool(done)


STAND_INS = {"InMemoryStore": InMemoryStore, "SqliteStore": SqliteStore, "AsyncSqliteStore": AsyncSqliteStore}


# -- pytest --------------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("memwarden")
    group.addoption("--memwarden-legs", default=",".join(LEGS), help="comma-separated legs to run on")
    group.addoption("--memwarden-package", required=True, help="the distribution whose tests these are")
    group.addoption("--memwarden-differences", required=True, help="the intended differences (TOML)")
    group.addoption("--memwarden-report", default=None, help="write the outcomes here (JSON)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "flaky: LangGraph's mark for a timing test (run once here)")
    legs = [name for name in config.getoption("--memwarden-legs").split(",") if name]
    unknown = set(legs) - set(LEGS)
    if unknown:
        raise pytest.UsageError(f"--memwarden-legs: unknown {sorted(unknown)} (known: {', '.join(LEGS)})")
    config._memwarden_legs = legs  # type: ignore[attr-defined]
    with open(config.getoption("--memwarden-differences"), "rb") as f:
        listed = tomllib.load(f).get("difference", [])
    package = config.getoption("--memwarden-package")
    config._memwarden_differences = {  # type: ignore[attr-defined]
        entry["test"].split("/", 1)[1]: entry for entry in listed if entry["test"].split("/", 1)[0] == package
    }
    config._memwarden_outcomes = {}  # type: ignore[attr-defined]
    config._memwarden_folder = Path(tempfile.mkdtemp(prefix="memwarden-langgraph-"))  # type: ignore[attr-defined]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "memwarden_leg" in metafunc.fixturenames:
        metafunc.parametrize("memwarden_leg", metafunc.config._memwarden_legs, indirect=True)  # type: ignore[attr-defined]


def _function_id(item: pytest.Item) -> str:
    return item.nodeid.split("[", 1)[0]


def _param(item: pytest.Item, name: str) -> Any:
    callspec = getattr(item, "callspec", None)
    return None if callspec is None else callspec.params.get(name)


def _leg_of(item: pytest.Item) -> str:
    return _param(item, "memwarden_leg")


# the fixtures and parameters by which their tests run a SqliteStore on a file
# as well as in memory: both build the same MemwardenStore, so one runs
CONNECTIONS = ("store", "conn_string", "conn_type")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    twins = [item for item in items if any(_param(item, name) == "file" for name in CONNECTIONS)]
    if twins:
        config.hook.pytest_deselected(items=twins)
        items[:] = [item for item in items if item not in twins]
    differences = config._memwarden_differences  # type: ignore[attr-defined]
    seen = set()
    for item in items:
        entry = differences.get(_function_id(item))
        if entry is None:
            continue
        seen.add(_function_id(item))
        if _leg_of(item) in entry.get("legs", LEGS):
            item.add_marker(pytest.mark.xfail(reason=entry["why"], strict=True, run=True))
    files = {_function_id(item).split("::", 1)[0] for item in items}
    missing = {test for test in set(differences) - seen if test.split("::", 1)[0] in files}
    if missing:  # the list names only tests that exist
        raise pytest.UsageError(f"the intended differences name tests not collected: {sorted(missing)}")


@pytest.fixture(autouse=True)
def memwarden_leg(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Every test, on each leg: LangGraph's store names in its module bound
    to the stand-ins that build a ``MemwardenStore`` on that leg."""
    name = request.param
    current = _legs.get(name)
    if current is None:
        folder = request.config._memwarden_folder  # type: ignore[attr-defined]
        current = _legs[name] = {"sqlite": SQLiteLeg, "postgres": PostgresLeg, "client": ClientLeg}[name](folder)
    for attribute, stand_in in STAND_INS.items():
        if hasattr(request.module, attribute):
            monkeypatch.setattr(request.module, attribute, stand_in)
    _current.append(current)
    _built[0] = False
    try:
        yield name
    finally:
        _current.pop()
        if isinstance(current, ClientLeg):
            current.closed_clients()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        if hasattr(report, "wasxfail"):
            state = "xfailed" if report.outcome == "skipped" else "xpassed"
        elif isinstance(report.longrepr, str) and report.longrepr.startswith("[XPASS(strict)]"):
            state = "xpassed"  # a listed difference that is one no more: the run fails
        else:
            state = "error" if report.when == "setup" else report.outcome
        item.config._memwarden_outcomes[item.nodeid] = {  # type: ignore[attr-defined]
            "leg": _leg_of(item),
            "outcome": state,
            "store": _built[0],
        }


def pytest_unconfigure(config: pytest.Config) -> None:
    for current in _legs.values():
        current.close()
    _legs.clear()
    shutil.rmtree(config._memwarden_folder, ignore_errors=True)  # type: ignore[attr-defined]
    path = config.getoption("--memwarden-report", None)
    if path:
        Path(path).write_text(json.dumps(config._memwarden_outcomes, indent=1), encoding="utf-8")  # type: ignore[attr-defined]
