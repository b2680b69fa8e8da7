"""The view's questions for re-embedding (a mixin of ``SQLView``): which
current versions' vectors were made by another embedder than the
configured one, or by none.

A version that can never be usable again (erased: its text is gone;
revoked: a revocation is for good) is not asked about: re-embedding it
would keep derived data of it for nothing. A vector the caller gave with
its save (embedder ``caller``) of the configured length is taken as made
for that model and left alone; of another length it cannot be compared
with the model's queries and is stale like any other.
"""

from __future__ import annotations

from typing import Any

from ._fold import TERMINAL_SQL
from ._named import EmbeddingCount, StaleVector

# the current version's vector, if any (of any length)
_CURRENT = (
    "FROM memories m LEFT JOIN vectors v ON v.tenant = m.tenant AND v.memory_id = m.memory_id "
    f"AND v.version = m.version WHERE m.status NOT IN {TERMINAL_SQL}"
)
_STALE = (
    "(v.embedder IS NULL OR v.embedder <> ? OR v.dims <> ?) "
    "AND NOT (COALESCE(v.embedder, '') = 'caller' AND v.dims = ?)"
)


class EmbeddingReads:
    conn: Any

    def embedding_counts(self, tenant: str | None = None) -> list[EmbeddingCount]:
        """(embedder, dims, versions) of the current versions that may yet be
        used, by what made their vectors (None, None: no vector)."""
        where, args = ("", ()) if tenant is None else (" AND m.tenant = ?", (tenant,))
        return [
            EmbeddingCount(e, d, int(n))
            for e, d, n in self.conn.execute(
                f"SELECT v.embedder, v.dims, COUNT(*) {_CURRENT}{where} GROUP BY v.embedder, v.dims "
                "ORDER BY COUNT(*) DESC",
                args,
            )
        ]

    def stale_vectors(
        self, embedder: str, dims: int, limit: int, after: tuple[str, str] = ("", ""), tenant: str | None = None
    ) -> list[StaleVector]:
        """Up to ``limit`` current versions (after the key ``after``, in key
        order) whose vector ``embedder`` of ``dims`` did not make: (tenant,
        memory_id, version, checksum, embedder, dims) of each."""
        where, args = ("", ()) if tenant is None else (" AND m.tenant = ?", (tenant,))
        return list(
            map(
                StaleVector._make,
                self.conn.execute(
                    f"SELECT m.tenant, m.memory_id, m.version, m.checksum, v.embedder, v.dims {_CURRENT} AND {_STALE} "
                    f"AND (m.tenant > ? OR (m.tenant = ? AND m.memory_id > ?)){where} "
                    "ORDER BY m.tenant, m.memory_id LIMIT ?",
                    (embedder, dims, dims, after[0], after[0], after[1], *args, limit),
                ),
            )
        )

    def count_stale_vectors(self, embedder: str, dims: int, tenant: str | None = None) -> int:
        where, args = ("", ()) if tenant is None else (" AND m.tenant = ?", (tenant,))
        (n,) = self.conn.execute(
            f"SELECT COUNT(*) {_CURRENT} AND {_STALE}{where}", (embedder, dims, dims, *args)
        ).fetchone()
        return int(n)
