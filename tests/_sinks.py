"""The sinks' test harness: a real Redis (127.0.0.1:6379, or
``MEMWARDEN_TEST_REDIS``) under a prefix of each test's own, webhook receivers on
loopback (``sink_receiver``), a Warden with both sinks, and the helpers that save,
revoke and wait for the sinks' read-back."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from memwarden.engine import (
    OPERATOR,
    AddressPolicy,
    Fetchers,
    SinkWorker,
    Warden,
    sinks_from_table,
)

from .sink_receiver import Receiver, new_secret

REDIS = os.environ.get("MEMWARDEN_TEST_REDIS", "redis://127.0.0.1:6379/9")
LOOPBACK = Fetchers(addresses=AddressPolicy.of(["127.0.0.1/32"]))


@pytest.fixture(scope="session")
def redis_server() -> Any:
    """The Redis the tests use; skipped with the reason where none answers,
    except under ``CI=true``, where it must."""
    try:
        import redis
    except ImportError:
        missing = "redis-py is not installed (pip install 'memwarden[redis]')"
    else:
        client = redis.Redis.from_url(REDIS, socket_connect_timeout=2)
        try:
            client.ping()
            return client
        except (redis.RedisError, OSError) as exc:
            missing = f"no Redis at {REDIS}: {exc}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true needs Redis: {missing}")
    pytest.skip(missing)


@pytest.fixture
def prefix(redis_server: Any) -> Iterator[str]:
    """A key prefix of this test's own, its keys deleted afterwards."""
    chosen = f"mwtest:{secrets.token_hex(4)}:"
    yield chosen
    keys = list(redis_server.scan_iter(match=chosen + "*", count=1000))
    if keys:
        redis_server.delete(*keys)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    secret = new_secret()
    env = f"MW_TEST_SINK_SECRET_{secrets.token_hex(4)}"
    os.environ[env] = secret
    rcv = Receiver(secret)
    rcv.env = env  # type: ignore[attr-defined]
    yield rcv
    rcv.stop()
    del os.environ[env]


def sink_table(prefix: str, rcv: Receiver, **webhook: Any) -> dict[str, Any]:
    return {
        "cache": {"kind": "redis", "url": REDIS, "prefix": prefix, "retry_base": 0.05},
        "index": {
            "kind": "webhook",
            "url": rcv.url,
            "probe_url": rcv.probe_url,
            "secret_env": rcv.env,  # type: ignore[attr-defined]
            "retry_base": 0.05,
            "retry_ceiling": 0.2,
            "timeout": 5,
            **webhook,
        },
    }


def open_warden(db: Any, table: dict[str, Any], fetchers: Fetchers = LOOPBACK) -> Warden:
    return Warden(db, sinks=sinks_from_table(table), fetchers=fetchers)


@pytest.fixture
def sinked(db_path: Path, prefix: str, receiver: Receiver) -> Iterator[Warden]:
    w = open_warden(db_path, sink_table(prefix, receiver))
    yield w
    w.close()


def notice_of(w: Warden, seq: int) -> str:
    """The id of the notice announcing the event at ``seq``: from that
    event's chain hash, never its seq (a restored backup hands seqs out again)."""
    (event,) = w.log.read(after_seq=seq - 1, until_seq=seq)
    return f"ntc_{event.hash[:40]}"


def save_n(w: Warden, n: int, tenant: str = "acme", start: int = 0) -> list[str]:
    ids = [f"m{i:05d}" for i in range(start, start + n)]
    w.save_many(
        [
            dict(
                memory_id=m,
                kind="external_fact",
                summary=f"about {m}",
                content=f"text of {m}",
                source_url=f"https://example.org/{m}",
                scope={"tenant": tenant, "project": "p1"},
            )
            for m in ids
        ],
        caller=OPERATOR,
    )
    return ids


def until_settled(w: Warden, revocation_id: str, seconds: float = 20.0) -> dict[str, dict[str, Any]]:
    """Run the sinks' jobs until every sink's read-back is confirmed (or time is up)."""
    worker = SinkWorker(w)
    deadline = time.monotonic() + seconds
    try:
        while True:
            for spec in w.sinks:
                try:
                    worker.run_sink(spec)
                except Exception:
                    pass
            states = {r["sink"]: r for r in w.sink_readbacks(revocation_id, caller=OPERATOR)}
            if all(r["status"] == "confirmed" for r in states.values()) or time.monotonic() > deadline:
                return states
            time.sleep(0.05)
    finally:
        worker.close()


def policy_file(tmp_path: Path, prefix: str, rcv: Receiver) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(
        f"""[fetch]
allow = ["127.0.0.1/32"]

[sinks.cache]
kind = "redis"
url = "{REDIS}"
prefix = "{prefix}"

[sinks.index]
kind = "webhook"
url = "{rcv.url}"
probe_url = "{rcv.probe_url}"
secret_env = "{rcv.env}"  # type: ignore[attr-defined]
""".replace("  # type: ignore[attr-defined]", ""),
        encoding="utf-8",
    )
    return path


def save_args(memory_id: str) -> list[str]:
    return [
        "--id",
        memory_id,
        "--kind",
        "external_fact",
        "--summary",
        "s",
        "--content",
        "c",
        "--source-url",
        "https://example.org/a",
        "--tenant",
        "acme",
    ]
