"""HTTP throughput on loopback: memwarden's save and query against a bare
FastAPI endpoint returning a constant, served the same way, in the same run.

    .venv/bin/python scripts/bench/http.py [--quick] [--json PATH] [--backend postgres]

16 concurrent clients (asyncio + httpx, one process) for a fixed time per
endpoint (8 s; --quick 2 s; --smoke 0.2 s over 100 memories, not 2,000);
requests/s and p99 latency, median of several runs.
Target: query >= 50% of the bare endpoint's rate. Beside it, the query
load spread over two `memwarden serve` processes on the same store (the
clients and both servers share this machine's cores).
"""

from __future__ import annotations

import sys
from pathlib import Path

# this file, named http.py, would shadow the standard library's http
# package: look in this folder last, not first
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE] + [_HERE]

import asyncio
import itertools
import socket
import statistics
import subprocess
import textwrap
import time

import httpx
from _common import Metric, arguments, fresh_store, repeats, report, scratch_dir, sized
from memwarden.engine import OPERATOR, KeyStore, Warden

CLIENTS = 16
BARE = textwrap.dedent(
    """
    from fastapi import FastAPI
    app = FastAPI()

    @app.get("/constant")
    def constant() -> dict:
        return {"memories": []}
    """
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


async def load(urls: str | list[str], seconds: float, make_request: object) -> tuple[float, float]:
    """(requests/s, p99 ms) for CLIENTS concurrent loops, spread evenly over
    ``urls`` (several server processes on one store)."""
    urls = [urls] if isinstance(urls, str) else urls
    latencies: list[float] = []
    counter = itertools.count()
    deadline = time.monotonic() + seconds

    async def worker(client: httpx.AsyncClient) -> None:
        while True:  # one request at least, however short the phase (--smoke) or slow the start
            started = time.perf_counter()
            response = await make_request(client, next(counter))  # type: ignore[operator]
            latencies.append(time.perf_counter() - started)
            assert response.status_code < 300, response.text
            if time.monotonic() >= deadline:
                return

    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    clients = [httpx.AsyncClient(base_url=url, limits=limits, timeout=30) for url in urls]
    try:
        started = time.monotonic()
        await asyncio.gather(*(worker(clients[k % len(clients)]) for k in range(CLIENTS)))
        elapsed = time.monotonic() - started
    finally:
        for client in clients:
            await client.aclose()
    latencies.sort()
    return len(latencies) / elapsed, latencies[int(0.99 * (len(latencies) - 1))] * 1000


def main() -> None:
    args = arguments(__doc__ or "")
    seconds = sized(args, full=8.0, quick=2.0, smoke=0.2)
    runs = repeats(args, 3)
    tmp = scratch_dir("memwarden-http-")
    db = fresh_store(args, "http")
    w = Warden(db)
    key, _ = KeyStore(w).create("agent", tenants=["acme"], caller=OPERATOR)
    for i in range(sized(args, full=2000, quick=2000, smoke=100)):
        w.save(
            memory_id=f"seed{i}",
            kind="external_fact",
            summary=f"요약 {i}",
            content=f"내용 {i}",
            source_url="https://e",
            scope={"tenant": "acme", "project": f"p{i % 20}"},
            caller=OPERATOR,
        )
    w.close()
    (tmp / "bare.py").write_text(BARE)
    ours_port, second_port, bare_port = free_port(), free_port(), free_port()
    procs = [
        *(
            subprocess.Popen(
                [
                    str(Path(sys.executable).with_name("memwarden")),
                    "--db",
                    str(db),
                    "serve",
                    "--port",
                    str(port),
                    "--no-scheduler",
                ],
                stderr=subprocess.DEVNULL,
            )
            for port in (ours_port, second_port)
        ),
        subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "bare:app", "--port", str(bare_port), "--log-level", "warning"],
            cwd=tmp,
            stderr=subprocess.DEVNULL,
        ),
    ]
    try:
        ours, bare = f"http://127.0.0.1:{ours_port}", f"http://127.0.0.1:{bare_port}"
        second = f"http://127.0.0.1:{second_port}"
        wait_up(f"{ours}/healthz")
        wait_up(f"{second}/healthz")
        wait_up(f"{bare}/constant")
        headers = {"x-api-key": key}

        def query(client: httpx.AsyncClient, i: int):  # type: ignore[no-untyped-def]
            return client.get(
                "/v1/memories", params={"tenant": "acme", "project": f"p{i % 20}", "limit": 20}, headers=headers
            )

        def save(client: httpx.AsyncClient, i: int):  # type: ignore[no-untyped-def]
            return client.post(
                "/v1/memories",
                headers=headers,
                json={
                    "memory_id": f"bench-{time.time_ns()}-{i}",
                    "kind": "external_fact",
                    "summary": "요약",
                    "content": f"내용 {i}",
                    "source_url": "https://e",
                    "scope": {"tenant": "acme"},
                },
            )

        def constant(client: httpx.AsyncClient, i: int):  # type: ignore[no-untyped-def]
            return client.get("/constant")

        results: dict[str, list[tuple[float, float]]] = {"bare": [], "query": [], "query2": [], "save": []}
        for _ in range(runs):
            results["bare"].append(asyncio.run(load(bare, seconds, constant)))
            results["query"].append(asyncio.run(load(ours, seconds, query)))
            results["query2"].append(asyncio.run(load([ours, second], seconds, query)))
            results["save"].append(asyncio.run(load(ours, seconds, save)))
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)

    def med(name: str, k: int) -> float:
        return statistics.median(r[k] for r in results[name])

    bare_rate = med("bare", 0)
    metrics = [
        Metric("bare FastAPI endpoint", bare_rate, "req/s", None, None, "(baseline)", True),
        Metric(
            "query (tenant+project, limit 20)",
            med("query", 0),
            "req/s",
            bare_rate,
            med("query", 0) / bare_rate,
            ">= 0.5 of bare",
            med("query", 0) / bare_rate >= 0.5,
        ),
        Metric("query p99", med("query", 1), "ms", med("bare", 1), med("query", 1) / med("bare", 1), "(info)", True),
        Metric(
            "query, two server processes on one store",
            med("query2", 0),
            "req/s",
            med("query", 0),
            med("query2", 0) / med("query", 0),
            "(info: vs one process)",
            True,
        ),
        Metric(
            "save (durable: synchronous=FULL, or PostgreSQL's commit)",
            med("save", 0),
            "req/s",
            bare_rate,
            med("save", 0) / bare_rate,
            "(info)",
            True,
        ),
        Metric("save p99", med("save", 1), "ms", med("bare", 1), med("save", 1) / med("bare", 1), "(info)", True),
    ]
    title = f"memwarden HTTP benchmark ({args.backend}, {CLIENTS} concurrent clients on loopback)"
    report(title, metrics, args.json_path)


if __name__ == "__main__":
    main()
