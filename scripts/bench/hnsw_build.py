"""The HNSW graph's build and recall alone, on ``recall.py``'s corpora (issues 40, 62).

    .venv/bin/python scripts/bench/hnsw_build.py [N [M:EA[,M:EA...] [EF[,EF...]]]] [--corpus clustered|hash]
        [--quick] [--smoke] [--json PATH]

Builds a usearch graph (f16, cosine) of N vectors of the clustered corpus
(``_clustered``, shaped like a sentence model's; or the hash embedder's
with --corpus hash) (100,000; --quick 10,000; --smoke 1,000) for each connectivity M and
``expansion_add`` EA (default 16:128, usearch's), on every core, and asks
it recall.py's 200 queries (--smoke: 20) at each search breadth EF
(default 64): the build's rate and CPU time, recall@10 against exact
numpy, the search p50/p99. The vectors are kept in /tmp between runs
(not with --smoke). Target: recall@10 >= 0.95, as recall.py's.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import time
from pathlib import Path

# scripts/bench/http.py would shadow the standard library's http package: this folder last
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE] + [_HERE]

import numpy as np
import recall as bench
from _clustered import Clustered
from _common import Metric, arguments, percentile, report, sized
from memwarden.engine import HashEmbedder
from usearch.index import Index


def cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("n", type=int, nargs="?", default=None, help="vectors in the graph")
    parser.add_argument("configs", nargs="?", default="16:128", help="M:EA[,M:EA...]")
    parser.add_argument("breadths", nargs="?", default="64", help="EF[,EF...]")
    parser.add_argument("--corpus", choices=("clustered", "hash"), default="clustered")


def hashed(n: int, asked: int, cache: Path | None) -> tuple[np.ndarray, list[np.ndarray]]:
    """The hash embedder's vectors of recall.py's texts, and queries as recall.py's:
    half of a memory's words and two others."""
    embedder = HashEmbedder(bench.DIMS)
    corpus = bench.texts(n)
    if cache is not None and cache.exists():
        vectors = np.load(cache)
    else:
        vectors, _ = bench.embedded(embedder, corpus)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rng = random.Random(7)
    queries = []
    for _ in range(asked):
        words = corpus[rng.randrange(n)].split()[:8]
        q = np.asarray(embedder.embed([" ".join(rng.sample(words, 4) + rng.choices(bench.WORDS, k=2))])[0])
        queries.append((q / np.linalg.norm(q)).astype(np.float32))
    return vectors, queries


def main() -> None:
    args = arguments(__doc__.splitlines()[0], options)
    n = args.n or sized(args, full=100_000, quick=10_000, smoke=1_000)
    configs = [tuple(int(v) for v in c.split(":")) for c in args.configs.split(",")]
    breadths = [int(x) for x in args.breadths.split(",")]
    asked = sized(args, full=200, quick=200, smoke=20)
    cache = None if args.smoke else Path(f"/tmp/memwarden-hnsw-{args.corpus}-{n}.npy")
    if args.corpus == "clustered":
        corpus = Clustered(bench.DIMS)
        vectors = np.load(cache) if cache is not None and cache.exists() else corpus.vectors(n)
        queries = list(corpus.queries(asked))
    else:
        vectors, queries = hashed(n, asked, cache)
    if cache is not None and not cache.exists():
        np.save(cache, vectors)
    exact, floor = [], []
    for q in queries:  # the exact numpy scan: what recall is measured against, and the floor of time
        at = time.perf_counter()
        exact.append(set(bench.exact_top(vectors, q).tolist()))
        floor.append((time.perf_counter() - at) * 1000)
    metrics = [Metric(f"exact numpy p99 ({n:,})", percentile(floor, 0.99), "ms", None, None, "(info)", True)]
    for m, ea in configs:
        index = Index(ndim=bench.DIMS, metric="cos", dtype="f16", connectivity=m, expansion_add=ea)
        cpu0, started = cpu(), time.perf_counter()
        index.add(np.arange(n, dtype=np.uint64), vectors, threads=0)
        took, cpu_took = time.perf_counter() - started, cpu() - cpu0
        label = f"M={m} expansion_add={ea}"
        metrics += [
            Metric(f"build {n:,}, {label}", n / took, "vectors/s", None, None, "(info)", True),
            Metric(f"build {n:,}, {label}: CPU", cpu_took, "s", took, cpu_took / took, "(info: vs wall)", True),
            Metric(f"memory, {label}", index.memory_usage / 2**20, "MB", n * bench.DIMS * 4 / 2**20,
                   index.memory_usage / (n * bench.DIMS * 4), "(info: vs raw f32)", True),
        ]  # fmt: skip
        for ef in breadths:
            index.expansion_search = ef
            samples, hits = [], 0
            for q, e in zip(queries, exact, strict=True):
                at = time.perf_counter()
                found = index.search(q, 10)
                samples.append((time.perf_counter() - at) * 1000)
                hits += len(set(found.keys.tolist()) & e)
            recall = hits / (10 * len(queries))
            metrics += [
                Metric(f"recall@10, {label} expansion_search={ef}", recall, "", 1.0, recall, ">= 0.95",
                       recall >= 0.95),
                Metric(f"search p50, {label} expansion_search={ef}", percentile(samples, 0.5), "ms", None, None,
                       "(info)", True),
                Metric(f"search p99, {label} expansion_search={ef}", percentile(samples, 0.99), "ms", None, None,
                       "(info)", True),
            ]  # fmt: skip
    print(f"load {os.getloadavg()[0]:.1f}", file=sys.stderr)
    report(f"HNSW build and recall ({n:,} {args.corpus} vectors, {bench.DIMS} dims)", metrics, args.json_path)


if __name__ == "__main__":
    main()
