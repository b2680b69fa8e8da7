"""One rule for bytes, the same on both backends (#38): a text no store can
keep (NUL, a lone surrogate) is refused on every write path, naming the
field, and the log is left as it was; ``migrate`` names each memory it
cannot carry before it writes a byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from memwarden.engine import OPERATOR, BatchRefused, Warden, answer
from memwarden.events import UnstorableText

from ._http_server import Server, save_body, server  # noqa: F401  (the live server fixture)
from .backends import Backend, SQLiteBackend
from .conftest import Cli, memwarden_subprocess, save_memory

BAD = {"NUL": "before\x00after", "surrogate": "before\ud800after"}


def refused(warden: Warden, field: str, write: Any, problem: str = "") -> None:
    head = warden.log.head()
    with pytest.raises(Exception) as caught:
        write()
    found = answer(caught.value)
    assert found is not None and found.status == 422 and found.exit_code == 2, caught.value
    assert found.field == field and found.problem.startswith(problem), (found.field, found.problem)
    assert warden.log.head() == head  # nothing written


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD.keys())
def test_every_write_refuses_an_unstorable_text_naming_the_field(warden: Warden, bad: str) -> None:
    refused(warden, "summary", lambda: save_memory(warden, "s", summary=bad))
    refused(warden, "content", lambda: save_memory(warden, "c", content=bad))
    refused(warden, "scope.project", lambda: save_memory(warden, "p", project=bad))
    save_memory(warden, "ok")
    refused(
        warden,
        "memories",
        lambda: warden.save_many(
            [
                dict(
                    memory_id="b1",
                    kind="external_fact",
                    summary="fine",
                    content="fine",
                    source_url="https://e.org/1",
                    scope={"tenant": "acme"},
                    ttl="1h",
                ),
                dict(
                    memory_id="b2",
                    kind="external_fact",
                    summary="fine",
                    content=bad,
                    source_url="https://e.org/2",
                    scope={"tenant": "acme"},
                    ttl="1h",
                ),
            ],
            caller=OPERATOR,
        ),
        "memories[1].content:",
    )
    refused(
        warden, "content", lambda: warden.memory_save(tenant="acme", agent="a", key="k", content=bad, caller=OPERATOR)
    )
    refused(warden, "reason", lambda: warden.revoke({"ids": ["ok"]}, reason=bad, caller=OPERATOR))
    # what is kept is kept exactly: control characters other than NUL, Korean, emoji
    kept = "\u001b[2J 서울 \u202e 🚫"
    save_memory(warden, "kept", summary=kept, content=kept)
    assert warden.get("kept", caller=OPERATOR).content == kept


def test_the_store_itself_refuses_what_no_store_keeps(warden: Warden) -> None:
    # below the engine's own checks: the one rule every write passes
    with pytest.raises(UnstorableText) as caught, warden.store.writing() as tx:
        tx.texts.put("acme", "raw", 1, "fine", "a\x00b")
    assert caught.value.field == "content" and "(acme/raw v1)" in caught.value.problem  # an import's are many


def test_http_answers_422_naming_the_field(server: Server) -> None:  # noqa: F811
    with server.client("agent") as c:
        head = server.head()
        for field, body in [
            ("summary", save_body("nul-s", summary="a\x00b")),
            ("content", save_body("nul-c", content="a\x00b")),
        ]:
            got = c.post("/v1/memories", json=body)
            assert got.status_code == 422, got.text
            assert got.json()["field"] == field, got.json()
        # a lone surrogate as JSON carries it
        raw = (
            '{"memory_id":"sur","kind":"external_fact","summary":"a\\ud800b","content":"x",'
            '"source_url":"https://src.example/s","scope":{"tenant":"acme"}}'
        )
        got = c.post("/v1/memories", content=raw, headers={"content-type": "application/json"})
        assert got.status_code == 422 and got.json()["field"] == "summary", got.text
        assert server.head() == head


def test_migrate_names_each_memory_it_cannot_carry(tmp_path: Path, backend: Backend) -> None:
    source = tmp_path / "old.db"
    w = Warden(source)
    try:
        save_memory(w, "clean")
        save_memory(w, "dirty")
    finally:
        w.close()
    # a store written before the byte rule: SQLite kept a NUL
    SQLiteBackend().replace_summary(source, "dirty", "bad\x00summary")
    result = Cli(source)("migrate", "--to", str(backend.db(tmp_path, "new.db")))  # to SQLite or PostgreSQL
    assert result.exit_code == 2, result.output
    assert "acme/dirty v1: summary holds a NUL" in result.output + result.stderr
    assert "acme/clean" not in result.output + result.stderr


HOSTILE = "\u001b[2J\u001b]0;pwned\u0007 \u202eevil\u2066 \u009b31m 서울 a\rb"


def test_the_command_line_shows_controls_and_overrides_escaped(warden: Warden, run_cli: Cli) -> None:
    save_memory(warden, "spoof\u202efdp.exe", summary=HOSTILE, content=HOSTILE + "\nline two\r\n", ttl="10000d")
    for args in (
        ["get", "spoof\u202efdp.exe"],
        ["query", "--tenant", "acme", "--all"],
        ["explain", "spoof\u202efdp.exe"],
    ):
        result = run_cli(*args)
        out = result.stdout
        assert not any(c in out for c in "\u001b\u0007\u202e\u2066\u009b"), (args, out)
        assert "spoof\\u202efdp.exe" in out, (args, out)
    shown = run_cli("get", "spoof\u202efdp.exe").stdout
    # (click strips a colour sequence off a pipe itself; what is left is shown escaped)
    assert "\\u001b]0;pwned\\u0007 \\u202eevil\\u2066 \\u009b31m 서울 a\\u000db" in shown
    assert "\nline two\n" in shown  # line breaks stay line breaks
    # --json: the same escapes, so the value comes back exactly
    raw = run_cli("get", "spoof\u202efdp.exe", "--json").stdout
    assert "\u202e" not in raw and "\u009b" not in raw
    assert json.loads(raw)["summary"] == HOSTILE
    # an error naming the id: escaped too
    missing = run_cli("get", "nope\u202e")
    assert missing.exit_code == 1 and "\u202e" not in missing.stderr, missing.stderr
    # the installed command, piped as a person's shell pipes it
    piped = memwarden_subprocess(run_cli.db, "get", "spoof\u202efdp.exe")
    assert piped.returncode == 0, piped.stderr
    assert not any(c in piped.stdout for c in "\u001b\u0007\u202e\u2066\u009b"), piped.stdout
    assert "\\u202eevil" in piped.stdout


def test_ids_no_store_holds_are_refused_or_not_found_naming_the_field(warden: Warden) -> None:
    bad = "id\ud800"
    refused(warden, "memory_id", lambda: save_memory(warden, bad, summary="fine", content="fine"))
    item = dict(kind="external_fact", summary="s", content="c", source_url="https://e.org/", scope={"tenant": "acme"})
    refused(warden, "memories", lambda: warden.save_many([{**item, "memory_id": bad, "ttl": "1h"}], caller=OPERATOR))
    for field in ("agent", "key"):
        args = {"agent": "a", "key": "k", field: bad}
        refused(warden, field, lambda a=args: warden.memory_save(tenant="acme", content="x", caller=OPERATOR, **a))
    refused(warden, "tenant", lambda: warden.query(tenant="t\x00", caller=OPERATOR))
    save_memory(warden, "m1")
    for tenant in ("t\x00", "t\ud800"):  # the same refusal naming the tenant on every path that takes one
        refused(warden, "tenant", lambda t=tenant: warden.get("m1", tenant=t, caller=OPERATOR))
        refused(warden, "tenant", lambda t=tenant: warden.explain("m1", tenant=t, caller=OPERATOR))
        refused(warden, "tenant", lambda t=tenant: warden.erase(memory_id="m1", tenant=t, reason="r", caller=OPERATOR))
    # a parent or a user no store can hold, named as the field it came in
    refused(warden, "derived_from", lambda: save_memory(warden, "child", derived_from=[bad]))
    with pytest.raises(BatchRefused) as batch:
        warden.save_many([{**item, "memory_id": "child", "ttl": "1h", "derived_from": ["m1", bad]}], caller=OPERATOR)
    assert [(p["index"], p["field"]) for p in batch.value.problems] == [(0, "derived_from")]
    refused(warden, "user", lambda: warden.erase(user="u\ud800", reason="r", caller=OPERATOR))
    for missing in (bad, "id\x00"):  # an id no store can hold is one no store holds
        with pytest.raises(Exception) as caught:
            warden.get(missing, caller=OPERATOR)
        found = answer(caught.value)
        assert found is not None and (found.status, found.field) == (404, "memory_id")


def test_import_records_refuses_a_nul_naming_the_line(tmp_path: Path) -> None:
    record = {
        "memory_id": "r1",
        "kind": "external_fact",
        "summary": "a\u0000b",
        "source_url": "https://e.org/r1",
        "fetched_at": "2026-12-01T00:00:00Z",
        "expires_at": "2027-12-01T00:00:00Z",
        "scope": {"tenant": "acme", "project": "p"},
    }
    records = tmp_path / "r.jsonl"
    records.write_text(json.dumps(record) + "\n")
    result = Cli(tmp_path / "m.db")("import-records", str(records))
    assert result.exit_code == 2 and "line 1" in result.stderr and "NUL" in result.stderr, result.stderr
