"""A PostgreSQL server that cannot be reached, or goes away mid-session,
is ``StoreUnavailable`` through the Warden and a 503 with a JSON body on
HTTP: never the SQLite file's "damaged" words (``tests/test_store_errors``
for the rest of the rule)."""

from __future__ import annotations

import psycopg
import pytest
from fastapi.testclient import TestClient
from memwarden.engine import OPERATOR, KeyStore, StoreUnavailable, Warden, answer
from memwarden.engine.faces.http import create_app
from memwarden.events import StoreFailed, SystemClock
from memwarden.projections._postgres_store import PostgresStore

from ..conftest import save_memory


def test_a_server_where_nothing_listens_is_unavailable_with_its_password_never_named() -> None:
    with pytest.raises(StoreUnavailable) as raised:
        PostgresStore("postgresql://someone:s3cret@127.0.0.1:1/nothing?connect_timeout=2", clock=SystemClock())
    exc = raised.value
    assert isinstance(exc, ConnectionError) and isinstance(exc.__cause__, psycopg.OperationalError)
    assert "s3cret" not in str(exc) and "someone:***@127.0.0.1:1" in str(exc)
    assert "damaged" not in str(exc)


def _terminate_others(pg_admin: object, url: str) -> int:
    database = url.rsplit("/", 1)[1]
    rows = pg_admin.execute(  # type: ignore[attr-defined]
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
        (database,),
    ).fetchall()
    return len(rows)


def test_a_server_gone_mid_session_is_unavailable_not_damaged(pg_url: str, pg_admin: object) -> None:
    w = Warden(pg_url)
    try:
        save_memory(w, "m1")
        assert _terminate_others(pg_admin, pg_url) > 0
        with pytest.raises(StoreUnavailable) as raised:
            save_memory(w, "m2")
        exc = raised.value
        assert type(exc.__cause__).__module__.startswith("psycopg")
        found = answer(exc)
        assert found is not None and (found.status, found.exit_code, found.code) == (503, 2, "database")
        assert "damaged" not in found.message and "audit verify" not in found.message
        # the database is back: the next writes run on a connection opened again,
        # a revocation and an erasure among them, and the texts are read through it
        save_memory(w, "m2")
        w.revoke({"tenant": "acme", "ids": ["m1"]}, reason="after the loss", caller=OPERATOR)
        assert not w.get("m1", tenant="acme", caller=OPERATOR).usable
        assert w.get("m2", tenant="acme", caller=OPERATOR).content is not None
        w.erase(memory_id="m2", tenant="acme", reason="after the loss", caller=OPERATOR)
        assert w.store.file_problems() == []
    finally:
        w.close()


def test_http_answers_503_with_json_when_the_server_is_gone(pg_url: str, pg_admin: object) -> None:
    w = Warden(pg_url)
    try:
        key = KeyStore(w).create("agent", tenants=["acme"], caller=OPERATOR)[0]
        body = {
            "memory_id": "m1",
            "kind": "external_fact",
            "summary": "s",
            "content": "c",
            "source_url": "https://example.com/a",
            "scope": {"tenant": "acme"},
        }
        with TestClient(create_app(w, scheduler=False, mcp=False)) as client:
            _terminate_others(pg_admin, pg_url)
            response = client.post("/v1/memories", json=body, headers={"x-api-key": key})
            assert response.status_code == 503, response.text
            assert response.json() == {"error": "database", "field": "db", "problem": StoreFailed.GENERIC}
            again = client.post("/v1/memories", json=body, headers={"x-api-key": key})
            assert again.status_code == 201, again.text  # the server serves writes again, no restart
            assert client.get("/readyz").json()["ready"] is True
    finally:
        w.close()
