"""Property-based fuzzing of every operation in the OpenAPI schema: no
answer is a 5xx, and a refused request leaves the log as it was."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ._http_server import Server, plain_client, start_server
from ._sizes import larger
from .backends import Backend

# examples per run and backend, shared by the operations; MEMWARDEN_FUZZ_EXAMPLES=3000
# for a long hunt. By default five an operation on each backend (310 hostile
# requests in all, each operation's own), ten under --runslow
EXAMPLES = int(os.environ.get("MEMWARDEN_FUZZ_EXAMPLES", larger("155", "310")))

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
SCALAR = (
    st.text(max_size=40)
    | st.integers(-5, 10**6).map(str)
    | st.sampled_from(
        [
            "true",
            "false",
            "",
            "acme",
            "globex",
            "2026-01-05T09:00:00Z",
            "2026-01-05T09:00:00",
            "-1",
            "0",
            "서울",
            "sha256:" + "a" * 64,
            "1h",
            "../../etc/passwd",
            "%00",
            "' OR 1=1 --",
            "9" * 23,
            "99999999999d",
            "0001-01-01T00:00:00+14:00",
            "a\x00b",
            "not a url",
            "http://127.0.0.1:9/secret",
            "sha256:" + "A" * 64,
            "[" * 2000,
            "policy-42-v7",
        ]
    )
)


@pytest.fixture(scope="module")
def quiet_server(tmp_path_factory: pytest.TempPathFactory, backend: Backend) -> Iterator[Server]:
    running = start_server(backend.db(tmp_path_factory.mktemp("fuzz"), "fuzz.db"), "--no-scheduler")
    with running.client("agent") as c:  # something to find
        c.post(
            "/v1/memories",
            json={
                "memory_id": "seed",
                "kind": "external_fact",
                "summary": "s",
                "content": "c",
                "source_url": "https://e",
                "scope": {"tenant": "acme"},
            },
        )
    yield running
    running.proc.terminate()
    running.proc.wait(timeout=30)


_SPECS: dict[str, dict[str, Any]] = {}
# every (method, path) the fuzzer sent, and what it was answered
REACHED: dict[tuple[str, str], set[int]] = {}


def spec_of(server: Server) -> dict[str, Any]:
    if server.url not in _SPECS:
        with plain_client() as c:
            _SPECS[server.url] = c.get(f"{server.url}/openapi.json").json()
    return _SPECS[server.url]


def operations(server: Server) -> list[tuple[str, str, dict[str, Any]]]:
    spec = spec_of(server)
    return [(method.upper(), path, op) for path, item in spec["paths"].items() for method, op in item.items()]


def body_strategy(op: dict[str, Any], spec_components: dict[str, Any]) -> st.SearchStrategy[Any]:
    content = (op.get("requestBody") or {}).get("content", {}).get("application/json")
    if content is None:
        return st.none()
    ref = content["schema"].get("$ref", "")
    schema = spec_components.get(ref.rsplit("/", 1)[-1], {})
    names = list(schema.get("properties", {}))
    shaped = st.fixed_dictionaries({}, optional={n: JSON | SCALAR for n in names}) if names else JSON
    return shaped | JSON


# every operation the schema serves, each fuzzed on its own so none is left
# to chance; the test below fails when the schema and this list part ways
OPERATIONS = [
    ("POST", "/v1/memories"),
    ("POST", "/v1/memories/batch"),
    ("GET", "/v1/memories"),
    ("POST", "/v1/memories/search"),
    ("POST", "/v1/memories/{memory_id}/verify"),
    ("GET", "/v1/memories/{memory_id}/explain"),
    ("GET", "/v1/memories/{memory_id}"),
    ("GET", "/v1/due"),
    ("POST", "/v1/revocations"),
    ("POST", "/v1/revocations/dry-run"),
    ("GET", "/v1/revocations"),
    ("GET", "/v1/revocations/{revocation_id}"),
    ("GET", "/v1/revocations/{revocation_id}/readback"),
    ("POST", "/v1/policies/{policy}"),
    ("POST", "/v1/policies/{policy}/dry-run"),
    ("GET", "/v1/policies"),
    ("GET", "/v1/tenants"),
    ("POST", "/v1/erasures"),
    ("GET", "/v1/sinks"),
    ("POST", "/v1/sinks/{name}/test"),
    ("POST", "/v1/sinks/{name}/ack"),
    ("POST", "/v1/sinks/redeliver"),
    ("POST", "/memory/save"),
    ("GET", "/memory/load"),
    ("GET", "/healthz"),
    ("GET", "/v1/replay"),
    ("GET", "/v1/audit/verify"),
    ("GET", "/v1/audit/head"),
    ("GET", "/v1/stats"),
    ("GET", "/v1/events"),
]


def test_every_served_operation_is_fuzzed(quiet_server: Server) -> None:
    served = {(method, path) for method, path, _ in operations(quiet_server)}
    assert served == set(OPERATIONS), (sorted(served - set(OPERATIONS)), sorted(set(OPERATIONS) - served))


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda o: f"{o[0]} {o[1]}")
@settings(
    max_examples=max(5, EXAMPLES // len(OPERATIONS)),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_no_5xx_and_refusals_change_nothing(
    quiet_server: Server, operation: tuple[str, str], data: st.DataObject
) -> None:
    server = quiet_server
    components = spec_of(server).get("components", {}).get("schemas", {})
    method, path, op = next(o for o in operations(server) if o[:2] == operation)
    for param in op.get("parameters", []):
        if param["in"] == "path":
            path = path.replace("{" + param["name"] + "}", quote(data.draw(SCALAR) or "x", safe=""))
    params = {
        p["name"]: data.draw(SCALAR)
        for p in op.get("parameters", [])
        if p["in"] == "query" and data.draw(st.booleans())
    }
    who = data.draw(st.sampled_from(["agent", "agent2", "security", "auditor", None, "bogus", "latin1"]))
    body = data.draw(body_strategy(op, components))
    raw = data.draw(st.none() | st.binary(max_size=50))
    before = server.head()
    with server.client(who if who != "latin1" else None) as c:
        if who == "latin1":  # a key that is not ASCII is no key
            c.headers["x-api-key"] = "mw_\xe9t\xe9_x"
        if raw is not None and method == "POST":
            response = c.request(method, path, params=params, content=raw, headers={"content-type": "application/json"})
        else:
            response = c.request(method, path, params=params, json=body if method == "POST" else None)
    assert response.status_code < 500, (method, path, params, body, response.text)
    REACHED.setdefault(operation, set()).add(response.status_code)
    if response.status_code >= 400:
        assert server.head() == before, (method, path, response.status_code, response.text)
        if path.startswith(("/v1", "/memory")):
            answer = response.json()
            assert {"error", "field", "problem"} <= set(answer) and "detail" not in answer, response.text


def test_the_fuzzer_got_past_the_keys(quiet_server: Server) -> None:
    """Run after the fuzz above (file order): every operation was answered,
    and at least one with a success, so the fuzz got past the keys."""
    assert set(OPERATIONS) <= set(REACHED), sorted(set(OPERATIONS) - set(REACHED))
    assert any(code < 300 for codes in REACHED.values() for code in codes)
