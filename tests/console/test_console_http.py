"""The console over plain HTTP (no browser): sign-in, the tenant wall, bad
input answered as a page that names the field, and the security headers."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import httpx
import pytest

from .._http_server import Server, save_body, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("console-http")
    policy = folder / "policy.toml"  # the deterministic embedder: the search box's vector half
    policy.write_text('[embedder]\nkind = "hash"\ndims = 64\n', encoding="utf-8")
    running = start_server(folder / "c.db", "--no-scheduler", policy_file=policy)
    with running.client("agent") as c:  # bound to agent "bot" in acme
        assert c.post("/v1/memories", json=save_body("bot/1", ttl="6h")).status_code == 201
    with running.client("multi") as c:
        for tenant in ("acme", "globex"):
            body = save_body(f"{tenant}-other", tenant=tenant, ttl="6h", scope={"agent": "other"})
            assert c.post("/v1/memories", json=body).status_code == 201
    yield running
    running.proc.terminate()
    running.proc.wait(timeout=30)


@contextlib.contextmanager
def signed_in(server: Server, who: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30, headers={"origin": server.url}) as client:
        form = client.get("/console/login").text
        token = re.search(r'name="login_token" value="([^"]+)"', form)
        assert token
        answer = client.post(
            "/console/login", data={"login_token": token[1], "key": server.keys[who], "next": "/console/memories"}
        )
        assert answer.status_code == 303 and answer.headers["location"] == "/console/memories"
        yield client


def test_without_a_session_every_page_asks_to_sign_in(server: Server) -> None:
    with httpx.Client(base_url=server.url) as c:
        for path in ("/console/memories", "/console/audit", "/console/memories/acme/bot%2F1"):
            answer = c.get(path)
            assert answer.status_code == 303 and answer.headers["location"].startswith("/console/login?next=")
        # the key never goes in a URL: a sign-in by GET is no sign-in
        assert "mw_console" not in c.get(f"/console/login?key={server.keys['auditor']}").cookies
        # a sign-in form from another site, or without its token, is refused
        assert c.post("/console/login", data={"key": server.keys["auditor"]}).status_code == 403


def test_after_sign_in_only_local_pages(server: Server) -> None:
    client = httpx.Client(base_url=server.url, headers={"origin": server.url})
    token = re.search(r'name="login_token" value="([^"]+)"', client.get("/console/login").text)
    assert token
    for target in ("//evil.example/x", "https://evil.example", "/console\\@evil.example"):
        answer = client.post("/console/login", data={"login_token": token[1], "key": "wrong", "next": target})
        assert answer.status_code == 401
        token = re.search(r'name="login_token" value="([^"]+)"', answer.text)
        assert token and target not in answer.text.replace("&#34;", '"')
        answer = client.post(
            "/console/login", data={"login_token": token[1], "key": server.keys["auditor"], "next": target}
        )
        assert answer.headers["location"] == "/console/memories"
        token = re.search(r'name="login_token" value="([^"]+)"', client.get("/console/login").text)
        assert token


def test_a_bound_agent_key_sees_its_own_memories_only(server: Server) -> None:
    with signed_in(server, "agent") as c:
        listed = c.get("/console/memories", params={"tenant": "acme"}).text
        assert "bot/1" in listed and "acme-other" not in listed
        mine = c.get("/console/memories/acme/bot%2F1")
        assert mine.status_code == 200 and "Its text" in mine.text
        # another agent's memory, another tenant's, and none at all: the same answer
        pages = [c.get(f"/console/memories/{path}") for path in ("acme/acme-other", "globex/globex-other", "acme/nope")]
        assert {p.status_code for p in pages} == {404}
        assert all("Not found" in p.text for p in pages)
        assert c.get("/console/memories", params={"tenant": "globex"}).status_code == 403


def test_bad_input_is_a_page_naming_the_field(server: Server) -> None:
    with signed_in(server, "security") as c:
        cases = {
            # a staff key sees several tenants: a search names one
            ("/console/memories", "tenant=acme&status=bogus"): "status",
            ("/console/memories", "tenant=acme&page=0"): "page",
            ("/console/memories", "tenant=acme&text=%00"): "text",
            ("/console/memories", "status=expired"): "tenant",
            ("/console/memories/acme/bot%2F1", "as_of=2026-01-05T09:00:00"): "as_of",
            ("/console/revocations", "page=99999"): "page",
        }
        for (path, query), field in cases.items():
            answer = c.get(f"{path}?{query}")
            assert answer.status_code == 422, (path, query, answer.text)
            assert field in answer.text
        assert c.get("/console/revocations/rev_nope").status_code == 404
        assert c.get("/console/memories?tenant=acme&page=abc").status_code == 422
        csrf = re.search(r'name="csrf" value="([^"]+)"', c.get("/console/revocations").text)
        assert csrf
        head = server.head()
        missing = c.post("/console/revocations/dry-run", data={"csrf": csrf[1], "tenant": "acme"})
        assert missing.status_code == 422 and "reason" in missing.text
        unconfirmed = c.post("/console/revocations", data={"csrf": csrf[1], "tenant": "acme", "reason": "r"})
        assert unconfirmed.status_code == 422 and "confirmed" in unconfirmed.text
        assert server.head() == head


def test_security_headers(server: Server) -> None:
    with signed_in(server, "auditor") as c:
        page = c.get("/console/audit")
        assert page.headers["content-security-policy"].startswith("default-src 'self'")
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["cache-control"] == "no-store"
        # an auditor may look, never issue
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf
        refused = c.post("/console/revocations/dry-run", data={"csrf": csrf[1], "tenant": "acme", "reason": "r"})
        assert refused.status_code == 403 and "the auditor role may not do this" in refused.text


def test_controls_and_direction_overrides_are_shown_escaped(server: Server) -> None:
    # an agent's id and summary that would make one memory look like another
    memory_id = "invoice\u202egpj.exe"
    hostile = "\u202eevil\u001b[2J\u0085 요약"
    body = save_body(memory_id, ttl="6h", summary=hostile, content=hostile)
    with server.client("agent") as c:
        assert c.post("/v1/memories", json=body).status_code == 201
    with signed_in(server, "agent") as client:
        listed = client.get("/console/memories", params={"tenant": "acme"}).text
        shown = client.get("/console/memories/acme/invoice%E2%80%AEgpj.exe").text
    for page in (listed, shown):
        assert "\u202e" not in page and "\u001b" not in page and "\u0085" not in page
        assert "invoice\\u202egpj.exe" in page
    assert "\\u202eevil\\u001b[2J\\u0085 요약" in listed  # the summary
    assert "\\u202eevil\\u001b[2J\\u0085 요약" in shown  # the text


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found
    return found[1]


def test_links_name_the_tenant_and_open_whatever_the_id(server: Server) -> None:
    with signed_in(server, "agent") as c:
        listed = c.get("/console/memories").text  # the key's only tenant, opened for it
        assert 'href="/console/memory?tenant=acme&amp;id=bot%2F1"' in listed
        assert "/console/memories//" not in listed
        assert c.get("/console/memory", params={"tenant": "acme", "id": "bot/1"}).status_code == 200
        # the older path, its segments as sent
        assert c.get("/console/memories/acme/bot%2F1").status_code == 200
        assert c.get("/console/memory", params={"tenant": "acme"}).status_code == 422


def test_the_home_offers_the_tenants_the_key_may_see(server: Server) -> None:
    with signed_in(server, "multi") as c:
        home = c.get("/console/memories").text
        assert "Tenants this key may see" in home and "<table" not in home
        assert 'href="/console/memories?tenant=acme"' in home and 'href="/console/memories?tenant=globex"' in home
    with signed_in(server, "security") as c:
        assert "Tenants this key may see" in c.get("/console/memories").text


def test_refusals_keep_the_page_and_the_form(server: Server) -> None:
    with signed_in(server, "security") as c:
        then = c.get("/console/memory", params={"tenant": "acme", "id": "bot/1", "as_of": "not-a-time"})
        assert then.status_code == 422 and "as_of" in then.text
        assert "Why (not) usable now" in then.text and 'value="not-a-time"' in then.text
        kept = c.get("/console/audit", params={"kept": "12:nohash"})
        assert kept.status_code == 422 and "Check a kept head" in kept.text and 'value="12:nohash"' in kept.text
        csrf = csrf_of(c.get("/console/revocations").text)
        refused = c.post("/console/revocations/dry-run", data={"csrf": csrf, "project": "p-9", "reason": ""})
        assert refused.status_code == 422 and "reason" in refused.text
        assert "Issue a revocation" in refused.text and 'value="p-9"' in refused.text
        policy = c.post("/console/policies/dry-run", data={"csrf": csrf, "policy": "default", "version": "no way"})
        assert policy.status_code == 422 and "version" in policy.text and 'value="no way"' in policy.text
        # an unknown memory is still a page saying so
        assert c.get("/console/memory", params={"tenant": "acme", "id": "nope"}).status_code == 404
    with signed_in(server, "auditor") as c:
        csrf = csrf_of(c.get("/console/policies").text)
        refused = c.post("/console/policies/dry-run", data={"csrf": csrf, "policy": "default", "version": "2"})
        assert refused.status_code == 403 and "the auditor role may not do this" in refused.text


def test_the_confirmation_shows_no_python_values(server: Server) -> None:
    with signed_in(server, "security") as c:
        csrf = csrf_of(c.get("/console/revocations").text)
        page = c.post("/console/revocations/dry-run", data={"csrf": csrf, "everything": "yes", "reason": "drill"}).text
        assert "every memory of every tenant" in page
        main = page.split("<main", 1)[1]
        assert not re.search(r"\b(True|False|None)\b", re.sub(r"<[^>]+>", " ", main))


def found_rows(page: str) -> dict[str, tuple[str, str]]:
    """The search-by-meaning table's rows: each memory's link, its score and found-by."""
    table = page.split('aria-label="Memories found by meaning"', 1)
    if len(table) == 1:
        return {}
    rows = re.findall(
        r'<a class="id" href="([^"]+)">([^<]+)</a>.*?<td data-label="Score" class="score">([0-9.]+).*?'
        r'<td data-label="Found by" class="found-by">([a-z]+)</td>',
        table[1].split("</table>", 1)[0],
        re.S,
    )
    return {memory_id: (href, score, found) for href, memory_id, score, found in rows}


def test_search_by_meaning_with_the_keys_own_rights(server: Server) -> None:
    with server.client("multi") as c:  # the same words as bot/1, under another agent of acme and in globex
        for memory_id, tenant in (("near-other", "acme"), ("near-globex", "globex")):
            body = save_body(memory_id, tenant=tenant, ttl="6h", summary="bot/1 요약", scope={"agent": "other"})
            assert c.post("/v1/memories", json=body).status_code == 201
    with signed_in(server, "agent") as c:  # bound to agent bot in acme
        home = c.get("/console/memories").text
        assert 'aria-label="Search by meaning"' in home and '<option value="hybrid" selected>' in home
        for mode, found_by in (("hybrid", "both"), ("vector", "vector"), ("text", "text")):
            answer = c.get("/console/memories", params={"tenant": "acme", "similar": "bot/1 요약", "mode": mode})
            assert answer.status_code == 200, answer.text
            rows = found_rows(answer.text)
            # the list's rights: its own agent's memory, never another agent's nor another tenant's
            assert next(iter(rows)) == "bot/1", (mode, rows)
            assert not {"near-other", "near-globex", "acme-other", "globex-other"} & set(rows), (mode, rows)
            href, score, found = rows["bot/1"]
            assert href == "/console/memory?tenant=acme&amp;id=bot%2F1" and float(score) > 0 and found == found_by
            assert c.get(href.replace("&amp;", "&")).status_code == 200
        # a tenant the key may not read: the same refusal as the list's, on the same page
        refused = c.get("/console/memories", params={"tenant": "globex", "similar": "bot/1 요약"})
        assert refused.status_code == 403 and "not bound to tenant" in refused.text
        assert 'aria-label="Search by meaning"' in refused.text and not found_rows(refused.text)
        listed = c.get("/console/memories", params={"tenant": "globex"})
        assert listed.status_code == 403
        # bad input stays on the page, saying which field
        for bad in ("", "   ", "a\x01b"):
            empty = c.get("/console/memories", params={"tenant": "acme", "similar": bad})
            assert empty.status_code == 422 and "query" in empty.text and 'id="similar"' in empty.text
        fuzzy = c.get("/console/memories", params={"tenant": "acme", "similar": "bot", "mode": "fuzzy"})
        assert fuzzy.status_code == 422 and "mode" in fuzzy.text
        # the hidden ones are for staff: an agent key asking for them is refused, and offered no box
        assert 'name="all"' not in home
        hidden = c.get("/console/memories", params={"tenant": "acme", "similar": "bot", "all": "yes"})
        assert hidden.status_code == 403 and "the agent role may not do this" in hidden.text


def test_search_by_meaning_for_staff_shows_the_hidden_with_why(server: Server) -> None:
    with server.client("multi") as c:
        body = save_body("hidden-1", ttl="6h", summary="금고 열쇠 위치", scope={"agent": "other"})
        assert c.post("/v1/memories", json=body).status_code == 201
    with server.client("security") as c:
        revoked = c.post("/v1/revocations", json={"selector": {"ids": ["hidden-1"]}, "reason": "leaked"})
        assert revoked.status_code == 201, revoked.text
    with signed_in(server, "security") as c:
        params = {"tenant": "acme", "similar": "금고 열쇠 위치", "mode": "hybrid"}
        usable_only = c.get("/console/memories", params=params)
        assert usable_only.status_code == 200 and "hidden-1" not in found_rows(usable_only.text)
        assert 'name="all"' in usable_only.text
        shown = c.get("/console/memories", params={**params, "all": "yes"})
        assert shown.status_code == 200
        rows = found_rows(shown.text)
        assert rows["hidden-1"][2] == "text"  # its vector left the index when the revocation committed
        assert (
            "not usable: revoked" in shown.text
            and 'id="all" name="all" type="checkbox" value="yes" checked' in shown.text
        )
        # a staff key sees several tenants: a search names one
        unnamed = c.get("/console/memories", params={"similar": "금고"})
        assert unnamed.status_code == 422 and "tenant" in unnamed.text
