"""The web console in a real browser: sign in, search, a memory whose
evidence was revoked (its reason, its tree, the moment before), a
revocation issued from its dry run and read back, the weekly chart, the
audit; every page at 1280 and 390 pixels, checked by axe-core."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from memwarden.engine import OPERATOR, KeyStore, Warden

from .._http_server import Server, save_body, start_server

expect = pytest.importorskip("playwright.sync_api").expect  # the browser suite skips without it

pytestmark = pytest.mark.usefixtures("browser")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("console") / "console.db"
    w = Warden(db)
    w.save(
        memory_id="g-1",
        kind="external_fact",
        summary="globex 비밀",
        content="globex only",
        source_url="https://globex.example/1",
        scope={"tenant": "globex"},
        ttl="6h",
        caller=OPERATOR,
    )
    w.close()
    policy = db.parent / "policy.toml"  # the deterministic embedder: the search box's vector half
    policy.write_text('[embedder]\nkind = "hash"\ndims = 64\n', encoding="utf-8")
    running = start_server(db, "--scheduler-interval", "0.5", policy_file=policy)
    yield running
    running.proc.terminate()
    running.proc.wait(timeout=30)


def family(server: Server) -> dict[str, str]:
    """Evidence, a summary drawn from it, and one drawn from the summary,
    under fresh ids (every test runs at two widths on one server)."""
    tag = uuid.uuid4().hex[:6]
    ids = {"src": f"src-{tag}", "other": f"other-{tag}", "sum": f"sum-{tag}", "meta": f"meta-{tag}"}
    with server.client("agent") as c:
        for key in ("src", "other"):
            body = save_body(ids[key], scope={"project": f"p-{tag}"}, summary=f"서울 사무실 {key} {tag}", ttl="6h")
            assert c.post("/v1/memories", json=body).status_code == 201
        parents = [ids["src"], ids["other"]]
        derived = save_body(ids["sum"], scope={"project": f"p-{tag}"}, ttl="6h", derived_from=parents)
        assert c.post("/v1/memories", json=derived).status_code == 201
        meta = save_body(ids["meta"], scope={"project": f"p-{tag}"}, ttl="6h", derived_from=[ids["sum"]])
        assert c.post("/v1/memories", json=meta).status_code == 201
    ids["project"] = f"p-{tag}"
    return ids


def sign_in(page: Any, server: Server, who: str) -> None:
    page.goto(f"{server.url}/console/login")
    checked(page)
    page.get_by_label("API key").fill(server.keys[who])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/console/memories"))
    assert server.keys[who] not in page.url and server.keys[who] not in page.content()


def checked(page: Any) -> None:
    """The page passes axe-core and fits its width (wide tables scroll in
    their own region, the page itself does not)."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    assert results.violations_count == 0, results.generate_report()
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"{page.url} is {overflow}px wider than the window"


def test_sign_in_search_and_tenant_wall(page: Any, server: Server) -> None:
    ids = family(server)
    sign_in(page, server, "agent")
    checked(page)
    page.get_by_label("Project").fill(ids["project"])
    page.get_by_label("Text").fill("서울")
    page.get_by_role("button", name="Search").click()
    rows = page.locator("table.list tbody tr")
    expect(rows).to_have_count(2)  # waits for the answer: the click only starts the form's submission
    assert {rows.nth(i).locator("td").first.locator("a").inner_text() for i in range(2)} == {ids["src"], ids["other"]}
    checked(page)
    # an agent key sees only its own tenants: another tenant's memory is not found, as one that does not exist
    page.goto(f"{server.url}/console/memories/globex/g-1")
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    page.goto(f"{server.url}/console/memories/globex/no-such-id")
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    # and none of the staff's pages
    assert page.get_by_role("link", name="Revocations").count() == 0
    response = page.goto(f"{server.url}/console/revocations")
    assert response.status == 403
    assert "the agent role may not do this" in page.content()
    checked(page)


def test_search_by_meaning_scores_and_the_hidden_for_staff(page: Any, server: Server) -> None:
    ids = family(server)
    tag = ids["project"][2:]
    with server.client("security") as c:
        revoked = c.post("/v1/revocations", json={"selector": {"ids": [ids["other"]]}, "reason": "withdrawn"})
        assert revoked.status_code == 201, revoked.text
    sign_in(page, server, "agent")
    page.get_by_label("By meaning", exact=True).fill(f"서울 사무실 src {tag}")
    page.get_by_label("Mode", exact=True).select_option("hybrid")
    page.get_by_role("button", name="Find by meaning").click()
    table = page.get_by_role("table", name=re.compile("Closest in meaning"))
    first = table.locator("tbody tr").first
    assert first.locator("td").first.locator("a").inner_text() == ids["src"]
    assert float(first.locator("td.score").inner_text().split()[0]) > 0
    assert first.locator("td.found-by").inner_text() == "both"
    # the revoked one is not answered to an agent key, whatever its score, and it is offered no hidden ones
    assert ids["other"] not in table.inner_text() and page.get_by_label("Hidden ones too").count() == 0
    assert page.get_by_label("By meaning", exact=True).input_value() == f"서울 사무실 src {tag}"
    checked(page)
    first.locator("td").first.locator("a").click()
    page.wait_for_url(re.compile(r"/console/memory\?"))
    assert page.url.endswith(f"/console/memory?tenant=acme&id={ids['src']}")
    expect(page.get_by_role("heading", name="Why (not) usable now")).to_be_visible()
    # bad input stays on the page, saying why
    page.goto(f"{server.url}/console/memories")
    page.get_by_role("button", name="Find by meaning").click()
    expect(page.get_by_role("alert")).to_contain_text("query")
    expect(page.get_by_role("table", name=re.compile("Closest in meaning"))).to_have_count(0)
    checked(page)

    # a staff key with "hidden ones too" sees it, with its reason
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, server, "security")
    page.get_by_label("Tenant", exact=True).nth(1).select_option("acme")
    page.get_by_label("By meaning", exact=True).fill(f"서울 사무실 other {tag}")
    page.get_by_label("Mode", exact=True).select_option("hybrid")
    page.get_by_label("Hidden ones too").check()
    page.get_by_role("button", name="Find by meaning").click()
    table = page.get_by_role("table", name=re.compile("Closest in meaning"))
    row = table.locator("tr", has=page.get_by_role("link", name=ids["other"], exact=True))
    # by its words: its vector left the index when the revocation committed
    assert "not usable: revoked" in row.inner_text() and row.locator("td.found-by").inner_text() == "text"
    checked(page)


def test_revoked_evidence_reason_tree_and_the_moment_before(page: Any, server: Server) -> None:
    ids = family(server)
    sign_in(page, server, "security")
    # a revocation of the evidence, from its dry run
    page.goto(f"{server.url}/console/revocations")
    checked(page)
    page.get_by_label("memory ids (space-separated)").fill(ids["src"])
    page.get_by_label("tenant", exact=True).fill("acme")
    page.get_by_label("reason (kept in the log)").fill("source withdrawn")
    head = server.head()
    page.get_by_role("button", name="Dry run").click()
    expect(page.get_by_text("It would take out 1 memory in 1 tenant.")).to_be_visible()
    assert server.head() == head, "a dry run writes nothing"
    checked(page)
    page.get_by_role("button", name="Issue the revocation").click()
    page.wait_for_url(re.compile(r"/console/revocations/rev_"))
    expect(page.get_by_text("nothing it covers is served by any read path")).to_be_visible()
    checked(page)
    revocation_id = page.url.rsplit("/", 1)[1]
    page.goto(f"{server.url}/console/revocations")
    row = page.locator("tr", has=page.get_by_role("link", name=revocation_id))
    assert "source withdrawn" in row.inner_text() and "confirmed" in row.inner_text()

    # the summary: not usable, why, and the tree up to the revoked evidence and down
    page.goto(f"{server.url}/console/memories/acme/{ids['sum']}")
    now = page.locator("section", has=page.get_by_role("heading", name="Why (not) usable now"))
    assert "not usable" in now.inner_text()
    assert "derived_from_unusable" in now.inner_text() or "source_revoked" in now.inner_text()
    evidence = page.get_by_role("list", name="Evidence")
    assert re.search(rf"{ids['src']} v1\s+revoked", evidence.inner_text())
    assert re.search(rf"{ids['other']} v1\s+usable", evidence.inner_text())
    assert ids["meta"] in page.get_by_role("list", name="Drawn from it").inner_text()
    timeline = page.locator("ol.timeline li")
    assert "memory.invalidated" in timeline.last.inner_text()
    checked(page)

    # as of the step before the invalidation, it was usable
    timeline.nth(timeline.count() - 2).get_by_role("link", name="see it as of this step").click()
    then = page.get_by_role("status").filter(has_text="As of")
    assert "usable" in then.inner_text() and "not usable" not in then.inner_text()
    assert "memory.invalidated" not in page.locator("ol.timeline").inner_text()
    checked(page)
    # the as-of control takes a typed moment too; a naive one is refused naming the field
    page.get_by_label("As of (ISO 8601, with Z or an offset)").fill("2026-01-01T00:00:00")
    page.get_by_role("button", name="Show then").click()
    assert "as_of" in page.get_by_role("alert").inner_text()


def test_dry_run_says_when_it_covers_everything_or_nothing(page: Any, server: Server) -> None:
    sign_in(page, server, "security")
    head = server.head()
    page.goto(f"{server.url}/console/revocations")
    page.get_by_label("kind", exact=True).fill("no-such-kind")
    page.get_by_label("reason (kept in the log)").fill("check")
    page.get_by_role("button", name="Dry run").click()
    assert "covers nothing" in page.get_by_role("alert").inner_text()
    checked(page)
    page.goto(f"{server.url}/console/revocations")
    page.get_by_label("everything: every memory of every tenant").check()
    page.get_by_label("reason (kept in the log)").fill("breach")
    page.get_by_role("button", name="Dry run").click()
    assert "every memory of every tenant" in page.get_by_role("alert").inner_text()
    assert server.head() == head
    # an empty selector is refused naming the problem, and writes nothing
    page.goto(f"{server.url}/console/revocations")
    page.get_by_label("reason (kept in the log)").fill("nothing named")
    page.get_by_role("button", name="Dry run").click()
    assert "empty selector" in page.get_by_role("alert").inner_text()
    assert server.head() == head


def test_weekly_chart_and_numbers(page: Any, server: Server) -> None:
    family(server)
    sign_in(page, server, "auditor")
    page.get_by_role("link", name="Weekly").click()
    page.wait_for_selector("canvas[data-ready=yes]")
    table = page.get_by_role("table", name="Counters per ISO week")
    assert re.search(r"\d{4}-W\d{2}", table.inner_text())
    with server.client("auditor") as c:
        weeks = c.get("/v1/stats").json()["weeks"]
    assert str(weeks[-1]["saved"]) in table.locator("tbody tr").last.inner_text()
    checked(page)


def test_audit_head_verify_and_a_kept_head(page: Any, server: Server) -> None:
    family(server)
    sign_in(page, server, "auditor")
    page.get_by_role("link", name="Audit").click()
    with server.client("auditor") as c:
        head = c.get("/v1/audit/head").json()
    shown = page.locator("#head-value").inner_text()
    kept_seq = int(shown.split(":")[0])
    assert kept_seq >= head["seq"]
    checked(page)
    page.get_by_role("button", name="Verify the whole chain").click()
    result = page.locator("#verify-result")
    result.filter(has_text="the chain is intact").wait_for()
    assert page.locator("#verify-progress").evaluate("p => p.value === p.max")
    page.get_by_label("Kept head (SEQ:HASH)").fill(shown)
    page.get_by_role("button", name="Check").click()
    assert "today's log extends the kept head" in page.get_by_role("status").filter(has_text="extends").inner_text()
    checked(page)
    forged = f"{kept_seq}:{'0' * 64}"
    page.get_by_label("Kept head (SEQ:HASH)").fill(forged)
    page.get_by_role("button", name="Check").click()
    assert "history was rewritten" in page.get_by_role("alert").inner_text()


def test_docs_and_console_load_nothing_from_another_host(page: Any, server: Server) -> None:
    elsewhere: list[str] = []

    def only_here(route: Any) -> None:
        if route.request.url.startswith(server.url):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    page.route("**/*", only_here)
    page.goto(f"{server.url}/docs")
    page.get_by_text("/v1/memories", exact=False).first.wait_for()
    page.goto(f"{server.url}/redoc")
    page.locator("redoc h1, [role=navigation]").first.wait_for(timeout=30_000)
    sign_in(page, server, "auditor")
    for path in ("/console/revocations", "/console/weekly", "/console/audit"):
        page.goto(f"{server.url}{path}")
    assert elsewhere == []


def test_sessions_forms_and_the_key(page: Any, server: Server, tmp_path: Path) -> None:
    key = server.keys["security"]
    sign_in(page, server, "security")
    cookies = {c["name"]: c for c in page.context.cookies()}
    session = cookies["mw_console"]
    assert session["httpOnly"] and session["sameSite"] == "Strict" and session["path"] == "/console"
    assert key not in session["value"]
    jar = {"mw_console": session["value"]}
    # a state-changing form without the session's token, or from another site, is refused
    with httpx.Client(base_url=server.url, cookies=jar) as c:
        form = {"kind": "x", "reason": "forged", "confirmed": "yes"}
        assert c.post("/console/revocations", data=form).status_code == 403
        assert c.post("/console/revocations", data=form, headers={"origin": "https://evil.example"}).status_code == 403
        assert c.get("/console/revocations", headers={"cookie": "mw_console=forged"}).status_code == 303
    # a wrong key is refused without echoing it
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(re.compile(r"/console/login"))
    assert page.goto(f"{server.url}/console/audit").url.startswith(f"{server.url}/console/login")
    page.get_by_label("API key").fill("mw_000000000000_wrong")
    page.get_by_role("button", name="Sign in").click()
    assert "was not accepted" in page.get_by_role("alert").inner_text()
    assert "mw_000000000000_wrong" not in page.content()
    # a key revoked while signed in ends its session at the next request
    with Warden(server.db) as w:
        fresh, principal = KeyStore(w).create("auditor", caller=OPERATOR)
    page.get_by_label("API key").fill(fresh)
    page.get_by_role("button", name="Sign in").click()
    # back where the sign-in was asked for
    page.wait_for_url(re.compile(r"/console/audit"))
    with Warden(server.db) as w:
        KeyStore(w).revoke(principal.key_id, caller=OPERATOR)
    page.goto(f"{server.url}/console/audit")
    assert "/console/login" in page.url
    # no key ever reached the server's log
    from .._http_server import server_log

    text = server_log(server.db).read_text(encoding="utf-8")
    assert key not in text and fresh not in text
