"""The OpenAPI document, held to what the server does: schemathesis draws
requests for every operation from the schema and sends them to a live
server on loopback. No answer is a 5xx, every refusal has the documented
shape, every status is one the document declares, and a 2xx answer fits its
documented model."""

from __future__ import annotations

from typing import Any

import httpx
import schemathesis
from hypothesis import HealthCheck, settings
from memwarden.engine import Warden
from memwarden.engine.faces.http import create_app
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from ._http_server import Server
from ._sizes import larger
from .test_http_fuzz import quiet_server  # noqa: F401  (the live server fixture: one server with a seed memory)

ROLE_OF = {
    "/v1/revocations": "security",
    "/v1/policies": "security",
    "/v1/erasures": "security",
    "/v1/audit": "auditor",
    "/v1/events": "auditor",
    "/v1/stats": "auditor",
    "/v1/replay": "auditor",
}


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
# The coverage phase draws every boundary of every field whatever
# max_examples says (hundreds of requests for the batch); it runs with
# --runslow, and the default run keeps the examples and the fuzzing.
schema.config.phases.update(phases=larger(["examples", "fuzzing"], ["examples", "coverage", "fuzzing"]))


def key_for(path: str, keys: dict[str, str]) -> str:
    role = next((r for prefix, r in ROLE_OF.items() if path.startswith(prefix)), "agent")
    if path.endswith("/explain"):
        role = "auditor"
    return keys[role]


@schema.parametrize()
@settings(max_examples=larger(8, 30), deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_keeps_to_its_document(case: Any, quiet_server: Server) -> None:  # noqa: F811
    if case.query and "wait" in case.query:
        case.query["wait"] = 0  # a long poll would only make the run slower
    before = quiet_server.head()
    response = case.call(
        base_url=quiet_server.url, headers={"x-api-key": key_for(case.path, quiet_server.keys)}, timeout=30
    )
    assert response.status_code < 500, (case.method, case.path, response.text)
    if response.status_code >= 400:
        body = response.json()
        assert {"error", "field", "problem"} <= set(body) and "detail" not in body, body
        assert quiet_server.head() == before, (case.method, case.path, response.text)
    # the status is declared, and a 2xx answer fits its model
    case.validate_response(response, checks=[status_code_conformance, response_schema_conformance])


def test_the_document_declares_refusals_and_models(quiet_server: Server) -> None:  # noqa: F811
    spec = httpx.get(f"{quiet_server.url}/openapi.json").json()
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
