"""The usable view: inline with every append, equal to a rebuild and to a
replay, at every point of the history."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from memwarden.engine import OPERATOR, Warden
from memwarden.events import FrozenClock, MemoryExpired

from .backends import Backend
from .conftest import Cli, save_memory


def live_rows(w: Warden) -> dict[str, list[tuple[Any, ...]]]:
    return w.store.view_rows()


def replay_rows(w: Warden, seq: int) -> dict[str, list[tuple[Any, ...]]]:
    return w.store.view_rows(seq)


def comparable(rows: dict[str, list[tuple[Any, ...]]]) -> dict[str, Any]:
    # the text index of a replay holds summaries only (it has no blobs)
    return {
        "memories": rows["memories"],
        "revocations": rows["revocations"],
        "policies": rows["policies"],
        "fts": [(r[0], r[1]) for r in rows["memories_fts"]],
    }


def history(w: Warden, clock: FrozenClock, after: Callable[[], None] = lambda: None) -> None:
    """A little of everything, each step its own commit; ``after`` runs after each."""
    steps: list[Callable[[], Any]] = [
        lambda: save_memory(w, "a", summary="서울 날씨 요약", tenant="acme", ttl="1h"),
        lambda: save_memory(w, "b", tenant="acme", project="p2", scope={"user": "kim"}),
        lambda: save_memory(w, "c", tenant="globex", ttl=None, kind="permission"),
        lambda: clock.advance("2h"),
        lambda: w.log.append(
            [MemoryExpired(tenant="acme", memory_id="a", version=1, expires_at="2026-01-05T10:00:00Z")]
        ),
        lambda: save_memory(w, "a", summary="서울 날씨 새 요약", tenant="acme", ttl="1h"),
        lambda: w.set_policy("default", 2, caller=OPERATOR),
        lambda: save_memory(w, "d", tenant="acme"),
        lambda: w.revoke({"tenant": "acme", "project": "p2"}, reason="leak", caller=OPERATOR),
        lambda: w.erase(memory_id="d", reason="asked", caller=OPERATOR),
        lambda: clock.advance("1h"),
        lambda: save_memory(w, "e", tenant="globex", scope={"user": "kim"}),
    ]
    for step in steps:
        step()
        after()


def test_inline_equals_rebuild_equals_replay(warden: Warden, clock: FrozenClock, run_cli: Cli) -> None:
    history(warden, clock)
    result = warden.check_projections(caller=OPERATOR)
    assert result.ok, result
    head = warden.log.head().seq
    assert comparable(replay_rows(warden, head)) == comparable(live_rows(warden))
    data = run_cli.json("projections", "check")
    assert data["ok"] is True
    rebuilt = run_cli.json("rebuild")
    assert rebuilt["ok"] and rebuilt["events"] == head
    assert warden.check_projections(caller=OPERATOR).ok


def test_replay_at_every_seq_equals_the_inline_view_then(warden: Warden, clock: FrozenClock) -> None:
    """The view after each commit equals a replay to that commit's last seq."""
    snapshots: dict[int, dict[str, Any]] = {}

    def snapshot() -> None:
        snapshots[warden.head_seq()] = comparable(live_rows(warden))

    history(warden, clock, after=snapshot)
    head = warden.log.head().seq
    assert sorted(snapshots)[-1] == head
    for seq in range(1, head + 1):
        expected = snapshots.get(seq)
        if expected is None:
            continue  # inside a multi-event batch: no inline state existed there
        assert comparable(replay_rows(warden, seq)) == expected, f"seq {seq}"


def test_replay_cli_as_of_and_seq(warden: Warden, clock: FrozenClock, run_cli: Cli) -> None:
    save_memory(warden, "old", ttl="1h")
    clock.advance("30m")
    mid = warden.now()
    clock.advance("1h")
    save_memory(warden, "new", ttl="1h")
    # at `mid`, "old" was still fresh and "new" did not exist
    at_mid = run_cli.json("replay", "--as-of", mid)
    assert [m["memory_id"] for m in at_mid["memories"]] == ["old"]
    assert at_mid["seq"] == 1
    now = run_cli.json("replay", "--seq", "2", "--tenant", "acme")
    assert [m["memory_id"] for m in now["memories"]] == ["new"]  # old had expired by then
    assert run_cli("replay").exit_code == 2
    assert run_cli("replay", "--as-of", "2026-01-05T10:00:00").exit_code == 2  # naive time
    # replay never touches the live view
    assert warden.check_projections(caller=OPERATOR).ok


def test_projections_check_names_the_first_differing_memory(
    warden: Warden, clock: FrozenClock, run_cli: Cli, backend: Backend
) -> None:
    history(warden, clock)
    backend.set_view(warden.path, "b", status="usable", reason=None)
    result = run_cli("projections", "check", "--json")
    assert result.exit_code == 1
    import json

    data = json.loads(result.stdout)
    assert data["ok"] is False and data["first_difference"] == "memories" and data["memory_id"] == "b"
    assert "memory b" in run_cli("projections", "check").stdout
    # a rebuild repairs the view from the log
    run_cli.json("rebuild")
    assert run_cli.json("projections", "check")["ok"] is True


def test_explain_saved_expired_reverified_revoked(
    warden: Warden, clock: FrozenClock, tmp_path: Path, run_cli: Cli
) -> None:
    source = tmp_path / "fact.txt"
    source.write_text("회의는 목요일 오후 3시", encoding="utf-8")
    warden.save(
        memory_id="meeting",
        kind="external_fact",
        summary="회의 시간",
        content=source.read_text("utf-8"),
        source_url=source.as_uri(),
        scope={"tenant": "acme"},
        ttl="1h",
        caller=OPERATOR,
    )
    clock.advance("2h")
    warden.log.append([MemoryExpired(tenant="acme", memory_id="meeting", version=1, expires_at="2026-01-05T10:00:00Z")])
    expired_at = warden.now()
    clock.advance("5m")
    assert warden.verify("meeting", caller=OPERATOR).outcome == "verified"
    verified_at = warden.now()
    clock.advance("5m")
    warden.revoke({"tenant": "acme"}, reason="contract ended", caller=OPERATOR)

    data = run_cli.json("explain", "meeting")
    assert [(h["event"], h["status_after"]) for h in data["history"]] == [
        ("memory.saved", "usable"),
        ("memory.expired", "expired"),
        ("memory.verified", "usable"),
        ("revocation.issued", "revoked"),
    ]
    assert data["usable"] is False and data["reason"] == "revoked"
    assert all(h["actor"] and h["recorded_at"] for h in data["history"])
    then = run_cli.json("explain", "meeting", "--as-of", expired_at)
    assert then["usable"] is False and then["reason"] == "expired" and len(then["history"]) == 2
    later = run_cli.json("explain", "meeting", "--as-of", verified_at)
    assert later["usable"] is True and later["history"][-1]["event"] == "memory.verified"
    text = run_cli("explain", "meeting")
    assert text.exit_code == 0 and "revocation.issued" in text.stdout and "NOT usable: revoked" in text.stdout
    assert run_cli("explain", "nobody").exit_code == 1


KILLED_WRITER = textwrap.dedent(
    """
    import sys
    from memwarden.engine import OPERATOR, Warden
    w = Warden(sys.argv[1])
    i = 0
    while True:
        w.save(memory_id=f"k{i % 50}", kind="external_fact", summary=f"요약 {i}", content=f"내용 {i}",
               source_url="https://example.org", scope={"tenant": f"t{i % 3}"}, ttl="1h", caller=OPERATOR)
        if i % 7 == 0:
            w.revoke({"tenant": f"t{i % 3}", "ids": [f"k{(i + 1) % 50}"]}, reason="r", caller=OPERATOR)
        print(i, flush=True)
        i += 1
    """
)


def test_sigkill_between_appends_leaves_view_and_log_consistent(db_path: Path, tmp_path: Path) -> None:
    Warden(db_path).close()
    script = tmp_path / "writer.py"
    script.write_text(KILLED_WRITER)
    for round_ in range(5):
        proc = subprocess.Popen([sys.executable, str(script), str(db_path)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        proc.stdout.readline()
        time.sleep(0.1 + 0.07 * round_)  # paces where the kill lands: any moment is one the test must survive
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
        w = Warden(db_path)
        assert w.log.verify_chain().ok
        with w.reading() as view:
            assert view.position() == w.log.head().seq
        assert w.check_projections(caller=OPERATOR).ok
        w.close()


@pytest.mark.parametrize("n", [0, 1])
def test_an_empty_log_has_an_empty_view(tmp_path: Path, n: int, backend: Backend) -> None:
    w = Warden(backend.db(tmp_path, f"e{n}.db"))
    assert w.check_projections(caller=OPERATOR).ok
    assert w.replay(seq=0, caller=OPERATOR)["memories"] == []
    w.close()
