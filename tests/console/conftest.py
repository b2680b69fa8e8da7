"""A real browser (Debian's Chromium, driven by Playwright) against a real
``memwarden serve`` on 127.0.0.1. A failing test leaves a screenshot of its
page in ``tests/artifacts/``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).parent.parent / "artifacts"
CHROMIUM = os.environ.get("MEMWARDEN_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


def chromium_missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]')"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium; scripts/test installs it)"
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    if report.when == "call":
        item.stash[FAILED] = report.failed
    return report


FAILED = pytest.StashKey[bool]()


# the package's scope, not the session's: Playwright's sync API keeps an
# event loop running in this thread, and every later test that runs one of
# its own (the MCP clients) would find it there
@pytest.fixture(scope="package")
def browser() -> Iterator[object]:
    why = chromium_missing()
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the browser tests must run under CI: {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture(params=[1280, 390], ids=["wide", "narrow"])
def width(request: pytest.FixtureRequest) -> int:
    return request.param


@pytest.fixture
def page(browser: object, width: int, request: pytest.FixtureRequest) -> Iterator[object]:
    context = browser.new_context(viewport={"width": width, "height": 900})  # type: ignore[attr-defined]
    opened = context.new_page()
    yield opened
    if request.node.stash.get(FAILED, False):
        ARTIFACTS.mkdir(exist_ok=True)
        name = request.node.nodeid.split("::")[-1].replace("/", "_").replace("[", "-").replace("]", "")
        opened.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    context.close()
