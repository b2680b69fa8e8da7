"""The command line starts at once: importing it, ``memwarden --version`` and
a read of one memory on an SQLite store load no database driver, numpy, web
framework, cipher, rich table or scheduler; each comes with the command that
uses it; and a read of the views (``get``, ``due``) loads no event model,
pydantic or other operation of the Warden's, which come with the first
write or call. And memwarden, as a library, configures no logging: importing it
and opening a store leave structlog and the logging module as they were.

Each check runs in a fresh interpreter (this one has imported everything)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from memwarden.engine import OPERATOR, Warden

# what the brief of issue 60 names, and what each heavy face brings
NEVER_AT_START = {
    "psycopg",
    "numpy",
    "usearch",
    "fastapi",
    "uvicorn",
    "mcp",
    "cryptography",
    "rich",
    "httpx",
    "apscheduler",
    "sqlite_utils",
    "prometheus_client",
    "structlog",
}


def _loaded_after(code: str) -> set[str]:
    """The top-level packages of NEVER_AT_START that ``code`` leaves imported."""
    probe = (
        f"import json, sys\n{code}\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(NEVER_AT_START)!r}))))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWARDEN_")}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


# what a read of the views (``get``, ``due``) does not use: the event models
# and pydantic (they load with the first event decoded or written), and the
# Warden's other operations (each method imports its module when first called)
NOT_FOR_A_READ = {
    "pydantic",
    "memwarden.events._models",
    "memwarden.events._types",
    "memwarden.engine._backup",
    "memwarden.engine._batch",
    "memwarden.engine._records",
    "memwarden.engine._history",
    "memwarden.engine._revoking",
    "memwarden.engine._verify",
    "memwarden.engine._validation",
    "memwarden.engine.sinks._ops",
    "memwarden.engine.recall._search",
}


def _modules_after(code: str, watched: set[str]) -> set[str]:
    """The modules of ``watched`` (full names) that ``code`` leaves imported."""
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(set(sys.modules) & set({sorted(watched)!r}))))"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWARDEN_")}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _run_cli(*argv: str) -> str:
    return (
        "from memwarden.engine.faces.cli import main\n"
        f"sys.argv = ['memwarden', *{list(argv)!r}]\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert exit.code in (0, None), exit.code\n"
    )


def test_importing_the_command_line_loads_none_of_the_heavy_libraries() -> None:
    assert _loaded_after("import memwarden.engine.faces.cli") == set()


def test_version_loads_none_of_them() -> None:
    assert _loaded_after(_run_cli("--version")) == set()


def test_help_loads_none_of_them() -> None:
    assert _loaded_after(_run_cli("--help")) == set()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    db = tmp_path_factory.mktemp("lazy") / "small.db"
    w = Warden(db)
    w.save(
        memory_id="m1",
        kind="permission",
        summary="s",
        content="c",
        source_url="https://e.example/a",
        scope={"tenant": "t"},
        caller=OPERATOR,
    )
    w.close()
    return str(db)


def test_reading_a_memory_on_sqlite_loads_none_of_them(store: str) -> None:
    assert _loaded_after(_run_cli("--db", store, "get", "m1")) == set()
    assert _loaded_after(_run_cli("--db", store, "due")) == set()


@pytest.mark.parametrize("command", [["get", "m1"], ["due"]], ids=["get", "due"])
def test_a_read_loads_no_event_model_pydantic_or_other_operation(store: str, command: list[str]) -> None:
    assert _modules_after(_run_cli("--db", store, *command), NOT_FOR_A_READ) == set()


def test_the_event_models_load_with_the_first_write(store: str) -> None:
    # the watch above can see them: a save loads what a read does not
    saving = ("save", "--id", "m2", "--kind", "permission", "--summary", "s", "--content", "c")
    code = _run_cli("--db", store, *saving, "--source-url", "https://e.example/b", "--tenant", "t")
    assert {"pydantic", "memwarden.events._models"} <= _modules_after(code, NOT_FOR_A_READ)


def test_a_table_on_a_pipe_loads_no_rich(store: str) -> None:
    # the subprocess's stdout is a pipe: tab-separated lines, no rich
    assert _loaded_after(_run_cli("--db", store, "query", "--tenant", "t")) == set()


@pytest.mark.parametrize(
    "code",
    [
        "import memwarden.engine, memwarden.events, memwarden.projections, memwarden.client",
        "from memwarden.engine import Warden\nWarden(':memory:').close()",
    ],
    ids=["import", "open a store"],
)
def test_the_library_configures_no_logging(code: str) -> None:
    probe = (
        "import logging, sys\n"
        "root = logging.getLogger()\n"
        "before = (root.level, list(root.handlers), logging.getLogger('apscheduler').level)\n"
        f"{code}\n"
        "import structlog\n"
        "assert not structlog.is_configured(), 'structlog configured'\n"
        "assert (root.level, list(root.handlers), logging.getLogger('apscheduler').level) == before\n"
        "from memwarden.events._log import get_logger\n"
        "get_logger('memwarden.test').info('quiet_by_default')\n"
        "get_logger('memwarden.test').warning('said_on_stderr')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # stdout is the application's
    assert "said_on_stderr" in done.stderr and "quiet_by_default" not in done.stderr


def test_a_library_save_loads_no_structlog_until_the_application_configures_it() -> None:
    # below warnings, an unconfigured structlog would filter the line out: the first save
    # of a library caller does not pay for loading structlog (and rich) to drop it
    save = (
        "from memwarden.engine import OPERATOR, Warden\n"
        "w = Warden(':memory:')\n"
        "w.save(memory_id='m', kind='tool_result', summary='s', content='c', source_url='https://example.com',"
        " scope={'tenant': 't'}, caller=OPERATOR)\n"
    )
    assert "structlog" not in _loaded_after(save)
    configured = (
        "import structlog\n"
        "structlog.configure(processors=[structlog.processors.JSONRenderer()],"
        " logger_factory=structlog.PrintLoggerFactory())\n"
        f"{save}"
    )
    done = subprocess.run([sys.executable, "-c", configured], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert '"event": "memory_saved"' in done.stdout
