"""The HNSW graph's build and recall alone, on ``recall.py``'s corpus (issue 40).

    .venv/bin/python scripts/bench/hnsw_build.py N M:EA[,M:EA...] EF[,EF...]

Builds a usearch graph (f16, cosine) of N of the hash embedder's vectors
for each connectivity M and ``expansion_add`` EA, on every core, and asks
it recall.py's 200 queries at each search breadth EF: the build's rate
and CPU time, recall@10 against exact numpy, the search p50/p99. The
vectors are kept in /tmp between runs.
"""

from __future__ import annotations

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
from memwarden.engine import HashEmbedder
from usearch.index import Index


def cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def main() -> None:
    n = int(sys.argv[1])
    configs = [tuple(int(v) for v in c.split(":")) for c in sys.argv[2].split(",")]
    breadths = [int(x) for x in sys.argv[3].split(",")]
    embedder = HashEmbedder(bench.DIMS)
    corpus = bench.texts(n)
    cache = Path(f"/tmp/memwarden-hnsw-{n}.npy")
    if cache.exists():
        vectors = np.load(cache)
    else:
        vectors, _ = bench.embedded(embedder, corpus)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        np.save(cache, vectors)
    rng = random.Random(7)
    queries = []
    for _ in range(200):  # as recall.py's: half of a memory's words and two others
        words = corpus[rng.randrange(n)].split()[:8]
        q = np.asarray(embedder.embed([" ".join(rng.sample(words, 4) + rng.choices(bench.WORDS, k=2))])[0])
        queries.append((q / np.linalg.norm(q)).astype(np.float32))
    exact = [set(bench.exact_top(vectors, q).tolist()) for q in queries]
    for m, ea in configs:
        index = Index(ndim=bench.DIMS, metric="cos", dtype="f16", connectivity=m, expansion_add=ea)
        cpu0, started = cpu(), time.perf_counter()
        index.add(np.arange(n, dtype=np.uint64), vectors, threads=0)
        took, cpu_took = time.perf_counter() - started, cpu() - cpu0
        for ef in breadths:
            index.expansion_search = ef
            samples, hits = [], 0
            for q, e in zip(queries, exact, strict=True):
                at = time.perf_counter()
                found = index.search(q, 10)
                samples.append((time.perf_counter() - at) * 1000)
                hits += len(set(found.keys.tolist()) & e)
            samples.sort()
            print(
                f"n={n:,} M={m} expansion_add={ea}: build {took:.1f} s ({n / took:,.0f}/s, CPU {cpu_took:.0f} s); "
                f"expansion_search={ef}: recall@10 {hits / 2000:.3f}, p50 {samples[100]:.2f} ms, "
                f"p99 {samples[197]:.2f} ms; memory {index.memory_usage / 2**20:,.0f} MB (raw f32 "
                f"{n * bench.DIMS * 4 / 2**20:,.0f} MB); load {os.getloadavg()[0]:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
