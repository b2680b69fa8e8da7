"""A query's ``where``: conditions on a memory's content read as JSON, in
the language LangGraph's stores take as a search's ``filter``.

``where`` maps a key to a condition, every one of which must hold. A key
is a dotted path (``"user.access-level"``: key ``access-level`` of the
object under ``user``); a condition is

* a value (string, number, boolean, null): equal to it (null: also where
  there is nothing);
* an object without operators: an object there, each of its keys
  holding its condition (``{"meta": {"lang": "ko"}}``);
* a list: a list there of as many items, each holding its condition;
* an object of operators: ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``,
  ``$lte`` (the orderings compare numbers with a number, strings with a
  string).

They become ``ContentTest``s, which the store evaluates in the agent
query's own statement (``memwarden.projections._content_tests``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from memwarden.events import unstorable
from memwarden.projections import ContentTest

from ._errors import InvalidInput

OPERATORS = {"$eq": "eq", "$ne": "ne", "$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}
MAX_TESTS = 64  # a where's conditions, nested ones counted
MAX_DEPTH = 16  # keys and positions from the top of the content to a condition's place
MAX_KEY = 256  # characters of a key


def content_tests(where: Any) -> list[ContentTest]:
    """``where`` as content tests; ``InvalidInput`` naming ``where`` and the
    key for anything the language does not say."""
    if not isinstance(where, Mapping):
        raise InvalidInput("where", f"must be an object of conditions, not {type(where).__name__}")
    tests: list[ContentTest] = []
    for key, condition in where.items():
        _condition(tests, _path(key), condition, key)
    return tests


def _path(key: Any) -> tuple[str, ...]:
    if not isinstance(key, str) or not key:
        raise InvalidInput("where", f"a key must be a non-empty string, not {key!r}")
    parts = tuple(key.split("."))
    for part in parts:
        _check_key(part, key)
    return parts


def _check_key(part: Any, key: Any) -> None:
    if not isinstance(part, str) or not part:
        raise InvalidInput("where", f"key {key!r} has an empty part")
    if len(part) > MAX_KEY:
        raise InvalidInput("where", f"key {key!r} has a part longer than {MAX_KEY} characters")
    # a key is quoted in a JSON path: it holds no quote, and nothing a store refuses
    if '"' in part or any(ord(c) < 32 for c in part) or unstorable(part) is not None:
        raise InvalidInput("where", f"key {key!r} holds a quote or a control character")


def _condition(tests: list[ContentTest], path: tuple[str | int, ...], condition: Any, key: Any) -> None:
    if len(path) > MAX_DEPTH:
        raise InvalidInput("where", f"key {key!r} reaches deeper than {MAX_DEPTH} levels")
    if isinstance(condition, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in condition):
            for operator, operand in condition.items():
                _add(tests, _operator(path, operator, operand, key))
            return
        _add(tests, ContentTest(path, "object"))
        for inner, value in condition.items():
            _check_key(inner, key)
            _condition(tests, (*path, inner), value, key)
        return
    if isinstance(condition, (list, tuple)):
        _add(tests, ContentTest(path, "array", len(condition)))
        for position, value in enumerate(condition):
            _condition(tests, (*path, position), value, key)
        return
    _add(tests, ContentTest(path, "eq", _value(condition, key)))


def _operator(path: tuple[str | int, ...], operator: Any, operand: Any, key: Any) -> ContentTest:
    op = OPERATORS.get(operator) if isinstance(operator, str) else None
    if op is None:
        raise InvalidInput("where", f"key {key!r}: unsupported operator {operator!r} (use {', '.join(OPERATORS)})")
    if op in ("eq", "ne"):
        return ContentTest(path, op, _json(operand, key))
    if isinstance(operand, str):
        return ContentTest(path, op, _value(operand, key))
    if isinstance(operand, (int, float)):  # booleans too, as 0 and 1
        return ContentTest(path, op, operand)
    raise InvalidInput("where", f"key {key!r}: {operator} compares with a number or a string, not {operand!r}")


def _value(value: Any, key: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        # a NUL is kept (it is in nothing stored, so it matches nothing), a lone surrogate is not text
        if unstorable(value.replace("\x00", "")) is not None:
            raise InvalidInput("where", f"key {key!r}: its value is not valid Unicode text")
        return value
    raise InvalidInput("where", f"key {key!r}: a condition is a value, a list or an object, not {type(value).__name__}")


def _json(value: Any, key: Any, *, top: bool = True) -> Any:
    """An ``$eq`` or ``$ne`` operand: a value, or a list or object of
    values, compared as canonical JSON (which holds no NaN or infinity)."""
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise InvalidInput("where", f"key {key!r}: an object compared has a key that is not a string")
        return {_value(k, key): _json(v, key, top=False) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(v, key, top=False) for v in value]
    if not top and isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput("where", f"key {key!r}: a list or object compared holds {value}, which JSON does not")
    return _value(value, key)


def _add(tests: list[ContentTest], test: ContentTest) -> None:
    tests.append(test)
    if len(tests) > MAX_TESTS:
        raise InvalidInput("where", f"holds more than {MAX_TESTS} conditions")
