"""The OpenAPI document, held to what the server does: schemathesis draws
requests for every operation from the schema and sends them to a live
server on loopback. No answer is a 5xx, every refusal has the documented
shape, every status is one the document declares, and a 2xx answer fits its
documented model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from memwarden.engine import Warden
from memwarden.engine.faces.http import create_app
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from .test_http import Server, start_server

ROLE_OF = {
    "/v1/revocations": "security",
    "/v1/policies": "security",
    "/v1/erasures": "security",
    "/v1/audit": "auditor",
    "/v1/events": "auditor",
    "/v1/stats": "auditor",
    "/v1/replay": "auditor",
}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(tmp_path_factory.mktemp("openapi") / "o.db", "--no-scheduler")
    with running.client("agent") as c:  # something to find
        c.post(
            "/v1/memories",
            json={
                "memory_id": "seed",
                "kind": "external_fact",
                "summary": "s",
                "content": "c",
                "source_url": "https://e.example",
                "scope": {"tenant": "acme"},
            },
        )
    yield running
    running.proc.terminate()
    running.proc.wait(timeout=30)


def _document() -> dict[str, Any]:
    """The document the server serves, built from the same code in-process
    (schemathesis's lazy fixture loader does not run under pytest 9; the
    live server's own copy is compared with this one below)."""
    warden = Warden(":memory:")
    try:
        return create_app(warden, scheduler=False, mcp=False).openapi()
    finally:
        warden.close()


DOCUMENT = _document()
schema = schemathesis.openapi.from_dict(DOCUMENT)


def key_for(path: str, keys: dict[str, str]) -> str:
    role = next((r for prefix, r in ROLE_OF.items() if path.startswith(prefix)), "agent")
    if path.endswith("/explain"):
        role = "auditor"
    return keys[role]


@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_keeps_to_its_document(case: Any, live: Server) -> None:
    if case.query and "wait" in case.query:
        case.query["wait"] = 0  # a long poll would only make the run slower
    before = live.head()
    response = case.call(base_url=live.url, headers={"x-api-key": key_for(case.path, live.keys)}, timeout=30)
    assert response.status_code < 500, (case.method, case.path, response.text)
    if response.status_code >= 400:
        body = response.json()
        assert {"error", "field", "problem"} <= set(body) and "detail" not in body, body
        assert live.head() == before, (case.method, case.path, response.text)
    # the status is declared, and a 2xx answer fits its model
    case.validate_response(response, checks=[status_code_conformance, response_schema_conformance])


def test_the_document_declares_refusals_and_models(live: Server) -> None:
    spec = httpx.get(f"{live.url}/openapi.json").json()
    assert spec == DOCUMENT
    for path, item in spec["paths"].items():
        if not path.startswith(("/v1", "/memory")):
            continue
        for method, op in item.items():
            codes = set(op["responses"])
            assert {"401", "403", "413", "422"} <= codes, (method, path, codes)
            ok = next(c for c in codes if c.startswith("2"))
            assert "$ref" in op["responses"][ok]["content"]["application/json"]["schema"], (method, path)
            assert op["responses"]["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")
    get_memory = spec["paths"]["/v1/memories/{memory_id}"]["get"]["responses"]
    assert {"404", "409"} <= set(get_memory)
    assert "409" in spec["paths"]["/v1/memories"]["post"]["responses"]
