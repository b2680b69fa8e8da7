"""Erasure destroys the text everywhere it was kept; the history stays."""

from __future__ import annotations

import json

import pytest
from memwarden.engine import OPERATOR, Warden
from memwarden.events import TextErased

from .backends import Backend
from .conftest import Cli, save_memory

SECRET = "주민등록번호 900101-1234567 SECRETMARKER"


def test_erase_destroys_the_text_in_every_file(warden: Warden, run_cli: Cli, backend: Backend) -> None:
    save_memory(warden, "pii", content=SECRET, summary="개인 정보", scope={"user": "kim"})
    save_memory(warden, "keep", content="nothing secret here")
    for i in range(30):  # push the text through pages, the WAL and FTS segments
        save_memory(warden, f"filler{i}", content=f"filler text {i} " * 20)
    assert warden.query(tenant="acme", text="SECRETMARKER", caller=OPERATOR)[0].memory_id == "pii"
    assert SECRET.encode() in backend.bytes_at_rest(warden.path)

    assert run_cli.json("erase", "--id", "pii", "--reason", "GDPR art. 17") == {"erased": 1, "cleared": True}
    raw = backend.bytes_at_rest(warden.path)
    assert SECRET.encode() not in raw
    assert b"SECRETMARKER" not in raw and b"900101" not in raw
    assert warden.query(tenant="acme", text="SECRETMARKER", caller=OPERATOR) == []
    assert warden.search_ids("SECRETMARKER", caller=OPERATOR) == []

    view = warden.get("pii", caller=OPERATOR)
    assert not view.usable and view.reason == "erased" and view.content is None and view.summary is None
    assert run_cli.json("audit", "verify")["ok"] is True
    explained = run_cli.json("explain", "pii")
    assert [h["event"] for h in explained["history"]] == ["memory.saved", "memory.erased"]
    assert "SECRETMARKER" not in str(explained)
    # the memory lives on: saved again, it is a new version with a text of its
    # own, and the erased version's text is refused for good
    again = save_memory(warden, "pii", content="a new note", summary="새 메모")
    assert again.version == 2 and warden.get("pii", caller=OPERATOR).content == "a new note"
    with pytest.raises(TextErased):
        warden.texts.put("acme", "pii", 1, "개인 정보", SECRET)
    assert warden.get("keep", caller=OPERATOR).usable
    assert warden.check_projections(caller=OPERATOR).ok
    # a rebuild frees the old view's pages without zeroing them: they hold
    # nothing erased, so the text is still nowhere
    warden.rebuild(caller=OPERATOR)
    assert b"SECRETMARKER" not in backend.bytes_at_rest(warden.path)


def test_erase_by_user_leaves_the_same_words_kept_by_another_memory(warden: Warden, run_cli: Cli) -> None:
    save_memory(warden, "u1", content="kim's note", scope={"user": "kim"})
    save_memory(warden, "u2", content="kim's other note", scope={"user": "kim"})
    save_memory(warden, "copy", content="kim's note")  # the same text, kept by someone else
    save_memory(warden, "lee", content="lee's note", scope={"user": "lee"})
    assert run_cli.json("erase", "--user", "kim", "--reason", "account deleted") == {"erased": 2, "cleared": True}
    # erasure destroys exactly what it names: the other memory keeps its (identical) text
    assert {v.memory_id for v in warden.query(tenant="acme", caller=OPERATOR)} == {"lee", "copy"}
    assert warden.get("copy", caller=OPERATOR).content == "kim's note"
    assert run_cli.json("erase", "--user", "kim", "--reason", "again") == {"erased": 0, "cleared": True}
    typo = run_cli("erase", "--user", "kiim", "--reason", "account deleted", "--json")
    assert typo.exit_code == 1 and json.loads(typo.stdout)["field"] == "user", "a user with no memories is named"
    assert sum(w["erased"] for w in run_cli.json("stats")["weeks"]) == 2


def test_erase_needs_a_target_and_a_reason(run_cli: Cli) -> None:
    assert run_cli("erase", "--reason", "x").exit_code == 2
    assert run_cli("erase", "--id", "a", "--user", "b", "--reason", "x").exit_code == 2
    assert run_cli("erase", "--id", "nobody", "--reason", "x").exit_code == 1
    empty = run_cli("erase", "--id", "", "--reason", "x", "--json")
    assert empty.exit_code == 2 and json.loads(empty.stdout)["field"] == "memory_id", "no memory's id is empty"
