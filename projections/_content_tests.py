"""Tests on a memory's content read as JSON, as the agent query takes them.

A content test names a place in the JSON value a memory's content holds
(``path``: object keys and array positions from the top) and what must be
true there. The engine makes them from a caller's ``where``
(``memwarden.engine``'s ``_content_filter``); each backend's view spells
them in its own SQL here, so they narrow the query's page in the statement
itself (and its ``LIMIT`` and ``OFFSET`` count only what passes), never in
Python after the gate.

Every test is false for a content that is not a JSON object (not JSON, a
list, erased): such a memory is not one the caller's ``where`` describes. Equality follows
Python's ``==`` on the decoded value, as LangGraph's ``InMemoryStore``
compares (``None`` matches a missing place too; ``True`` equals ``1``); an
object or array operand is compared as canonical JSON. Ordering compares
numbers (and booleans, as 0 and 1) with a number, strings with a string by
code point, and nothing with a NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from memwarden.events import canonical_json

# what ``op`` may be: equality, its negation, the orderings, and the two
# shape tests the engine adds for an object or array in a ``where``
OPS = ("eq", "ne", "gt", "gte", "lt", "lte", "object", "array")
ORDERINGS = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_INT64 = 2**63


class ContentTest(NamedTuple):
    """One test of the JSON value at ``path`` (str: an object's key, int:
    an array's position); ``operand``: what ``op`` compares with (for
    ``array``, its length; for ``object``, nothing)."""

    path: tuple[str | int, ...]
    op: str
    operand: Any = None


def _nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _composite(value: Any) -> bool:
    return isinstance(value, (dict, list, tuple))


# -- SQLite: the JSON1 functions over the stored text -----------------------------------------


def sqlite_path(path: Sequence[str | int]) -> str:
    """``path`` as a JSON1 path: every key quoted (a key holds no ``"``:
    the engine refuses one), so hyphens, leading digits and any script's
    letters name a key as written."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f'."{p}"' for p in path)


def _sqlite_number(value: Any) -> Any:
    # SQLite binds 64-bit integers; past them a number is compared as a double,
    # as SQLite holds a JSON integer of that size
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and not -_INT64 <= value < _INT64:
        return float(value)
    return value


def _sqlite_eq(path: str, operand: Any) -> tuple[str, list[Any]]:
    if operand is None:
        return "COALESCE(json_type(j, ?), 'null') = 'null'", [path]
    if isinstance(operand, str):
        return "(json_type(j, ?) = 'text' AND json_extract(j, ?) = ?)", [path, path, operand]
    if _composite(operand):
        sql = "(json_type(j, ?) IN ('object', 'array') AND json_extract(j, ?) = ?)"
        return sql, [path, path, canonical_json(operand)]
    if _nan(operand):
        return "0", []
    sql = "(json_type(j, ?) IN ('integer', 'real', 'true', 'false') AND json_extract(j, ?) = ?)"
    return sql, [path, path, _sqlite_number(operand)]


def sqlite_test(test: ContentTest) -> tuple[str, list[Any]]:
    """One test as a SQLite term over ``j`` (the content's JSON text, NULL
    when it is not JSON): true or false, never NULL."""
    path = sqlite_path(test.path)
    if test.op in ("eq", "ne"):
        sql, params = _sqlite_eq(path, test.operand)
        return (f"COALESCE({sql}, 0)" if test.op == "eq" else f"NOT COALESCE({sql}, 0)"), params
    if test.op == "object":
        return "COALESCE(json_type(j, ?) = 'object', 0)", [path]
    if test.op == "array":
        return "COALESCE(json_type(j, ?) = 'array' AND json_array_length(j, ?) = ?, 0)", [path, path, test.operand]
    compare = ORDERINGS[test.op]
    if _nan(test.operand):
        return "0", []
    if isinstance(test.operand, str):
        sql = f"COALESCE(json_type(j, ?) = 'text' AND json_extract(j, ?) {compare} ?, 0)"
        return sql, [path, path, test.operand]
    types = "('integer', 'real', 'true', 'false')"
    sql = f"COALESCE(json_type(j, ?) IN {types} AND json_extract(j, ?) {compare} ?, 0)"
    return sql, [path, path, _sqlite_number(test.operand)]


def sqlite_terms(tests: Sequence[ContentTest], content: str) -> tuple[str, list[Any]]:
    """Every test as one WHERE term over the stored ``content`` (bytes)."""
    terms, params = _each(tests, sqlite_test)
    text = f"CAST({content} AS TEXT)"
    sql = (
        "EXISTS (SELECT 1 FROM (SELECT CASE WHEN json_valid(x) THEN x END AS j "
        f"FROM (SELECT {text} AS x)) WHERE json_type(j) = 'object' AND {terms})"
    )
    return sql, params


# -- PostgreSQL: jsonb ------------------------------------------------------------------------

# the stored content (bytea) as jsonb, NULL when it is not JSON: a cast alone
# would fail the whole statement on one memory whose text is not JSON.
# Created where it is missing (a process opening a store whose schema exists
# takes no lock), under the log's head lock at install, as all the schema is.
JSONB_FUNCTION = """DO $$ BEGIN
    IF to_regprocedure('memwarden_jsonb(bytea)') IS NULL THEN
        CREATE FUNCTION memwarden_jsonb(content bytea) RETURNS jsonb
        LANGUAGE plpgsql IMMUTABLE PARALLEL UNSAFE AS $body$
        BEGIN
            RETURN convert_from(content, 'UTF8')::jsonb;
        EXCEPTION WHEN others THEN
            RETURN NULL;
        END $body$;
    END IF;
END $$"""

_PG_NUMERIC = (
    "(CASE jsonb_typeof(v) WHEN 'number' THEN CAST(v AS numeric) "
    "WHEN 'boolean' THEN CASE WHEN v = 'true'::jsonb THEN 1 ELSE 0 END END)"
)


def _pg_number(value: Any) -> str:
    # numeric takes a decimal's text, infinities included (PostgreSQL 14 on)
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float) and math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value) if isinstance(value, float) else str(value)


def _pg_eq(operand: Any) -> tuple[str, list[Any]]:
    if operand is None:
        return "(v IS NULL OR v = 'null'::jsonb)", []
    if isinstance(operand, str):
        return "v = to_jsonb(CAST(? AS text))", [operand]
    if _composite(operand):
        return "v = CAST(? AS jsonb)", [canonical_json(operand)]
    if _nan(operand):
        return "FALSE", []
    return f"{_PG_NUMERIC} = CAST(? AS numeric)", [_pg_number(operand)]


def _pg_condition(test: ContentTest) -> tuple[str, list[Any]]:
    """What ``test`` asks of ``v``, the value at its path (NULL where there is
    none): true or false, never NULL; every cast guarded by a CASE, since
    PostgreSQL does not promise to evaluate an AND's terms in order."""
    if test.op in ("eq", "ne"):
        sql, params = _pg_eq(test.operand)
        term = f"COALESCE({sql}, FALSE)"
        return (term if test.op == "eq" else f"NOT {term}"), params
    if test.op == "object":
        return "COALESCE(jsonb_typeof(v) = 'object', FALSE)", []
    if test.op == "array":
        return "(CASE WHEN jsonb_typeof(v) = 'array' THEN jsonb_array_length(v) = ? ELSE FALSE END)", [test.operand]
    compare = ORDERINGS[test.op]
    if _nan(test.operand):
        return "FALSE", []
    if isinstance(test.operand, str):
        sql = f"(CASE WHEN jsonb_typeof(v) = 'string' THEN (v #>> '{{}}') COLLATE \"C\" {compare} ? ELSE FALSE END)"
        return sql, [test.operand]
    return f"COALESCE({_PG_NUMERIC} {compare} CAST(? AS numeric), FALSE)", [_pg_number(test.operand)]


def postgres_test(test: ContentTest) -> tuple[str, list[Any]]:
    """One test as a PostgreSQL term over ``j`` (the content as jsonb): the
    value at its path read once, each step typed, so a key never reads an
    array's position nor a position an object's key."""
    steps = "".join(" -> CAST(? AS integer)" if isinstance(p, int) else " -> CAST(? AS text)" for p in test.path)
    condition, params = _pg_condition(test)
    # the condition comes first in the statement, so its marks do too
    return f"(SELECT {condition} FROM (SELECT j{steps} AS v) AS p)", [*params, *test.path]


def postgres_terms(tests: Sequence[ContentTest], content: str) -> tuple[str, list[Any]]:
    """Every test as one WHERE term over the stored ``content`` (bytea)."""
    terms, params = _each(tests, postgres_test)
    sql = (
        f"EXISTS (SELECT 1 FROM (SELECT memwarden_jsonb({content}) AS j) AS c "
        f"WHERE jsonb_typeof(j) = 'object' AND {terms})"
    )
    return sql, params


def _each(tests: Sequence[ContentTest], render: Any) -> tuple[str, list[Any]]:
    terms: list[str] = []
    params: list[Any] = []
    for test in tests:
        sql, args = render(test)
        terms.append(sql)
        params.extend(args)
    return " AND ".join(terms) or "TRUE", params


__all__ = ["JSONB_FUNCTION", "OPS", "ContentTest", "postgres_terms", "sqlite_terms"]
