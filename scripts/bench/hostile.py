"""A soak under attack (issue #38): normal agents beside every attack at once.

    .venv/bin/python scripts/bench/hostile.py [--quick] [--json PATH] [--backend sqlite|postgres]

One server (two nodes on one database with --backend postgres), its
scheduler embedded (a run a second), over 2,000 seeded memories. Normal
agents (8 loops) save and query; a security loop revokes a scope every
second and the scheduler must read each revocation back. First a quiet run
(normal work alone), then the same normal work beside the attacks of the
issue, all at once:

- 200 connections dripping request header lines, never finishing a head;
- 300 open long-polls on /v1/events;
- batches of 1,000 items (the most a batch holds, MAX_BATCH) repeating one id;
- 6 loops at once sending batches of 1,000 distinct items (about 0.6 MB each);
- text searches of one word repeated 499 times;
- explain of the top of a 21-layer diamond derivation DAG;
- summaries holding ESC and words of 2,000 characters, then revoked, so
  the read-back samples them.

Baseline: the quiet run's p99, in the same process. Targets: query and
save p99 under attack within 3x the quiet run's; no answer is a 5xx (an
attack's included); every revocation issued is read back (confirmed) by
the end; the server's peak memory (VmHWM) stays under the README's bound
(1 GiB). 10 s a phase with --quick, 60 s otherwise; --smoke: 0.5 s a phase,
a tenth of the seeds, connections and batch sizes, long-polls of 1 s.
MEMWARDEN_HOSTILE_ONLY=long_poll,batches (names of the attacks: drip,
long_poll, batches, big_batches, searches, explains, poison) runs only those, to see
what each one costs.
"""

from __future__ import annotations

import sys
from pathlib import Path

# scripts/bench/http.py would shadow the standard library's http package:
# look in this folder last, not first
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE] + [_HERE]

import asyncio
import itertools
import json
import os
import socket
import subprocess
import time
from collections import Counter
from typing import Any

import httpx
from _common import Metric, arguments, fresh_store, percentile, report, sized
from memwarden.engine import MAX_BATCH

NORMAL_LOOPS = 8
DRIPS = 200
LONG_POLLS = 300
PEAK_BOUND_MB = 1024
ATTACKER = "MEMWARDEN_HOSTILE_ATTACKER"  # set: this process is the attackers, given urls, keys and seconds


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def memory(memory_id: str, *, tenant: str = "acme", summary: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "memory_id": memory_id,
        "kind": "external_fact",
        "summary": summary or f"서울 요약 {memory_id} summary",
        "content": f"내용 {memory_id} content",
        "source_url": f"https://src.example/{memory_id}",
        "scope": {"tenant": tenant, "project": "p1"},
        "ttl": "1h",
        **extra,
    }


def seed(db: str, seeds: int) -> dict[str, str]:
    # imported here: the attackers' process (this file again) needs httpx only, not the engine
    from memwarden.engine import OPERATOR, KeyStore, Warden

    w = Warden(db)
    store = KeyStore(w)
    keys = {
        "agent": store.create("agent", tenants=["acme"], caller=OPERATOR)[0],
        "attacker": store.create("agent", tenants=["hostile"], caller=OPERATOR)[0],
        "security": store.create("security", caller=OPERATOR)[0],
        "auditor": store.create("auditor", caller=OPERATOR)[0],
    }
    for start in range(0, seeds, MAX_BATCH):
        w.save_many([memory(f"seed{i}") for i in range(start, min(start + MAX_BATCH, seeds))], caller=OPERATOR)
    # a diamond DAG: each layer's two memories drawn from both of the layer before
    w.save_many([memory(f"d0-{s}", tenant="hostile") for s in "ab"], caller=OPERATOR)
    for layer in range(1, 21):
        parents = [{"memory_id": f"d{layer - 1}-{s}"} for s in "ab"]
        w.save_many([memory(f"d{layer}-{s}", tenant="hostile", derived_from=parents) for s in "ab"], caller=OPERATOR)
    w.close()
    return keys


class Run:
    """Latencies and answers of one phase."""

    def __init__(self) -> None:
        self.latency: dict[str, list[float]] = {"query": [], "save": []}
        self.statuses: Counter[int] = Counter()
        self.revocations: list[str] = []
        self.attacks: Counter[str] = Counter()

    def answered(self, response: httpx.Response) -> None:
        self.statuses[response.status_code] += 1


async def normal(urls: list[str], keys: dict[str, str], seconds: float, run: Run) -> None:
    deadline = time.monotonic() + seconds
    counter = itertools.count()

    async def loop(client: httpx.AsyncClient, n: int) -> None:
        # a query and a save at least, however short the phase (--smoke) or slow the start
        while time.monotonic() < deadline or not (run.latency["query"] and run.latency["save"]):
            i = next(counter)
            started = time.perf_counter()
            if i % 2:
                response = await client.get("/v1/memories", params={"tenant": "acme", "limit": 20})
                kind = "query"
            else:
                response = await client.post("/v1/memories", json=memory(f"n{n}-{i % 50}", ttl="2s"))
                kind = "save"
            run.latency[kind].append(time.perf_counter() - started)
            run.answered(response)

    async def security(client: httpx.AsyncClient) -> None:
        while time.monotonic() < deadline:
            response = await client.post(
                "/v1/revocations", json={"selector": {"tenant": "hostile", "project": "p1"}, "reason": "soak"}
            )
            run.answered(response)
            if response.status_code < 300:
                run.revocations.append(response.json()["revocation_id"])
            await asyncio.sleep(1.0)

    clients = [httpx.AsyncClient(base_url=u, timeout=60, headers={"x-api-key": keys["agent"]}) for u in urls]
    staff = httpx.AsyncClient(base_url=urls[0], timeout=60, headers={"x-api-key": keys["security"]})
    try:
        await asyncio.gather(*(loop(clients[n % len(clients)], n) for n in range(NORMAL_LOOPS)), security(staff))
    finally:
        for c in (*clients, staff):
            await c.aclose()


async def attacks(urls: list[str], keys: dict[str, str], seconds: float, run: Run, smoke: bool) -> None:
    deadline = time.monotonic() + seconds
    # --smoke: every attack once or so, not its weight (a tenth of it; long-polls that end with the phase)
    tenth = 10 if smoke else 1
    drips, long_polls, same_size, big_size = DRIPS // tenth, LONG_POLLS // tenth, MAX_BATCH // tenth, MAX_BATCH // tenth
    poll_wait = 1 if smoke else 30
    host, port = urls[0].removeprefix("http://").split(":")

    async def drip() -> None:
        while time.monotonic() < deadline:
            try:
                reader, writer = await asyncio.open_connection(host, int(port))
                writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                while time.monotonic() < deadline and not reader.at_eof():
                    writer.write(b"X-Drip: 1\r\n")
                    await writer.drain()
                    await asyncio.sleep(0.5)
                writer.close()
                run.attacks["drips cut off"] += 1
            except OSError:
                run.attacks["drips cut off"] += 1
                await asyncio.sleep(0.5)

    limits = httpx.Limits(max_connections=LONG_POLLS + 20, max_keepalive_connections=LONG_POLLS + 20)
    auditor = httpx.AsyncClient(base_url=urls[-1], timeout=90, limits=limits, headers={"x-api-key": keys["auditor"]})
    attacker = httpx.AsyncClient(base_url=urls[-1], timeout=90, headers={"x-api-key": keys["attacker"]})

    async def long_poll() -> None:
        head = (await auditor.get("/v1/audit/head")).json()["seq"]
        while time.monotonic() < deadline:  # as a downstream cache follows the feed
            response = await auditor.get("/v1/events", params={"after": head, "wait": poll_wait})
            run.answered(response)
            head = response.json().get("head", head) if response.status_code == 200 else head
            run.attacks["long-polls answered"] += 1

    async def batches() -> None:
        while time.monotonic() < deadline:
            items = [memory("same", tenant="hostile") for _ in range(same_size)]
            run.answered(await attacker.post("/v1/memories/batch", json={"memories": items}))
            run.attacks["same-id batches"] += 1

    big = itertools.count()

    async def big_batches() -> None:
        # the most distinct items a batch holds, from 6 loops at once
        while time.monotonic() < deadline:
            start = next(big) * big_size
            items = [memory(f"big{start + i}", tenant="hostile", content="b" * 300) for i in range(big_size)]
            run.answered(await attacker.post("/v1/memories/batch", json={"memories": items}))
            run.attacks["largest batches"] += 1

    async def searches() -> None:
        while time.monotonic() < deadline:
            response = await attacker.get("/v1/memories", params={"tenant": "hostile", "text": " ".join(["x"] * 499)})
            run.answered(response)
            run.attacks["repeated-word searches"] += 1

    async def explains() -> None:
        while time.monotonic() < deadline:
            response = await auditor.get("/v1/memories/d20-a/explain", params={"tenant": "hostile"})
            run.answered(response)
            run.attacks["deep explains"] += 1

    async def poison() -> None:
        n = itertools.count()
        while time.monotonic() < deadline:
            for summary in ("\u001bfoo rest of it", "w" * 2000 + " tail"):
                run.answered(
                    await attacker.post("/v1/memories", json=memory(f"p{next(n)}", tenant="hostile", summary=summary))
                )
            run.attacks["poisoned summaries"] += 2
            await asyncio.sleep(0.2)

    async def persistent(attack: Any) -> None:
        """An attacker that meets a closed connection comes back."""
        while time.monotonic() < deadline:
            try:
                await attack()
            except httpx.HTTPError as exc:
                run.attacks[f"attack connection errors ({type(exc).__name__})"] += 1
                await asyncio.sleep(0.1)

    every = "drip,long_poll,batches,big_batches,searches,explains,poison"
    only = set(os.environ.get("MEMWARDEN_HOSTILE_ONLY", every).split(","))
    try:
        await asyncio.gather(
            *(drip() for _ in range(drips if "drip" in only else 0)),
            *(persistent(long_poll) for _ in range(long_polls if "long_poll" in only else 0)),
            *(persistent(a) for a in (batches, searches, explains, poison) if a.__name__ in only),
            *(persistent(big_batches) for _ in range(6 if "big_batches" in only else 0)),
        )
    finally:
        await auditor.aclose()
        await attacker.aclose()


async def phase(
    urls: list[str], keys: dict[str, str], seconds: float, hostile: bool, smoke: bool
) -> tuple[Run, dict[str, Any]]:
    """Normal work in this process; the attacks, if any, in another (so that
    the attackers' own client work does not slow the normal agents' loop)."""
    run = Run()
    attackers = None
    if hostile:
        spec = json.dumps({"urls": urls, "keys": keys, "seconds": seconds, "smoke": smoke})
        attackers = subprocess.Popen(
            [sys.executable, __file__], env={**os.environ, ATTACKER: spec}, stdout=subprocess.PIPE, text=True
        )
    await normal(urls, keys, seconds, run)
    sent: dict[str, Any] = {}
    if attackers is not None:
        out, _ = attackers.communicate(timeout=seconds + 120)
        sent = json.loads(out.strip().splitlines()[-1])
    return run, sent


def attacker_main(spec: dict[str, Any]) -> None:
    run = Run()
    asyncio.run(attacks(spec["urls"], spec["keys"], spec["seconds"], run, spec["smoke"]))
    print(json.dumps({"attacks": dict(run.attacks), "statuses": {str(k): v for k, v in run.statuses.items()}}))


def confirmed(url: str, key: str, revocations: list[str], within: float) -> int:
    """How many of ``revocations`` the scheduler has read back, waiting up to ``within`` s."""
    deadline = time.monotonic() + within
    with httpx.Client(base_url=url, timeout=30, headers={"x-api-key": key}) as c:
        while True:
            states = [c.get(f"/v1/revocations/{r}").json().get("readback_status") for r in revocations]
            done = states.count("confirmed")
            if done == len(revocations) or time.monotonic() > deadline:
                return done
            time.sleep(0.5)


def peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    seconds = sized(args, full=60.0, quick=10.0, smoke=0.5)
    db = fresh_store(args, "hostile")
    keys = seed(db, sized(args, full=2000, quick=2000, smoke=200))
    nodes = 2 if args.backend == "postgres" else 1
    ports = [free_port() for _ in range(nodes)]
    exe = str(Path(sys.executable).with_name("memwarden"))
    procs = [
        subprocess.Popen(
            [exe, "--db", db, "serve", "--port", str(p), "--scheduler-interval", "1", "--head-timeout", "5"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for p in ports
    ]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    try:
        for url in urls:
            wait_up(url)
        quiet, _ = asyncio.run(phase(urls, keys, seconds, hostile=False, smoke=args.smoke))
        loud, sent = asyncio.run(phase(urls, keys, seconds, hostile=True, smoke=args.smoke))
        for status, n in sent["statuses"].items():
            loud.statuses[int(status)] += n
        issued = quiet.revocations + loud.revocations
        read_back = confirmed(urls[0], keys["security"], issued, within=30)
        peak = max(peak_mb(p.pid) for p in procs)
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)
    fives = sum(n for status, n in loud.statuses.items() if status >= 500) + sum(
        n for status, n in quiet.statuses.items() if status >= 500
    )
    metrics = []
    for kind in ("query", "save"):
        q, h = percentile(quiet.latency[kind], 0.99) * 1000, percentile(loud.latency[kind], 0.99) * 1000
        metrics.append(Metric(f"normal {kind} p99 under attack vs quiet", h, "ms", q, h / q, "<= 3x", h / q <= 3))
    metrics += [
        Metric("answers that were a 5xx (both phases)", fives, "answers", None, None, "0", fives == 0),
        Metric(
            "revocations read back by the scheduler",
            read_back,
            "of " + str(len(issued)),
            len(issued),
            read_back / max(1, len(issued)),
            "all",
            read_back == len(issued),
        ),
        Metric(
            "server peak memory (VmHWM)",
            peak,
            "MB",
            PEAK_BOUND_MB,
            peak / PEAK_BOUND_MB,
            f"< {PEAK_BOUND_MB} MB",
            peak < PEAK_BOUND_MB,
        ),
    ]
    print("attacks sent:", sent["attacks"], "answers under attack:", dict(loud.statuses))
    report(
        f"normal agents beside every attack ({args.backend}, {nodes} node(s), {seconds:.0f} s a phase)",
        metrics,
        args.json_path,
    )


if __name__ == "__main__":
    if ATTACKER in os.environ:
        attacker_main(json.loads(os.environ[ATTACKER]))
    else:
        main()
