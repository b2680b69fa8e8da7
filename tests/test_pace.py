"""A large batch's preparation gives the interpreter away for as long as it
held it, where it shares the interpreter with requests (a server), and
runs unpaced alone in a process, where a pause would only cost it time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from memwarden.engine import OPERATOR, KeyStore, Warden, _batch, _pace
from memwarden.engine.faces.http import create_app
from memwarden.events import FrozenClock

SIZE = 150  # past the write turns' large (100)


class FakeTime:
    """perf_counter and sleep on one counter: a sleep advances it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def fake_time(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(_pace.time, "perf_counter", fake.perf_counter)
    monkeypatch.setattr(_pace.time, "sleep", fake.sleep)
    return fake


UNIT = 1 / 1024  # seconds of one unit of work: a power of two, so sums are exact


def work(fake: FakeTime, pace: Any, units: int, seconds: float = UNIT) -> None:
    for _ in range(units):
        fake.now += seconds
        pace()


def test_half_a_share_gives_away_as_long_as_it_held(fake_time: FakeTime) -> None:
    pace = _pace.Pace(share=0.5, step=4 * UNIT)
    work(fake_time, pace, 100)
    assert sum(fake_time.slept) == 100 * UNIT
    assert len(fake_time.slept) == 25  # once each step of work, not after every unit


def test_a_quarter_share_gives_away_three_times_what_it_held(fake_time: FakeTime) -> None:
    pace = _pace.Pace(share=0.25, step=4 * UNIT)
    work(fake_time, pace, 100)
    assert sum(fake_time.slept) == 300 * UNIT


def test_the_whole_share_never_pauses(fake_time: FakeTime) -> None:
    work(fake_time, _pace.Pace(share=1.0), 100)
    assert fake_time.slept == []


@pytest.mark.parametrize("share", [0, -0.5, 1.5])
def test_a_share_outside_zero_to_one_is_refused(share: float) -> None:
    with pytest.raises(ValueError, match="share"):
        _pace.Pace(share=share)


@pytest.fixture
def paces(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The share of each Pace a batch makes."""
    made: list[float] = []
    real = _batch.Pace

    def recording(*, share: float) -> _pace.Pace:
        made.append(share)
        return real(share=share)

    monkeypatch.setattr(_batch, "Pace", recording)
    return made


def memories(n: int, prefix: str = "m") -> list[dict[str, Any]]:
    return [
        {
            "memory_id": f"{prefix}{i}",
            "kind": "external_fact",
            "summary": f"서울 요약 {i}",
            "content": f"내용 {i}",
            "source_url": f"https://example.org/{i}",
            "scope": {"tenant": "acme", "project": "p1"},
            "ttl": "6h",
        }
        for i in range(n)
    ]


@pytest.fixture
def served(tmp_path: Path, clock: FrozenClock) -> Iterator[tuple[Warden, TestClient, str]]:
    w = Warden(tmp_path / "m.db", clock=clock)
    key = KeyStore(w).create("agent", tenants=["acme"], caller=OPERATOR)[0]
    with TestClient(create_app(w, scheduler=False, mcp=False)) as client:
        yield w, client, key
    w.close()


def test_a_batch_alone_in_a_process_is_not_paced(warden: Warden, paces: list[float]) -> None:
    assert len(warden.save_many(memories(SIZE), caller=OPERATOR)) == SIZE
    assert paces == []


def test_a_served_large_batch_is_paced_to_half(served: tuple[Warden, TestClient, str], paces: list[float]) -> None:
    _, client, key = served
    answer = client.post("/v1/memories/batch", json={"memories": memories(SIZE)}, headers={"x-api-key": key})
    assert answer.status_code == 201, answer.text
    assert paces == [0.5]


def test_a_served_small_batch_is_not_paced(served: tuple[Warden, TestClient, str], paces: list[float]) -> None:
    _, client, key = served
    answer = client.post("/v1/memories/batch", json={"memories": memories(10)}, headers={"x-api-key": key})
    assert answer.status_code == 201, answer.text
    assert paces == []
