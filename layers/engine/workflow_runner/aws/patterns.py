"""An EventBridge event-pattern matcher for the subset of the pattern language the
template uses, so tests and the local runtime route events exactly as the deployed
rules would (with the patterns parsed from template.yaml).

Supported: nested objects; lists of alternatives; exact strings, numbers, booleans and
null; ``{"prefix": s}``, ``{"suffix": s}``, ``{"anything-but": [values] | value |
{"prefix": s}}``, ``{"exists": bool}``, ``{"equals-ignore-case": s}``, and
``{"numeric": [op, n, ...]}``. Anything else raises, so a pattern the matcher does
not understand can never silently match.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidInput

_MISSING = object()


class UnsupportedPattern(InvalidInput, ValueError):
    """The pattern uses a construct this matcher does not implement."""


def matches(pattern: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    """True when ``event`` (an EventBridge event as a dict) matches ``pattern``.

    Raises:
        UnsupportedPattern: the pattern is malformed or uses an unsupported operator.
    """
    if not isinstance(pattern, Mapping):
        raise UnsupportedPattern(f"a pattern must be an object, got {type(pattern).__name__}")
    for key, rule in pattern.items():
        if key.startswith("$"):
            raise UnsupportedPattern(f"{key} is not supported")
        value = event.get(key, _MISSING) if isinstance(event, Mapping) else _MISSING
        if isinstance(rule, Mapping):
            if value is _MISSING or not isinstance(value, Mapping):
                return False
            if not matches(rule, value):
                return False
        elif isinstance(rule, list):
            if not _field_matches(rule, value):
                return False
        else:
            raise UnsupportedPattern(f"{key}: a pattern field must be a list or an object")
    return True


def _field_matches(alternatives: list[Any], value: Any) -> bool:
    # An array value matches when any of its elements does.
    values = value if isinstance(value, list) else [value]
    exists_rules = [r for r in alternatives if isinstance(r, Mapping) and "exists" in r]
    for rule in exists_rules:
        if bool(rule["exists"]) == (value is not _MISSING):
            return True
    for rule in alternatives:
        if isinstance(rule, Mapping) and "exists" in rule:
            continue
        if any(v is not _MISSING and _matches_one(rule, v) for v in values):
            return True
    return False


def _same(rule: Any, value: Any) -> bool:
    if isinstance(rule, bool) or isinstance(value, bool):
        return rule is value
    return bool(rule == value)


def _matches_one(rule: Any, value: Any) -> bool:
    if not isinstance(rule, Mapping):
        if isinstance(rule, (str, int, float, bool)) or rule is None:
            return _same(rule, value)
        raise UnsupportedPattern(f"unsupported pattern value {rule!r}")
    if len(rule) != 1:
        raise UnsupportedPattern(f"a matcher object has exactly one operator: {dict(rule)}")
    op, arg = next(iter(rule.items()))
    if op == "prefix":
        return isinstance(value, str) and isinstance(arg, str) and value.startswith(arg)
    if op == "suffix":
        return isinstance(value, str) and isinstance(arg, str) and value.endswith(arg)
    if op == "equals-ignore-case":
        return isinstance(value, str) and isinstance(arg, str) and value.lower() == arg.lower()
    if op == "anything-but":
        if isinstance(arg, Mapping):
            return not _matches_one(arg, value)
        excluded = arg if isinstance(arg, list) else [arg]
        return not any(_same(x, value) for x in excluded)
    if op == "numeric":
        return _numeric(arg, value)
    raise UnsupportedPattern(f"operator {op!r} is not supported")


_NUMERIC_OPS = {
    "=": lambda a, b: a == b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _numeric(arg: Any, value: Any) -> bool:
    if not isinstance(arg, list) or len(arg) % 2:
        raise UnsupportedPattern(f"numeric takes [op, n, ...], got {arg!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    for op, bound in zip(arg[::2], arg[1::2], strict=True):
        if op not in _NUMERIC_OPS:
            raise UnsupportedPattern(f"numeric operator {op!r} is not supported")
        if not _NUMERIC_OPS[op](value, bound):
            return False
    return True
