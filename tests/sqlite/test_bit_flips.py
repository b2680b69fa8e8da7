"""One bit flipped in 1,000 stored texts: every flip detected on read,
quarantined, resynced where the source allows, never served."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from memwarden.engine import OPERATOR, Warden
from memwarden.events import MemorySaved, Scope, content_checksum


def test_a_thousand_bit_flips(tmp_path: Path) -> None:
    sources = tmp_path / "sources"
    sources.mkdir()
    w = Warden(tmp_path / "flips.db", synchronous="NORMAL")
    texts = {f"m{i}": f"문서 {i}: " + "본문 " * (5 + i % 40) for i in range(1000)}
    with w.transaction() as tx:
        events = []
        for memory_id, text in texts.items():
            path = sources / f"{memory_id}.txt"
            path.write_text(text, encoding="utf-8")
            w.texts.put("acme", memory_id, 1, memory_id, text)
            events.append(
                MemorySaved(
                    memory_id=memory_id,
                    version=1,
                    kind="permission",
                    summary=memory_id,
                    content_checksum=content_checksum(text),
                    content_length=len(text.encode()),
                    source_url=path.as_uri(),
                    fetched_at=w.now(),
                    scope=Scope(tenant="acme"),
                )
            )
        tx.append(events)
    # half the sources still hold the recorded text; the other half changed
    changed = {m for i, m in enumerate(sorted(texts)) if i % 2}
    for memory_id in changed:
        (sources / f"{memory_id}.txt").write_text("changed since", encoding="utf-8")
    rng = random.Random(1000)
    raw = sqlite3.connect(w.path, isolation_level=None)
    for memory_id in texts:
        where = ("acme", memory_id)
        data = bytearray(
            raw.execute("SELECT content FROM texts WHERE tenant = ? AND memory_id = ?", where).fetchone()[0]
        )
        bit = rng.randrange(len(data) * 8)
        data[bit // 8] ^= 1 << (bit % 8)
        raw.execute("UPDATE texts SET content = ? WHERE tenant = ? AND memory_id = ?", (bytes(data), *where))
    raw.close()

    served_wrong = 0
    for memory_id, text in texts.items():
        view = w.get(memory_id, caller=OPERATOR)
        if memory_id in changed:
            assert not view.usable and view.reason == "integrity_failed" and view.content is None
        else:
            assert view.usable
        if view.usable and view.content != text:
            served_wrong += 1
    assert served_wrong == 0
    counts = dict(
        w.store.conn.execute(
            "SELECT type, count(*) FROM events "
            "WHERE type IN ('memory.integrity_failed', 'memory.resynced') GROUP BY type"
        ).fetchall()
    )
    assert counts == {"memory.integrity_failed": 1000, "memory.resynced": 500}
    # the query path serves only the resynced ones, with their true text
    for view in w.query(tenant="acme", limit=10_000, caller=OPERATOR):
        assert view.content == texts[view.memory_id]
    assert len(w.query(tenant="acme", limit=10_000, caller=OPERATOR)) == 500
    assert w.audit_verify(caller=OPERATOR)["ok"] and w.check_projections(caller=OPERATOR).ok
    w.close()
