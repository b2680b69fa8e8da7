"""What consistency tokens cost an agent key's answers: a query of 100
memories answered with their positions hidden (``Positions.memory``) against
the same query answered as it is, and a save answered with a token against
one answered with its seq, in the same process on the same store; beside
them, the time to issue and to read one token (AES-256-GCM-SIV).

    .venv/bin/python scripts/bench/tokens.py [--quick] [--json PATH] [--backend postgres]

Targets: each ratio >= 0.95 (a token costs the agent's answer at most 5%).
"""

from __future__ import annotations

import sys
from pathlib import Path

# http.py in this folder would shadow the standard library's http package: look here last
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE] + [_HERE]

import statistics
import time

from _common import Metric, arguments, fresh_store, median_of, report, sized
from memwarden.engine import OPERATOR, KeyStore, Warden


def main() -> None:
    args = arguments(__doc__ or "")
    rounds = sized(args, full=1000, quick=200, smoke=10)
    runs = args.repeat or sized(args, full=8, quick=4, smoke=1)
    w = Warden(fresh_store(args, "tokens"))
    agent = KeyStore(w).create("agent", tenants=["acme"], caller=OPERATOR)[1]
    positions = w.positions(agent)
    w.save_many(
        [
            {
                "memory_id": f"seed{i}",
                "kind": "external_fact",
                "summary": f"요약 {i}",
                "content": f"내용 {i}",
                "source_url": "https://e.example/s",
                "scope": {"tenant": "acme", "project": "p"},
            }
            for i in range(500)
        ],
        caller=OPERATOR,
    )
    positions.shown(1)  # the secret made before any clock runs

    def query(hidden: bool) -> float:
        started = time.perf_counter()
        for _ in range(rounds):
            page = w.query(tenant="acme", project="p", limit=100, caller=agent)
            # as the HTTP face answers it
            answer = [positions.memory(v.as_dict()) if hidden else v.as_dict() for v in page]
        assert len(answer) == 100
        return (time.perf_counter() - started) / rounds

    saves = iter(range(10**9))

    def save(token: bool) -> float:
        n = max(rounds // 10, 20)
        started = time.perf_counter()
        for _ in range(n):
            i = next(saves)
            result = w.save(
                memory_id=f"s{i}",
                kind="external_fact",
                summary="요약",
                content=f"내용 {i}",
                source_url="https://e.example/s",
                scope={"tenant": "acme"},
                caller=agent,
            )
            (positions.saved(result) if token else result).as_dict()
        return (time.perf_counter() - started) / n

    def alternate(fn: object) -> tuple[float, float]:
        """(as it is, with tokens): interleaved runs, each first in turn, so drift in
        the machine (and a store growing with the saves) hits both alike."""
        took: dict[bool, list[float]] = {False: [], True: []}
        for run in range(runs):
            for hidden in (False, True) if run % 2 == 0 else (True, False):
                took[hidden].append(fn(hidden))  # type: ignore[operator]
        return statistics.median(took[False]), statistics.median(took[True])

    query_plain, query_hidden = alternate(query)
    save_plain, save_token = alternate(save)
    tokens = w.tokens
    issue = median_of(runs, lambda: _per(rounds * 10, lambda: tokens.issue(123456)))
    one = tokens.issue(123456)
    read = median_of(runs, lambda: _per(rounds * 10, lambda: tokens.position(one, "min_seq")))
    w.close()
    metrics = [
        Metric(
            "query of 100 to an agent key, positions hidden",
            1 / query_hidden,
            "queries/s",
            1 / query_plain,
            query_plain / query_hidden,
            ">= 0.95 of as is",
            query_plain / query_hidden >= 0.95,
        ),
        Metric(
            "save answered with a token",
            1 / save_token,
            "saves/s",
            1 / save_plain,
            save_plain / save_token,
            ">= 0.95 of with its seq",
            save_plain / save_token >= 0.95,
        ),
        Metric("issue one token", issue * 1e6, "us", None, None, "(info)", True),
        Metric("read one token", read * 1e6, "us", None, None, "(info)", True),
    ]
    report(f"consistency tokens ({args.backend})", metrics, args.json_path)


def _per(n: int, fn: object) -> float:
    started = time.perf_counter()
    for _ in range(n):
        fn()  # type: ignore[operator]
    return (time.perf_counter() - started) / n


if __name__ == "__main__":
    main()
