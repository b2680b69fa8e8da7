"""The engine's own vector index as a sink (``kind = "index"``).

The vector projection follows the log on every node by itself, so a
notice needs no delivery: it is delivered when written. Its read-back asks
two questions of it. Does the index, caught up with the view, still hold a
vector of a covered memory (a revoked memory's leave it at the revocation's
commit)? And does the recall path agents use (``recall._search.search``: the
index proposes, the gate decides) answer one, searched for by its own
vectors (the queries most certain to find it)? A covered id either way is
leaked. Up to ``SAMPLE`` covered memories per tenant are searched for,
each for its ``K`` nearest.
"""

from __future__ import annotations

import time

from .._core import Core
from .._errors import InvalidInput, SinkUnavailable
from .._rights import SYSTEM
from ..recall._search import search
from ._config import SinkSpec

SAMPLE = 200
K = 20


class IndexSink:
    def __init__(self, spec: SinkSpec, core: Core) -> None:
        self.spec = spec
        self.core = core

    def close(self) -> None:
        pass

    def deliver(self, notice_id: str, body: str) -> None:
        # the index follows the log itself, on every node: nothing to send
        return None

    def _dims(self, tenant: str) -> list[int]:
        embedder = self.core.embedder
        found = set(self.core.vector_index.dims_of(tenant))
        if embedder is not None:
            found.add(embedder.dims)
        with self.core.reading() as view:
            found.update(c.dims for c in view.vectors().embedding_counts(tenant) if c.dims is not None)
        return sorted(found)

    def held(self, notice_id: str, ids: dict[str, list[str]]) -> dict[str, list[str]]:
        import numpy as np  # here, not at import: a command that reads back no index sink never loads it

        out: dict[str, list[str]] = {}
        for tenant, memory_ids in ids.items():
            covered = set(memory_ids)
            sample = memory_ids[:SAMPLE]
            leaked: set[str] = set()
            for dims in self._dims(tenant):
                with self.core.reading() as view:
                    leaked.update(self.core.vector_index.holding(view, tenant, dims, memory_ids))
                    vectors = {
                        r.memory_id: r.vector for r in view.vectors().vector_rows(tenant, dims, sample, any_status=True)
                    }
                # stored float32, little-endian: each of a version's vectors is asked for
                queries = [
                    row for data in vectors.values() for row in np.frombuffer(bytes(data), "<f4").reshape(-1, dims)
                ]
                for query in queries:
                    try:
                        found = search(
                            self.core,
                            tenant=tenant,
                            vector=[float(x) for x in query],
                            mode="vector",
                            limit=K,
                            with_content=False,
                            caller=SYSTEM,
                        )
                    except InvalidInput as exc:
                        raise SinkUnavailable(
                            self.spec.name, f"the vector index could not be searched: {exc}"
                        ) from None
                    leaked |= {f.view.memory_id for f in found} & covered
            if leaked:
                out[tenant] = sorted(leaked)
        return out

    def ping(self) -> float:
        started = time.perf_counter()
        with self.core.reading() as view:
            view.position()
        return (time.perf_counter() - started) * 1000
