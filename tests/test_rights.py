"""Rights decided in one place (``engine/_rights.py``): every operation
names its caller, with no default; each role may do exactly what the table
says, on every face alike; and no face checks a role or narrows a tenant
itself."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest
from memwarden.engine import OPERATOR, SYSTEM, Forbidden, KeyStore, Principal, Warden, _rights
from memwarden.engine._rights import RIGHTS
from memwarden.engine._staff import StaffOperations

from .conftest import agent_key, save_memory

FACES = Path(__file__).resolve().parents[1] / "engine" / "faces"
# every operation of the Warden, and the kind of right it needs
OPERATIONS = {
    "save": "save",
    "save_many": "save",
    "cache_put": "save",
    "memory_save": "save",
    "get": "read",
    "query": "read",
    "search_ids": "read",
    "cache_get": "read",
    "memory_load": "read",
    "due": "read",
    "explain": "read",
    "policies": "read",
    "verify": "verify",
    "verify_due": "verify",
    "revoke": "revoke",
    "preview_revocation": "revoke",
    "erase": "erase",
    "set_policy": "set_policy",
    "change_policy": "set_policy",
    "preview_policy": "set_policy",
    "revocation": "review",
    "revocations": "review",
    "replay": "review",
    "replay_stream": "review",
    "check_as_of": "review",
    "check_projections": "review",
    "audit_verify": "review",
    "audit_head": "review",
    "rebuild": "operate",
    "export": "operate",
    "import_log": "operate",
    "import_records": "operate",
    "migrate": "operate",
    "backup": "operate",
    "reapply": "operate",
    "reapply_erasures": "operate",
}
KEY = {
    "agent": agent_key("acme"),
    "security": Principal("s", "security"),
    "auditor": Principal("a", "auditor"),
    "operator": OPERATOR,
    "system": SYSTEM,
}


class Asked(Exception):
    """What ``authorize`` was asked for, raised in its place."""


def _positional(method: Any) -> list[None]:
    """A placeholder for each positional parameter of ``method`` (after ``self``)."""
    parameters = list(inspect.signature(method).parameters.values())[1:]
    return [None for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD and p.default is p.empty]


def test_every_operation_is_one_kind_of_right_and_takes_a_caller_with_no_default(
    warden: Warden, monkeypatch: pytest.MonkeyPatch
) -> None:
    def asked(caller: Principal, action: str) -> None:
        raise Asked(action)

    # each method passes on to its operation, which asks for its right before anything else
    monkeypatch.setattr(_rights, "authorize", asked)
    for name, action in OPERATIONS.items():
        method = getattr(Warden, name)
        caller = inspect.signature(method).parameters["caller"]
        assert caller.default is inspect.Parameter.empty and caller.kind is inspect.Parameter.KEYWORD_ONLY, name
        with pytest.raises(Asked) as raised:
            getattr(warden, name)(*_positional(method), caller=OPERATOR, **_required_keywords(method))
        assert raised.value.args == (action,), name
    parts = (Warden, StaffOperations)  # the Warden's own methods and staff's
    public = {n for part in parts for n, v in vars(part).items() if callable(v) and not n.startswith("_")}
    # the rest take a caller too, or are not operations on memories (the head's seq, the scan of a file)
    for name in public - set(OPERATIONS) - {"head_seq"}:
        assert "caller" in inspect.signature(getattr(Warden, name)).parameters, name


def _required_keywords(method: Any) -> dict[str, None]:
    parameters = inspect.signature(method).parameters.values()
    return {
        p.name: None for p in parameters if p.kind is p.KEYWORD_ONLY and p.default is p.empty and p.name != "caller"
    }


def test_an_operation_without_its_caller_is_refused_before_it_does_anything(warden: Warden) -> None:
    for name in OPERATIONS:
        method = getattr(Warden, name)
        with pytest.raises(TypeError, match="caller"):
            getattr(warden, name)(*_positional(method))
    with pytest.raises(TypeError, match="Principal"):
        warden.get("x", caller=object())  # type: ignore[arg-type]
    assert warden.head_seq() == 0


@pytest.mark.parametrize("role", sorted(KEY))
def test_each_role_may_do_what_the_table_says_and_nothing_else(warden: Warden, role: str) -> None:
    save_memory(warden, "m1")
    who = KEY[role]
    may = {
        "save": lambda: save_memory(warden, "new", caller=who),
        "read": lambda: warden.get("m1", caller=who),
        "verify": lambda: warden.verify("m1", caller=who),
        "revoke": lambda: warden.preview_revocation({"tenant": "acme"}, caller=who),
        "erase": lambda: warden.erase(memory_id="m1", reason="asked", caller=who),
        "set_policy": lambda: warden.set_policy("other", 2, caller=who),
        "review": lambda: warden.audit_head(caller=who),
        "operate": lambda: KeyStore(warden).list(caller=who),
    }
    for action, attempt in may.items():
        if role in RIGHTS[action]:
            attempt()
        else:
            with pytest.raises(Forbidden, match=f"the {role} role may not do this"):
                attempt()


def test_no_face_checks_a_role_or_narrows_a_tenant_itself() -> None:
    """The faces say who asks; ``_rights`` decides. A face reading a
    principal's role, tenants, agent or access (or an ``allows`` check)
    would be a second place that decides."""
    decided_elsewhere = {"role", "tenants", "access", "allows", "allows_tenant", "reads_tenant", "is_staff"}
    found = []
    for path in sorted(FACES.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}  # warden.tenants(...)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in decided_elsewhere and id(node) not in called:
                found.append(f"{path.name}:{node.lineno} .{node.attr}")
            if isinstance(node, ast.Compare):
                for value in [node.left, *node.comparators]:
                    if isinstance(value, ast.Constant) and value.value in ("agent", "security", "auditor"):
                        found.append(f"{path.name}:{node.lineno} compares with {value.value!r}")
    assert found == []
    templates = sorted((FACES / "console" / "templates").glob("*.html"))
    assert templates, "the console's templates moved: this test must find them again"
    for template in templates:
        text = template.read_text(encoding="utf-8")
        assert "who.role ==" not in text and "who.role in" not in text, template.name
