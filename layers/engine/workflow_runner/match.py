"""EventMatch: a small, JSON-serialisable boolean filter over event payloads.

Build expressions with `eq`, `ne`, `gt`, `gte`, `lt`, `lte`, `in_`, `all_of` and `any_of`
(from `match_builders.py`, re-exported here); each returns the stored form, which looks
like::

    {"version": 1, "expr": {"kind": "and", "nodes": [
        {"kind": "atom", "path": ["order", "status"], "op": {"kind": "eq", "value": "paid"}},
        {"kind": "atom", "path": ["order", "total"], "op": {"kind": "gte", "value": 100}},
    ]}}

Expressions are validated when they are stored and evaluated for every candidate
event, so evaluation trusts nothing it has not checked and never recurses.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from workflow_runner.errors import InvalidEventMatch
from workflow_runner.match_builders import all_of, any_of, eq, gt, gte, in_, lt, lte, ne

__all__ = [
    "ANY_KEY",
    "MAX_DEPTH",
    "MAX_NODES",
    "SUPPORTED_VERSION",
    "all_of",
    "any_of",
    "eq",
    "equality_key",
    "evaluate_event_match",
    "gt",
    "gte",
    "in_",
    "inbox_keys",
    "lt",
    "lte",
    "matches_safely",
    "ne",
    "payload_keys",
    "validate_event_match",
]

SUPPORTED_VERSION: Final = 1
MAX_DEPTH: Final = 32
MAX_NODES: Final = 1000

_COMPARISONS: Final = frozenset({"eq", "ne", "gt", "gte", "lt", "lte"})
_ORDER_OPERATORS: Final[Mapping[str, Callable[[Any, Any], Any]]] = {
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}


class _Missing:
    """The value at a path that does not lead anywhere; distinct from JSON null."""

    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Final = _Missing()


def _describe(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    return type(value).__name__


def _invalid(location: str, problem: str) -> InvalidEventMatch:
    return InvalidEventMatch(f"EventMatch invalid at {location}: {problem}")


def _is_scalar(value: object) -> bool:
    if isinstance(value, float):
        # NaN and infinities have no JSON spelling, so they could not be stored.
        return math.isfinite(value)
    return value is None or isinstance(value, str | int)


def _check_version(match: object) -> Mapping[str, Any]:
    if not isinstance(match, Mapping):
        raise _invalid("(root)", f"expected an object, got {_describe(match)}")
    if "version" not in match:
        raise _invalid("version", "missing")
    version = match["version"]
    # type() rather than isinstance(): True would otherwise pass for 1.
    if type(version) is not int or version != SUPPORTED_VERSION:
        raise InvalidEventMatch(
            f"EventMatch version {_describe(version)} is not supported "
            f"(expected {SUPPORTED_VERSION})"
        )
    return match


def _check_keys(node: Mapping[str, Any], location: str, allowed: frozenset[str]) -> None:
    for key in node:
        if key not in allowed:
            raise _invalid(location, f"unknown key {_describe(key)}")
    for key in sorted(allowed):
        if key not in node:
            raise _invalid(location, f'missing key "{key}"')


def _kind_of(node: object, location: str) -> tuple[Mapping[str, Any], str]:
    if not isinstance(node, Mapping):
        raise _invalid(location, f"expected an object, got {_describe(node)}")
    kind = node.get("kind")
    if not isinstance(kind, str):
        raise _invalid(location, f'"kind" must be a string, got {_describe(kind)}')
    return node, kind


def validate_event_match(match: object) -> dict[str, Any]:
    """Check that ``match`` is a well-formed EventMatch expression.

    Args:
        match: The candidate expression, typically decoded from JSON.

    Returns:
        ``match`` itself, unchanged, when it is valid.

    Raises:
        InvalidEventMatch: If any part of the tree breaks the grammar; the message names
            the location, e.g. ``expr.nodes[1].op``.
    """
    if not isinstance(match, dict):
        raise _invalid("(root)", f"expected an object, got {_describe(match)}")
    checked = _check_version(match)
    _check_keys(checked, "(root)", frozenset({"version", "expr"}))
    node_count = 1
    # Explicit stack so that a hostile, deeply nested input cannot exhaust the
    # interpreter's recursion limit before the depth check rejects it.
    pending: list[tuple[object, str, int]] = [(checked["expr"], "expr", 1)]
    while pending:
        candidate, location, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise _invalid(location, f"expression is nested deeper than {MAX_DEPTH} levels")
        node, kind = _kind_of(candidate, location)
        if kind in ("and", "or"):
            _check_keys(node, location, frozenset({"kind", "nodes"}))
            children = node["nodes"]
            if not isinstance(children, list):
                raise _invalid(f"{location}.nodes", f"expected a list, got {_describe(children)}")
            # Counted before anything is queued, so an enormous list is refused up front.
            node_count += len(children)
            if node_count > MAX_NODES:
                raise _invalid(location, f"expression has more than {MAX_NODES} nodes")
            # Reversed so that errors are reported for the first offending child first.
            for index in range(len(children) - 1, -1, -1):
                pending.append((children[index], f"{location}.nodes[{index}]", depth + 1))
        elif kind == "atom":
            _check_keys(node, location, frozenset({"kind", "path", "op"}))
            _validate_path(node["path"], f"{location}.path")
            _validate_op(node["op"], f"{location}.op")
        else:
            raise _invalid(location, f"unknown expression kind {_describe(kind)}")
    return match


def _validate_path(path: object, location: str) -> None:
    if not isinstance(path, list):
        raise _invalid(location, f"expected a list of strings, got {_describe(path)}")
    if not path:
        raise _invalid(location, "must not be empty")
    for index, segment in enumerate(path):
        if not isinstance(segment, str):
            raise _invalid(f"{location}[{index}]", f"expected a string, got {_describe(segment)}")


def _validate_op(op: object, location: str) -> None:
    checked, kind = _kind_of(op, location)
    if kind in _COMPARISONS:
        _check_keys(checked, location, frozenset({"kind", "value"}))
        value = checked["value"]
        if not _is_scalar(value):
            raise _invalid(f"{location}.value", f"expected a JSON scalar, got {_describe(value)}")
    elif kind == "in":
        _check_keys(checked, location, frozenset({"kind", "values"}))
        values = checked["values"]
        if not isinstance(values, list):
            raise _invalid(f"{location}.values", f"expected a list, got {_describe(values)}")
        for index, value in enumerate(values):
            if not _is_scalar(value):
                raise _invalid(
                    f"{location}.values[{index}]", f"expected a JSON scalar, got {_describe(value)}"
                )
    else:
        raise _invalid(location, f"unknown op kind {_describe(kind)}")


@dataclass(slots=True)
class _Frame:
    """An ``and``/``or`` node part-way through evaluation."""

    kind: str
    nodes: list[Any]
    index: int
    location: str


def evaluate_event_match(match: Mapping[str, Any], payload: object) -> bool:
    """Decide whether ``payload`` satisfies the EventMatch expression ``match``.

    A path that leaves the nested objects (through a list, a scalar, or an absent key)
    yields "missing", which equals nothing, not even null: ``eq`` and ``in`` are false
    for it and ``ne`` is true. Booleans never equal numbers; ordering needs two numbers
    or two strings.

    Args:
        match: An expression, normally one that passed ``validate_event_match``.
        payload: The event payload, typically decoded JSON.

    Returns:
        True when the payload matches.

    Raises:
        InvalidEventMatch: If the version or a kind encountered is unknown, or a visited
            part of the tree is malformed.
    """
    checked = _check_version(match)
    if "expr" not in checked:
        raise _invalid("expr", "missing")
    candidate: object = checked["expr"]
    location = "expr"
    stack: list[_Frame] = []
    while True:
        node, kind = _kind_of(candidate, location)
        if kind == "atom":
            result = _evaluate_atom(node, payload, location)
        elif kind in ("and", "or"):
            children = node.get("nodes")
            if not isinstance(children, list):
                raise _invalid(f"{location}.nodes", f"expected a list, got {_describe(children)}")
            if children:
                # The children sit one level below this node, which sits at len(stack) + 1.
                # The limit also stops a self-referencing structure from looping forever.
                if len(stack) + 2 > MAX_DEPTH:
                    raise _invalid(
                        f"{location}.nodes[0]",
                        f"expression is nested deeper than {MAX_DEPTH} levels",
                    )
                stack.append(_Frame(kind, children, 0, location))
                candidate, location = children[0], f"{location}.nodes[0]"
                continue
            # An empty conjunction is vacuously true and an empty disjunction false.
            result = kind == "and"
        else:
            raise _invalid(location, f"unknown expression kind {_describe(kind)}")

        # Hand the result up until some ancestor still needs another child evaluated.
        while stack:
            frame = stack[-1]
            decided = result if frame.kind == "or" else not result
            if decided or frame.index + 1 == len(frame.nodes):
                stack.pop()
                continue
            frame.index += 1
            candidate = frame.nodes[frame.index]
            location = f"{frame.location}.nodes[{frame.index}]"
            break
        else:
            return result


def _resolve_path(path: object, payload: object, location: str) -> object:
    if not isinstance(path, list) or not path:
        raise _invalid(location, "path must be a non-empty list of strings")
    current = payload
    for segment in path:
        if not isinstance(segment, str):
            raise _invalid(location, "path must be a non-empty list of strings")
        if not isinstance(current, Mapping) or segment not in current:
            return _MISSING
        current = current[segment]
    return current


def _evaluate_atom(node: Mapping[str, Any], payload: object, location: str) -> bool:
    actual = _resolve_path(node.get("path"), payload, f"{location}.path")
    op_location = f"{location}.op"
    op, kind = _kind_of(node.get("op"), op_location)
    if kind == "in":
        values = op.get("values")
        if not isinstance(values, list):
            raise _invalid(f"{op_location}.values", f"expected a list, got {_describe(values)}")
        return any(_equal(actual, value) for value in values)
    if kind not in _COMPARISONS:
        raise _invalid(op_location, f"unknown op kind {_describe(kind)}")
    if "value" not in op:
        raise _invalid(op_location, 'missing key "value"')
    expected = op["value"]
    if kind == "eq":
        return _equal(actual, expected)
    if kind == "ne":
        return not _equal(actual, expected)
    return _ordered(kind, actual, expected)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _equal(actual: object, expected: object) -> bool:
    if actual is _MISSING:
        return False
    if isinstance(actual, bool) or isinstance(expected, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    if _is_number(actual) and _is_number(expected):
        return bool(actual == expected)
    if isinstance(actual, str) and isinstance(expected, str):
        return actual == expected
    return actual is None and expected is None


def _ordered(kind: str, actual: object, expected: object) -> bool:
    comparable = (_is_number(actual) and _is_number(expected)) or (
        isinstance(actual, str) and isinstance(expected, str)
    )
    # Mixed int/float comparison is exact in Python, and NaN compares false either way.
    return comparable and bool(_ORDER_OPERATORS[kind](actual, expected))


def matches_safely(match: Mapping[str, Any] | None, payload: object) -> bool:
    """Evaluate ``match`` against ``payload``, treating no expression as match-all.

    Args:
        match: A stored expression, or None for "every event matches".
        payload: The event payload.

    Returns:
        The evaluation result, or False when the expression cannot be evaluated.
    """
    if match is None:
        return True
    try:
        return evaluate_event_match(match, payload)
    except Exception:
        # A corrupt stored expression must not stop delivery of other events; the caller
        # sees False and logs it.
        return False


# --- equality keys ------------------------------------------------------------------
# A wait whose expression requires `path == value` can only be woken by an event whose
# payload has exactly that leaf. Storing that requirement as text next to the waiting row
# lets the wakeup look rows up by the keys an event offers instead of evaluating every
# waiting expression of the type (which made wakeups slow down with the number of waits).


# json.dumps with these options builds an encoder on every call; keys are written for
# every leaf of every stored event, so one encoder serves (the same text either way).
_encode_key = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _key(path: list[str], value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 1 and 1.0 are equal under eq, so they share a key
    return _encode_key([path, value])


def equality_key(match: Mapping[str, Any] | None) -> str | None:
    """The key of one `eq` atom the expression requires, or None when it requires none.

    Only atoms that must hold for any match count: the top-level atom itself, or a
    direct member of a top-level `and`.
    """
    if match is None:
        return None
    try:
        expr = match["expr"]
        nodes = [expr] if expr.get("kind") == "atom" else []
        if expr.get("kind") == "and":
            nodes = list(expr.get("nodes") or [])
        for node in nodes:
            op = node.get("op") or {}
            required = node.get("kind") == "atom" and op.get("kind") == "eq"
            if required and _is_scalar(op.get("value")):
                return _key(list(node["path"]), op["value"])
    except (AttributeError, KeyError, TypeError):
        return None
    return None


# Stored for an event with too many leaves to list: it may offer any key.
ANY_KEY: Final = "*"


def inbox_keys(payload: object) -> list[str]:
    """The keys an event offers, as its inbox row stores them for the look-back: every
    scalar leaf's key, or [ANY_KEY] when there are too many to list."""
    keys = payload_keys(payload)
    return [ANY_KEY] if keys is None else sorted(set(keys))


def payload_keys(payload: object, limit: int = 512) -> list[str] | None:
    """The keys of every scalar leaf reachable through objects, or None past `limit` leaves.

    None means "too many to enumerate": the caller then considers every waiting row.
    Each key is `_key`'s text, written piece by piece: the path's JSON strings once
    per object, the leaf's JSON text as the encoder writes it.
    """
    keys: list[str] = []
    # (the path's strings as JSON text, joined by commas; the value)
    stack: list[tuple[str, object]] = [("", payload)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, Mapping):
            prefix = f"{path}," if path else ""
            stack.extend((prefix + _json_string(str(k)), v) for k, v in value.items())
        elif path and (value is None or isinstance(value, str | bool | int | float)):
            keys.append(f"[[{path}],{_scalar_text(value)}]")
            if len(keys) > limit:
                return None
    return keys


_json_string = json.encoder.encode_basestring  # as the encoder writes a str (not ASCII-only)


def _scalar_text(value: str | bool | int | float | None) -> str:
    """A scalar leaf's JSON text, as `_encode_key` writes it in a key."""
    if isinstance(value, str):
        return _json_string(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        if value.is_integer():
            return int.__repr__(int(value))  # 1 and 1.0 share a key (_key)
        return _encode_key(value)  # NaN and the infinities as the encoder spells them
    return int.__repr__(value)
