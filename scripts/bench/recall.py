"""Semantic recall at scale: the vector index beside exact search and LangGraph's InMemoryStore.

    .venv/bin/python scripts/bench/recall.py [--quick] [--json PATH] [--repeat N] [--million] [--size N]

100,000 memories of 384 dimensions over 100 tenants, one of them holding
half (--quick: 10,000; --smoke: 1,000; --million: 1,000,000, without the peer, whose lists
of floats would not fit; --size N: N), their vectors drawn from the
clustered corpus (``_clustered``: seeded, shaped like a sentence model's
embeddings, issue 62) and given with each save, the queries drawn the
same way (never a stored vector). Beside them a tenant ``h00`` holds as
many vectors as the big tenant (at most 50,000) of memwarden's hash
embedder over texts of pseudo-words (near-orthogonal: no neighbourhoods
for a graph to follow), asked queries sharing half a memory's words: its
figures are reported and judged by nothing. In the
same run: exact search with numpy over the large tenant's vectors (the
floor, and what recall is measured against) and LangGraph's
``InMemoryStore`` holding the same items with the same embeddings (its
embed function looks the vectors up, so neither side pays for a model),
asked the same queries (the full run asks it the first 50, once: each
is a scan in Python of 50,000 items).

The index's memory is what it reports (``VectorIndex.nbytes``: the exact
matrices, usearch's ``memory_usage`` and the id maps). usearch's arenas
are allocated in large blocks, so a small graph (the 5,000 vectors of
--quick) holds about twice its raw bytes; at 50,000 it is about 1.1x.

Targets (issues #40, #62):
* recall@10 >= 0.95 against exact search, in the large tenant (an HNSW
  graph: past ``IndexSettings.exact_up_to``, lowered with --quick so the
  graph is what is measured);
* search p99 in the large tenant no slower than ``InMemoryStore``'s, and
  at most a quarter of the exact numpy scan's in the same run;
* a revocation of 1,000 memories of the large tenant leaves none of them
  in the 10,000 searches after it (--quick: 1,000), each asking with a
  revoked memory's own vector, where it would be the nearest;
* the index's memory <= 1.5x the raw float32 vectors it holds;
* a batch save of 10,000 memories with vectors at no less than half the
  rate of the same batch without.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

# scripts/bench/http.py would shadow the standard library's http package:
# look in this folder last, not first
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _HERE] + [_HERE]

import numpy as np
from _clustered import Clustered, stats
from _common import Metric, arguments, median_of, percentile, report, scratch_dir, sized
from memwarden.engine import OPERATOR, HashEmbedder, IndexSettings, Warden
from memwarden.engine._limits import MAX_BATCH
from memwarden.events import FrozenClock

DIMS = 384
TENANTS = 100
BIG = "t00"  # the tenant holding half
REVOKED = 1000  # memories of the big tenant in project "leak", revoked together (--smoke: 100)
BATCH = 10_000  # the batch save measured
_SYLLABLES = [c + v for c in "bdgjklmnprstvzhcfwyq" for v in "aeiou"]
WORDS = [a + b for a in _SYLLABLES for b in _SYLLABLES]  # 10,000 pseudo-words


def texts(n: int, seed: int = 40) -> list[str]:
    rng = random.Random(seed)
    return [f"{' '.join(rng.choices(WORDS, k=8))} {i}" for i in range(n)]


def embedded(embedder: HashEmbedder, corpus: list[str]) -> tuple[np.ndarray, float]:
    """The vectors of ``corpus`` as float32 rows (Python lists of floats
    would take ten times the memory), and the embedder's rate."""
    out = np.empty((len(corpus), DIMS), dtype=np.float32)
    started = time.perf_counter()
    for at in range(0, len(corpus), 1000):
        out[at : at + 1000] = embedder.embed(corpus[at : at + 1000])
    return out, len(corpus) / (time.perf_counter() - started)


def tenant_of(i: int) -> str:
    return BIG if i % 2 == 0 else f"t{1 + (i // 2) % (TENANTS - 1):02}"


def item(i: int, text: str, vector: np.ndarray | None, big_seen: int, revoked: int = REVOKED) -> dict[str, Any]:
    tenant = tenant_of(i)
    out: dict[str, Any] = {
        "memory_id": f"m{i}",
        "kind": "external_fact",
        "summary": text,
        "content": text,
        "source_url": f"https://example.org/{i}",
        "scope": {"tenant": tenant, "project": "leak" if tenant == BIG and big_seen < revoked else f"p{i % 10}"},
        "ttl": "30d",
    }
    if vector is not None:
        out["embedding"] = vector.tolist()
    return out


def fill(w: Warden, corpus: list[str], vectors: np.ndarray, revoked: int = REVOKED) -> None:
    """The batch save path, 1,000 a batch, each with its vector; the rate
    told every 100,000 (a run of 1,000,000 spends most of its time here)."""
    big_seen = 0
    started = time.perf_counter()
    for at in range(0, len(corpus), 1000):
        batch = []
        for i in range(at, min(at + 1000, len(corpus))):
            batch.append(item(i, corpus[i], vectors[i], big_seen, revoked))
            big_seen += tenant_of(i) == BIG
        w.save_many(batch, caller=OPERATOR)
        done = at + len(batch)
        if done % 100_000 == 0 and done < len(corpus):
            rate = done / (time.perf_counter() - started)
            print(f"  {done:,} saved, {rate:,.0f}/s, {(len(corpus) - done) / rate:,.0f}s to go", file=sys.stderr)


def exact_top(matrix: np.ndarray, q: np.ndarray, k: int = 10) -> np.ndarray:
    scores = matrix @ q
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top])]


def ms_samples(fn: Any, args: list[Any]) -> tuple[list[float], list[Any]]:
    samples, answers = [], []
    for a in args:
        started = time.perf_counter()
        answers.append(fn(a))
        samples.append((time.perf_counter() - started) * 1000)
    return samples, answers


def langgraph(corpus: list[str], vectors: np.ndarray, queries: list[tuple[str, np.ndarray]], runs: int) -> dict:
    """InMemoryStore with the same vectors, asked the same queries in the big tenant."""
    from langgraph.store.base import PutOp
    from langgraph.store.memory import InMemoryStore

    lookup = {t: i for i, t in enumerate(corpus)}
    asked = {text: q for text, q in queries}

    def embed(batch: list[str]) -> list[list[float]]:
        return [(asked[t] if t in asked else vectors[lookup[t]]).tolist() for t in batch]

    store = InMemoryStore(index={"dims": DIMS, "embed": embed, "fields": ["text"]})
    for at in range(0, len(corpus), 1000):
        store.batch(
            [PutOp((tenant_of(i),), f"m{i}", {"text": corpus[i]}) for i in range(at, min(at + 1000, len(corpus)))]
        )
    samples: list[float] = []
    for _ in range(runs):
        s, answers = ms_samples(lambda t: store.search((BIG,), query=t, limit=10), [t for t, _ in queries])
        samples += s
    return {"p99": percentile(samples, 0.99), "p50": percentile(samples, 0.5), "answers": answers}


def batch_rates(
    folder: Path, corpus: list[str], vectors: np.ndarray, runs: int, size: int = BATCH
) -> tuple[float, float]:
    """Items/s of one batch of ``size`` saves into a fresh store, with vectors and without."""

    def one(with_vectors: bool, run: int) -> float:
        w = Warden(folder / f"batch-{with_vectors}-{run}.db", clock=FrozenClock("2026-01-05T09:00:00Z"))
        try:
            w.save_many([item(i, corpus[i], vectors[i], REVOKED) for i in range(10)], caller=OPERATOR)
            if with_vectors:  # an index loaded and following, as on a live node
                w.search(tenant=BIG, vector=vectors[0].tolist(), mode="vector", caller=OPERATOR)
            m = len(corpus)  # --quick has fewer texts than the batch: they are used again, under other ids
            items = [
                item(i, corpus[i % m], vectors[i % m] if with_vectors else None, REVOKED) for i in range(10, 10 + size)
            ]
            started = time.perf_counter()
            for at in range(0, len(items), MAX_BATCH):  # the batch path's own bound
                w.save_many(items[at : at + MAX_BATCH], caller=OPERATOR)
            return size / (time.perf_counter() - started)
        finally:
            w.close()

    with_rates, without_rates = [], []
    for run in range(runs):  # alternating: both see the same machine
        without_rates.append(one(False, run))
        with_rates.append(one(True, run))
    return median_of(runs, iter(with_rates).__next__), median_of(runs, iter(without_rates).__next__)


HASHED = "h00"  # the tenant of the hash embedder's vectors, judged by nothing
HASHED_MOST = 50_000


def hashed_corpus(n: int, n_queries: int) -> tuple[list[str], np.ndarray, list[np.ndarray], float]:
    """``n`` pseudo-word texts, their hash embeddings, queries sharing half
    a text's words (a near neighbour exists), and the embedder's rate."""
    embedder = HashEmbedder(DIMS)
    corpus = texts(n, seed=41)
    vectors, embed_rate = embedded(embedder, corpus)
    rng = random.Random(7)
    queries = []
    for _ in range(n_queries):
        words = corpus[rng.randrange(n)].split()[:8]
        text = " ".join(rng.sample(words, 4) + rng.choices(WORDS, k=2))
        queries.append(np.asarray(embedder.embed([text])[0], dtype=np.float32))
    return corpus, vectors, queries, embed_rate


def fill_hashed(w: Warden, corpus: list[str], vectors: np.ndarray) -> None:
    for at in range(0, len(corpus), 1000):
        batch = []
        for i in range(at, min(at + 1000, len(corpus))):
            one = item(i, corpus[i], vectors[i], REVOKED)
            one.update(memory_id=f"h{i}", scope={"tenant": HASHED, "project": f"p{i % 10}"})
            batch.append(one)
        w.save_many(batch, caller=OPERATOR)


def measured(
    w: Warden, tenant: str, matrix: np.ndarray, names: list[str], queries: list[np.ndarray], runs: int
) -> dict:
    """recall@10 of ``tenant``'s searches against exact numpy over ``matrix``
    (its vectors, ``names[i]`` holding row ``i``), and both sides' p50/p99."""
    mw_samples: list[float] = []
    exact_samples: list[float] = []
    for _ in range(runs):  # alternating: both see the same machine
        s, found = ms_samples(
            lambda q: w.search(tenant=tenant, vector=q.tolist(), mode="vector", limit=10, caller=OPERATOR), queries
        )
        mw_samples += s
        s, exact = ms_samples(lambda q: exact_top(matrix, q), queries)
        exact_samples += s
    exact_ids = [{names[j] for j in top} for top in exact]
    hits = [len({f.view.memory_id for f in page} & e) for page, e in zip(found, exact_ids, strict=True)]
    return {
        "recall": float(np.mean(hits)) / 10,
        "p99": percentile(mw_samples, 0.99),
        "p50": percentile(mw_samples, 0.5),
        "exact_p99": percentile(exact_samples, 0.99),
        "exact_p50": percentile(exact_samples, 0.5),
        "exact_ids": exact_ids,
    }


def reopened_ms(path: Path, settings: IndexSettings, query: np.ndarray) -> float:
    """The first search of the big tenant after a reopen: its index read
    from its file and caught up with the log."""
    w = Warden(path, clock=FrozenClock("2026-01-05T09:00:00Z"), vector_index=settings)
    try:
        started = time.perf_counter()
        w.search(tenant=BIG, vector=query.tolist(), mode="vector", limit=10, caller=OPERATOR)
        return (time.perf_counter() - started) * 1000
    finally:
        w.close()


def main() -> None:
    million = "--million" in sys.argv  # taken out here: _common's parser knows the shared flags only
    sys.argv = [a for a in sys.argv if a != "--million"]
    size = None
    if "--size" in sys.argv:
        at = sys.argv.index("--size")
        size = int(sys.argv[at + 1])
        del sys.argv[at : at + 2]
    parser_args = arguments(__doc__.splitlines()[0])
    if parser_args.backend != "sqlite":
        sys.exit("recall.py measures the SQLite store (the index is the same on PostgreSQL; its files are not)")
    quick = parser_args.quick or parser_args.smoke
    # --smoke: the big tenant (500) is past exact_up_to (a graph) and holds more than the revoked
    n = size or sized(parser_args, full=1_000_000 if million else 100_000, quick=10_000, smoke=1_000)
    exact_up_to = sized(parser_args, full=20_000, quick=1000, smoke=200)  # the default past --quick
    revoked = sized(parser_args, full=REVOKED, quick=REVOKED, smoke=100)
    n_queries = sized(parser_args, full=200, quick=100, smoke=10)
    after_revoke = sized(parser_args, full=10_000, quick=1000, smoke=20)
    batch = sized(parser_args, full=BATCH, quick=BATCH, smoke=500)
    runs = parser_args.repeat or (1 if quick else 3)
    peer_wanted = not million and n <= 100_000  # past it, its scan in Python of each query would take minutes
    folder = scratch_dir("memwarden-recall-")

    print(f"drawing {n:,} clustered vectors ...", file=sys.stderr)
    clustered = Clustered(DIMS)
    corpus = texts(n)
    vectors = clustered.vectors(n)
    queries = [(f"query {j}", q) for j, q in enumerate(clustered.queries(n_queries))]
    big_rows = np.array([i for i in range(n) if tenant_of(i) == BIG])
    shape = stats(vectors[big_rows], np.stack([q for _, q in queries]))
    hashed_n = min(len(big_rows), HASHED_MOST)
    print(f"embedding {hashed_n:,} texts ...", file=sys.stderr)
    h_corpus, h_vectors, h_queries, embed_rate = hashed_corpus(hashed_n, n_queries)

    settings = IndexSettings(directory=folder / "vectors", exact_up_to=exact_up_to)
    w = Warden(folder / "recall.db", clock=FrozenClock("2026-01-05T09:00:00Z"), vector_index=settings)
    print(f"saving {n + hashed_n:,} memories with vectors ...", file=sys.stderr)
    started = time.perf_counter()
    fill(w, corpus, vectors, revoked)
    fill_hashed(w, h_corpus, h_vectors)
    print(f"saved in {time.perf_counter() - started:.1f}s; loading the indexes ...", file=sys.stderr)
    started = time.perf_counter()
    for t in [*(f"t{t:02}" for t in range(TENANTS)), HASHED]:
        w.search(tenant=t, vector=queries[0][1].tolist(), mode="vector", limit=1, caller=OPERATOR)
    w.vector_index.settle(timeout=3600.0)  # the figures are the graph's: wait for its build, however long (logged)
    w.search(tenant=BIG, vector=queries[0][1].tolist(), mode="vector", limit=1, caller=OPERATOR)
    built_s = time.perf_counter() - started
    kind = next(d["kind"] for d in w.vector_index.describe() if d["tenant"] == BIG)

    big = measured(w, BIG, vectors[big_rows], [f"m{i}" for i in big_rows], [q for _, q in queries], runs)
    print(f"{BIG}: recall@10 {big['recall']:.3f}, p99 {big['p99']:.2f} ms, exact p99 {big['exact_p99']:.2f} ms "
          f"(built in {built_s:.0f}s)", file=sys.stderr)  # fmt: skip
    hashed = measured(w, HASHED, h_vectors / np.linalg.norm(h_vectors, axis=1, keepdims=True),
                      [f"h{i}" for i in range(hashed_n)], h_queries, runs)  # fmt: skip

    index_bytes = w.vector_index.nbytes()
    held = sum(d["vectors"] for d in w.vector_index.describe())
    raw_bytes = held * DIMS * 4

    # the revocation: 1,000 of the big tenant, then searches by their own vectors
    revoked_ids = {f"m{i}" for i in big_rows[:revoked]}
    started = time.perf_counter()
    w.revoke({"tenant": BIG, "project": "leak"}, reason="bench", caller=OPERATOR)
    revoke_ms = (time.perf_counter() - started) * 1000
    picks = [int(big_rows[k % revoked]) for k in range(after_revoke)]
    s, answers = ms_samples(
        lambda i: w.search(tenant=BIG, vector=vectors[i].tolist(), mode="vector", limit=10, caller=OPERATOR), picks
    )
    leaked = sum(1 for page in answers for f in page if f.view.memory_id in revoked_ids)
    revoked_p99 = percentile(s, 0.99)
    index_ratio = index_bytes / raw_bytes
    print(f"{leaked} revoked served; index {index_ratio:.2f}x raw; hash recall {hashed['recall']:.3f}", file=sys.stderr)
    w.close()
    reopen_ms = reopened_ms(folder / "recall.db", settings, queries[1][1])

    peer = None
    if peer_wanted:
        print("LangGraph InMemoryStore with the same vectors ...", file=sys.stderr)
        # a brute-force scan in Python of 50,000 items a query: the first 50 queries, once
        peer_queries = queries if quick else queries[:50]
        peer = langgraph(corpus, vectors, peer_queries, 1)
        peer_recall = float(
            np.mean(
                [
                    len({x.key for x in page} & e) / 10
                    for page, e in zip(peer["answers"], big["exact_ids"][: len(peer_queries)], strict=True)
                ]
            )
        )
    print("batch saves ...", file=sys.stderr)
    with_rate, without_rate = batch_rates(folder, corpus, vectors, max(runs, 3) if not quick else 1, batch)

    size_big = len(big_rows)
    recall, mw_p99 = big["recall"], big["p99"]
    metrics = [
        Metric(f"recall@10 vs exact ({BIG}: {size_big:,} clustered vectors, {kind})", recall, "", 1.0, recall,
               ">= 0.95", recall >= 0.95),
        Metric(f"search p99 ({BIG}, limit 10, vs exact numpy p99)", mw_p99, "ms", big["exact_p99"],
               mw_p99 / big["exact_p99"], "<= 0.25x exact", mw_p99 <= 0.25 * big["exact_p99"]),
        Metric(f"search p99 ({BIG}, limit 10, vs InMemoryStore)", mw_p99, "ms", None if peer is None else peer["p99"],
               None if peer is None else mw_p99 / peer["p99"], "<= InMemoryStore's",
               peer is not None and mw_p99 <= peer["p99"]),
        Metric(f"search p50 ({BIG}, limit 10) (info)", big["p50"], "ms", big["exact_p50"],
               big["p50"] / big["exact_p50"], "- (baseline: exact numpy p50)", True),
        Metric(f"hash corpus recall@10 ({HASHED}: {hashed_n:,} vectors; info, judged by nothing)", hashed["recall"],
               "", 1.0, hashed["recall"], "-", True),
        Metric(f"hash corpus search p99 ({HASHED}; info, vs exact numpy p99)", hashed["p99"], "ms",
               hashed["exact_p99"], hashed["p99"] / hashed["exact_p99"], "-", True),
        Metric(f"revoked served in {after_revoke:,} searches after revoking {revoked:,}", leaked, "results", None,
               None, "0", leaked == 0),
        Metric(f"revoke {revoked:,}: commit (info)", revoke_ms, "ms", None, None, "-", True),
        Metric("search p99 by a revoked memory's own vector (info)", revoked_p99, "ms", mw_p99, revoked_p99 / mw_p99,
               "-", True),
        Metric(f"index memory ({held:,} vectors, {TENANTS + 1} tenants)", index_bytes / 2**20, "MB", raw_bytes / 2**20,
               index_bytes / raw_bytes, "<= 1.5x raw float32", index_bytes <= 1.5 * raw_bytes),
        Metric("indexes loaded and graphs built after the saves (info)", built_s, "s", None, None, "-", True),
        Metric("first search after a reopen: index from its file, caught up (info)", reopen_ms, "ms", None, None, "-",
               True),
        Metric(f"batch save of {batch:,} with vectors ({MAX_BATCH:,} a call)", with_rate, "memories/s", without_rate,
               with_rate / without_rate, ">= 0.5x without", with_rate >= 0.5 * without_rate),
        Metric(f"hash embedder, {DIMS} dims (info)", embed_rate, "texts/s", None, None, "-", True),
        Metric("corpus: a query's nearest vector, median cosine (info; p10-p90 in the unit)", shape["top1_median"],
               f"p10 {shape['top1_p10']:.2f} p90 {shape['top1_p90']:.2f}", None, None, "~0.6-0.9", True),
        Metric("corpus: a random pair's median cosine (info)", shape["random_median"], "", None, None, "~0.0-0.2",
               True),
    ]  # fmt: skip
    if peer is not None:
        metrics.append(
            Metric("InMemoryStore recall@10 (info: exact by construction)", peer_recall, "", None, None, "-", True)
        )
        metrics.append(Metric("InMemoryStore search p50 (info)", peer["p50"], "ms", None, None, "-", True))
    report(f"Semantic recall ({n:,} memories, {DIMS} dims, {TENANTS} tenants)", metrics, parser_args.json_path)


if __name__ == "__main__":
    main()
