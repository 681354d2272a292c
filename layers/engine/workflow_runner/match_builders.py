"""Builders of EventMatch expressions, re-exported by `workflow_runner.match`:

    from workflow_runner.match import eq, gte, in_, all_of

    eq("orderId", Event.payload["orderId"])            # the awaited event's orderId equals ours
    all_of(eq("order.status", "paid"), gte("order.total", 100))

Each returns exactly the EventMatch the engine stores (`{"version": 1, "expr": ...}`), so
the raw dictionaries and these builders mix freely. A path is dotted text ("order.id")
or a list of keys (["order", "id"], for keys that contain a dot). A value may be a
declarative reference (`workflow_runner.refs`), replaced by what it points to when the
wait step runs, before the expression is validated and stored.

Pure: builds dictionaries, never evaluates them (that is `match.py`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import InvalidEventMatch
from .refs import Ref

__all__ = [
    "all_of",
    "any_of",
    "describe_match",
    "eq",
    "gt",
    "gte",
    "in_",
    "lt",
    "lte",
    "ne",
]

EventMatch = dict[str, Any]
_VERSION = 1


def _path(path: str | Sequence[str], builder: str) -> list[str]:
    if isinstance(path, str):
        segments = path.split(".")
    elif isinstance(path, Sequence):
        segments = list(path)
    else:
        raise InvalidEventMatch(f"{builder}: path must be dotted text or a list of keys")
    if not segments or not all(isinstance(s, str) and s for s in segments):
        raise InvalidEventMatch(
            f"{builder}: path {path!r} must be non-empty keys, e.g. 'order.id' or ['order', 'id']"
        )
    return segments


def _atom(kind: str, path: str | Sequence[str], value: Any) -> EventMatch:
    op: dict[str, Any] = {"kind": kind, "value": value}
    return {"version": _VERSION, "expr": {"kind": "atom", "path": _path(path, kind), "op": op}}


def eq(path: str | Sequence[str], value: Any) -> EventMatch:
    """The field at `path` equals `value` (a JSON scalar or a reference); a missing field
    equals nothing, not even None.

    Args:
        path: "order.id" or ["order", "id"].
        value: str, int, float, bool, None, or a reference such as Event.payload["id"].

    Returns:
        The EventMatch `{"version": 1, "expr": {"kind": "atom", ...}}`.

    Raises:
        InvalidEventMatch: the path is empty or not text / a list of keys.
    """
    return _atom("eq", path, value)


def ne(path: str | Sequence[str], value: Any) -> EventMatch:
    """The field at `path` is missing or differs from `value` (see `eq`)."""
    return _atom("ne", path, value)


def gt(path: str | Sequence[str], value: Any) -> EventMatch:
    """The field at `path` is greater than `value` (two numbers or two strings)."""
    return _atom("gt", path, value)


def gte(path: str | Sequence[str], value: Any) -> EventMatch:
    """The field at `path` is at least `value` (two numbers or two strings)."""
    return _atom("gte", path, value)


def lt(path: str | Sequence[str], value: Any) -> EventMatch:
    """The field at `path` is less than `value` (two numbers or two strings)."""
    return _atom("lt", path, value)


def lte(path: str | Sequence[str], value: Any) -> EventMatch:
    """The field at `path` is at most `value` (two numbers or two strings)."""
    return _atom("lte", path, value)


def in_(path: str | Sequence[str], values: Sequence[Any] | Ref) -> EventMatch:
    """The field at `path` equals one of `values` (a list of scalars, or a reference to one).

    Raises:
        InvalidEventMatch: `values` is text or a mapping rather than a list.
    """
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, (Sequence, Ref)):
        raise InvalidEventMatch(f"in_: values must be a list, got {type(values).__name__}")
    listed: Any = values if isinstance(values, Ref) else list(values)
    return {
        "version": _VERSION,
        "expr": {
            "kind": "atom",
            "path": _path(path, "in_"),
            "op": {"kind": "in", "values": listed},
        },
    }


def _combine(kind: str, builder: str, matches: Sequence[Mapping[str, Any]]) -> EventMatch:
    nodes = []
    for index, match in enumerate(matches):
        if not isinstance(match, Mapping) or "expr" not in match:
            raise InvalidEventMatch(
                f"{builder}: argument {index + 1} is not an EventMatch (build it with eq(), "
                "in_(), ... or write {'version': 1, 'expr': ...})"
            )
        nodes.append(match["expr"])
    return {"version": _VERSION, "expr": {"kind": kind, "nodes": nodes}}


def all_of(*matches: Mapping[str, Any]) -> EventMatch:
    """Every one of `matches` holds (none at all: every event matches).

    Raises:
        InvalidEventMatch: an argument is not an EventMatch.
    """
    return _combine("and", "all_of", matches)


def any_of(*matches: Mapping[str, Any]) -> EventMatch:
    """At least one of `matches` holds (none at all: no event matches).

    Raises:
        InvalidEventMatch: an argument is not an EventMatch.
    """
    return _combine("or", "any_of", matches)


_SYMBOLS = {"eq": "==", "ne": "!=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def _value_text(value: Any) -> str:
    if isinstance(value, Ref):
        return value.text
    if isinstance(value, list):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    return json.dumps(value, default=repr)


def _expr_text(expr: Any, depth: int = 0) -> str:
    if not isinstance(expr, Mapping) or depth > 8:
        return "…"
    kind = expr.get("kind")
    if kind in ("and", "or"):
        nodes = expr.get("nodes") or []
        if not nodes:
            return "any event" if kind == "and" else "no event"
        parts = [_expr_text(node, depth + 1) for node in nodes]
        joined = f" {kind} ".join(parts)
        return f"({joined})" if depth and len(parts) > 1 else joined
    if kind == "atom":
        path = ".".join(str(p) for p in expr.get("path") or [])
        op = expr.get("op") or {}
        if op.get("kind") == "in":
            return f"{path} in {_value_text(op.get('values'))}"
        symbol = _SYMBOLS.get(str(op.get("kind")), str(op.get("kind")))
        return f"{path} {symbol} {_value_text(op.get('value'))}"
    return "…"


def describe_match(match: Any) -> str:
    """A match as one line of text, e.g. `orderId == event.payload.orderId`, for
    `wfr graph` (anything that is not a static EventMatch reads "(computed)")."""
    if isinstance(match, Ref):
        return match.text
    if not isinstance(match, Mapping) or "expr" not in match:
        return "(computed)"
    return _expr_text(match["expr"])
