"""How TieredMemoryStore reads LangGraph values: stored form, filters, namespace matches.

A value is kept in its memory's metadata as JSON; one holding an integer wider than 64
bits (which the metadata codec refuses, and LangGraph's ``InMemoryStore`` keeps) is kept
as JSON text instead. Filters follow LangGraph's SQL stores: a dotted key is a nested
path (``{"user.level": 3}`` matches ``{"user": {"level": 3}}``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson
from langgraph.store.base import MatchCondition

from persistence import InvalidInputError

_AS_TEXT = "value_json"  # metadata key of a value kept as JSON text
_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
_MISSING = object()


def stored_value(value: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata entries holding ``value``: ``{"value": ...}``, or the JSON text when
    orjson cannot carry it (integers beyond 64 bits); anything not JSON is refused."""
    try:
        orjson.dumps(value)
        return {"value": dict(value)}
    except TypeError as exc:
        try:
            return {_AS_TEXT: json.dumps(value, allow_nan=False)}
        except (TypeError, ValueError):
            raise InvalidInputError(
                f"value is not JSON ({exc}); use dict, list, str, int, float, bool and None"
            ) from None


def read_value(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The value kept by :func:`stored_value`."""
    text = metadata.get(_AS_TEXT)
    if isinstance(text, str):
        loaded = json.loads(text)
        return loaded if isinstance(loaded, dict) else {}
    value = metadata.get("value")
    return value if isinstance(value, dict) else {}


def matches(value: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """LangGraph's filter rules: exact match, nested objects, ``$eq``/``$ne``/``$gt``/
    ``$gte``/``$lt``/``$lte``; a dotted key is a path into nested objects."""
    return all(_compare(_at(value, key), wanted) for key, wanted in filter.items())


def _at(value: Mapping[str, Any], key: str) -> Any:
    """The value at a dotted path (``None`` when any step is missing); a key holding
    the dots itself is read first, so a flat ``{"a.b": 1}`` still matches."""
    if key in value:
        return value[key]
    here: Any = value
    for part in str(key).split("."):
        if not isinstance(here, Mapping) or part not in here:
            return None
        here = here[part]
    return here


def _compare(have: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(have, op, operand) for op, operand in wanted.items())
        return isinstance(have, dict) and all(_compare(have.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(have, list | tuple)
            and len(have) == len(wanted)
            and all(_compare(h, w) for h, w in zip(have, wanted, strict=True))
        )
    return bool(have == wanted)


def _operator(have: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(have == operand)
    if op == "$ne":
        return bool(have != operand)
    if op not in _OPERATORS:
        raise InvalidInputError(f"unsupported filter operator {op!r}; use one of {_OPERATORS}")
    if isinstance(have, str) and isinstance(operand, str):
        a: Any = have
        b: Any = operand
    else:
        try:
            a, b = float(have), float(operand)
        except (TypeError, ValueError):
            return False  # not comparable: no match
    return bool({"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op])


def namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """LangGraph's prefix/suffix match, ``*`` matching any one label."""
    path = condition.path
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise InvalidInputError(f"unknown namespace match type {condition.match_type!r}")
    return all(want == "*" or have == want for have, want in pairs)
