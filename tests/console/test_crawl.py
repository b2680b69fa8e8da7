"""Every page of the console reachable from each key's home, clicked
through in a real browser at 1280x800 and 390x844: no link answers 404 or
an error, no page logs a browser error, and on a phone no table is wider
than the window unless it scrolls in its own region (and the memory list's
summaries are on screen). The store holds what makes links and layouts
break: tenants and ids with ``/``, ``?``, ``#``, ``+``, ``%``, Korean and
dot segments, long ids, and memories that are revoked, expired, erased,
drawn from revoked evidence and retired by a policy change.

Tenants and ids cannot hold a space (the event model refuses whitespace in
an identifier), so ``x+y`` stands in for "x y": a query string reads a
``+`` as a space, the same trap.

There is no operator key: the local operator is the command line's, and
the console signs in only with an API key (agent, security or auditor).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urldefrag, urlencode, urljoin

import pytest
from memwarden.engine import OPERATOR, KeyStore, Warden
from memwarden.engine._scheduler import Scheduler

from .._http_server import Server, start_server

expect = pytest.importorskip("playwright.sync_api").expect  # the browser suite skips without it

pytestmark = pytest.mark.usefixtures("browser")

AWKWARD_TENANTS = ("a/b", "키", "x+y", "%41", "q?#1")
AWKWARD_IDS = ("a/b", "키-메모", "x+y", "%41", "q?#frag", "..", "long-" + "가나다라" * 30)
BOUND = ("a/b", "키", "x+y", "%41")  # the awkward agent key's tenants
LIMIT = 300  # pages per crawl
VIEWPORTS = {"wide": (1280, 800), "narrow": (390, 844)}
KEYS = ("agent", "multi", "awkward", "security", "auditor")


def _save(w: Warden, tenant: str, memory_id: str, **extra: Any) -> None:
    fields: dict[str, Any] = {
        "kind": "external_fact",
        "summary": f"{memory_id}에 대한 요약입니다: 서울 사무실의 회의 시간이 목요일 오후 세 시로 변경되었습니다",
        "content": f"{memory_id}의 내용",
        "source_url": f"https://src.example/{uuid.uuid4().hex}",
        "ttl": "6h",
        **extra,
    }
    fields["scope"] = {"tenant": tenant, **fields.get("scope", {})}
    w.save(memory_id=memory_id, caller=OPERATOR, **fields)


def seed(w: Warden) -> None:
    """The awkward store."""
    long_ago = (datetime.now(UTC) - timedelta(hours=3)).isoformat()
    for tenant in AWKWARD_TENANTS[1:]:  # a few memories each: the tenant itself is the trap
        for memory_id in ("키-메모", "%41"):
            _save(w, tenant, memory_id)
    # every awkward id and every state, in a tenant an agent key bound to
    # agent "bot" sees and in one whose name holds a "/"
    for tenant in ("acme", "a/b"):
        agent = "bot" if tenant == "acme" else None
        scope = {"agent": agent} if agent else {}
        for memory_id in AWKWARD_IDS:
            _save(w, tenant, memory_id, scope=scope)
        _save(w, tenant, "retired", scope=scope, policy="strict")
        _save(w, tenant, "stale", scope=scope, fetched_at=long_ago, ttl="1h")
        _save(w, tenant, "gone", scope=scope)
        _save(w, tenant, "withdrawn", scope=scope)
        _save(w, tenant, "drawn", scope=scope, derived_from=["withdrawn", "a/b"])
        _save(w, tenant, "drawn-again", scope=scope, derived_from=["drawn"])
        w.memory_save(tenant=tenant, agent=agent or "notes", key="MEMORY.md", content="# 규칙", caller=OPERATOR)
        w.revoke({"tenant": tenant, "ids": ["withdrawn"]}, reason=f"{tenant} 출처 철회", caller=OPERATOR)
        w.erase(memory_id="gone", tenant=tenant, reason="삭제 요청", caller=OPERATOR)
    w.revoke({"tenant": "q?#1", "kind": "no-such-kind"}, reason="covers nothing", caller=OPERATOR)
    w.change_policy("strict", 2, caller=OPERATOR)  # retires every "retired"
    Scheduler(w).expire_due()  # "stale" stored as expired, as the scheduler would


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("crawl") / "crawl.db"
    w = Warden(db)
    seed(w)
    w.close()
    running = start_server(db, "--no-scheduler")
    with Warden(db) as w:
        running.keys["awkward"] = KeyStore(w).create("agent", tenants=list(BOUND), caller=OPERATOR)[0]
    yield running
    running.proc.terminate()
    running.proc.wait(timeout=30)


def sign_in(page: Any, server: Server, who: str) -> str:
    """Signed in from the console's home; the page it lands on."""
    page.goto(f"{server.url}/console")
    page.get_by_label("API key").fill(server.keys[who])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/console/memories"))
    return page.url


# what a page at 390 px must not do: a table wider than the window that is
# not inside a region that scrolls, or a memory's summary off the screen
LAYOUT = """() => {
  const width = window.innerWidth;
  const problems = [];
  if (document.documentElement.scrollWidth > width + 1)
    problems.push(`the page is ${document.documentElement.scrollWidth - width}px wider than the window`);
  for (const table of document.querySelectorAll("main table")) {
    if (table.scrollWidth <= width + 1) continue;
    let box = table.parentElement, scrolls = false;
    for (; box && box !== document.body; box = box.parentElement) {
      const o = getComputedStyle(box).overflowX;
      if ((o === "auto" || o === "scroll") && box.clientWidth <= width + 1) { scrolls = true; break; }
    }
    if (!scrolls) problems.push(`a table ${table.scrollWidth}px wide, with no scroll container`);
  }
  for (const cell of document.querySelectorAll("td.summary")) {
    const r = cell.getBoundingClientRect();
    if (r.right > width + 1 || r.width < 40) problems.push("a summary off the screen");
  }
  return problems;
}"""

LINKS = "() => [...document.querySelectorAll('a[href]')].map((a) => a.getAttribute('href'))"


def crawl(
    page: Any, server: Server, start: str, narrow: bool, also: tuple[str, ...] = ()
) -> tuple[dict[str, int], list[str]]:
    """Each same-origin link reachable from ``start`` and the pages ``also``
    (up to ``LIMIT`` pages): its status, and what was wrong."""
    problems: list[str] = []
    current = {"url": start}
    page.on("console", lambda m: m.type == "error" and problems.append(f"{current['url']}: console: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"{current['url']}: script: {e}"))
    seen: dict[str, int] = {}
    queue = [start, *also]
    while queue and len(seen) < LIMIT:
        url = queue.pop(0)
        if url in seen:
            continue
        current["url"] = url
        # the page's scripts run at the end of its body, after its styles:
        # the document is whole (and laid out) once its DOM is
        response = page.goto(url, wait_until="domcontentloaded")
        seen[url] = response.status
        if response.status >= 400:
            problems.append(f"{url}: {response.status}")
            continue
        if not url.startswith(f"{server.url}/console"):
            continue  # a static file or the docs: answered, not crawled
        main = page.locator("main").inner_text()
        python = re.search(r".{0,40}\b(True|False|None)\b.{0,20}", main)
        if python:
            problems.append(f"{url}: shows a Python value: {python.group()!r}")
        fraction = re.search(r".{0,40}\d{2}:\d{2}:\d{2}\.\d.{0,20}", main)
        if fraction:
            problems.append(f"{url}: a time with fractions of a second: {fraction.group()!r}")
        if narrow:
            problems.extend(f"{url}: {p}" for p in page.evaluate(LAYOUT))
        for href in page.evaluate(LINKS):
            target = urldefrag(urljoin(url, href)).url
            if target.startswith(server.url + "/") and target not in seen:
                queue.append(target)
    return seen, problems


# the tenants each key may read (start_server's keys, and the awkward one)
READS = {"agent": ("acme",), "multi": ("acme",), "awkward": BOUND, "security": ("acme", *BOUND)}
READS["auditor"] = READS["security"]


def searches(server: Server, who: str) -> tuple[str, ...]:
    """The search-by-meaning pages of each tenant ``who`` reads: a form,
    never a link, so the crawl is handed them (staff: the hidden ones too)."""
    staff = {"all": "yes"} if who in ("security", "auditor") else {}
    return tuple(
        f"{server.url}/console/memories?"
        + urlencode({"tenant": t, "similar": "서울 사무실", "mode": "text", **staff}, quote_via=quote)
        for t in READS[who]
    )


# the suite's own run crawls the awkward tenants' agent key and a staff key at both
# widths; --runslow crawls every key kind at both (a crawl is minutes of browser time)
CRAWLS = [
    pytest.param(who, viewport, marks=() if who in ("awkward", "security") else pytest.mark.slow)
    for who in KEYS
    for viewport in sorted(VIEWPORTS)
]


@pytest.mark.parametrize(("who", "viewport"), CRAWLS)
def test_every_reachable_page_answers(browser: Any, server: Server, who: str, viewport: str) -> None:
    width, height = VIEWPORTS[viewport]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    try:
        start = sign_in(page, server, who)
        seen, problems = crawl(page, server, start, narrow=width < 600, also=searches(server, who))
    finally:
        context.close()
    assert not problems, "\n".join(problems[:40])
    assert all(seen.get(url) == 200 for url in searches(server, who)), "every search page answered"
    memory_pages = [u for u in seen if "/console/memory?" in u]
    # the crawl reached the memories themselves, in the awkward tenants too
    assert len(memory_pages) >= 10, sorted(seen)
    if who in ("awkward", "security", "auditor"):
        reached = "\n".join(memory_pages)
        for tenant in BOUND:
            assert f"tenant={_quoted(tenant)}&" in reached, (tenant, sorted(seen)[:50])
    if who in ("security", "auditor"):
        assert any("/console/revocations/rev_" in u for u in seen)
        assert any(u.endswith("/console/policies") for u in seen)


def _quoted(value: str) -> str:
    return quote(value, safe="")


def test_status_is_the_gates_answer_and_tenants_are_offered(browser: Any, server: Server) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        sign_in(page, server, "awkward")
        # several tenants: a picker of exactly the key's own, nothing chosen for it
        picker = page.get_by_role("list").filter(has_text="키")
        assert sorted(picker.locator("a").all_inner_texts()) == sorted(BOUND)
        picker.get_by_role("link", name="a/b", exact=True).click()
        row = page.locator("table.list tbody tr", has=page.get_by_role("link", name="retired", exact=True))
        text = row.inner_text()
        assert "not usable: policy_changed" in text and "stored status: usable" in text
        assert row.locator(".verdict.ok").count() == 0, "a retired memory shows no green usable"
        row.get_by_role("link", name="retired", exact=True).click()
        assert page.url.startswith(f"{server.url}/console/memory?tenant=a%2Fb&id=retired")
        now = page.locator("section", has=page.get_by_role("heading", name="Why (not) usable now"))
        assert "not usable: policy_changed" in now.inner_text()
        # times: to the second, the UTC value kept in datetime
        stamp = page.locator("ol.timeline time").first.get_attribute("datetime")
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp or "")
        # as of its first step: the past first, today after it
        page.locator("ol.timeline li").first.get_by_role("link", name="see it as of this step").click()
        sections = page.locator("main section h2").all_inner_texts()
        assert sections[:2] == ["As it was then", "Today"], sections
        then = page.get_by_role("status").filter(has_text="As of")
        assert "usable" in then.inner_text() and "not usable" not in then.inner_text()
        # a bad moment keeps the page and says why, with a 4xx
        page.get_by_label("As of (ISO 8601, with Z or an offset)").fill("yesterday")
        with page.expect_response(re.compile(r"/console/memory\?")) as answered:
            page.get_by_role("button", name="Show then").click()
        assert answered.value.status == 422
        assert "as_of" in page.get_by_role("alert").inner_text()
        expect(page.get_by_role("heading", name=re.compile("Memory")).first).to_be_visible()
        assert page.get_by_label("As of (ISO 8601, with Z or an offset)").input_value() == "yesterday"
    finally:
        context.close()


def test_policy_change_dry_run_confirm_and_answer(browser: Any, server: Server) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        sign_in(page, server, "security")
        page.get_by_role("link", name="Policies").click()
        page.get_by_label("policy", exact=True).fill("default")
        page.get_by_label("new version").fill("2")
        head = server.head()
        page.get_by_role("button", name="Dry run").click()
        assert server.head() == head, "a dry run writes nothing"
        warning = page.get_by_role("alert").inner_text()
        assert "would retire" in warning and "Memory API entr" in warning
        per_tenant = page.get_by_role("table", name="Would retire, per tenant").inner_text()
        assert "키" in per_tenant and "a/b" in per_tenant
        page.get_by_role("button", name="Make version 2 current").click()
        page.wait_for_url(re.compile(r"/console/policies$"))
        said = page.get_by_role("status").inner_text()
        assert re.search(r"is at version 2 \(seq \d+\): [\d,]+ memories retired, \d+ Memory API entries", said), said
        assert server.head() == head + 1
        # the same version again: a no-op that says so, and no button to press
        page.get_by_label("policy", exact=True).fill("default")
        page.get_by_label("new version").fill("2")
        page.get_by_role("button", name="Dry run").click()
        expect(page.get_by_role("status")).to_contain_text("already at version 2")
        expect(page.get_by_role("button", name="Make version 2 current")).to_have_count(0)
        # a version the rule refuses (going back) keeps the form, with the reason
        page.goto(f"{server.url}/console/policies")
        page.get_by_label("policy", exact=True).fill("default")
        page.get_by_label("new version").fill("1")
        with page.expect_response(re.compile(r"/console/policies/dry-run")) as answered:
            page.get_by_role("button", name="Dry run").click()
        assert 400 <= answered.value.status < 500
        expect(page.get_by_role("alert")).to_be_visible()
        assert page.get_by_label("new version").input_value() == "1"
    finally:
        context.close()
