"""check_storable: what jsonb cannot hold is refused with the place named, whether the
compact JSON text shows it (the walk runs only then) or merely looks like it does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from workflow_runner.storable import MAX_NESTING, NotStorable, check_storable, compact_json


def _nested(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({"a": {"b": "nul \x00 inside"}}, "result.a.b: text holds a NUL"),
        ({"a": ["ok", "lone \ud800"]}, "result.a[1]: text holds a NUL or an unpaired surrogate"),
        ({"\x00key": 1}, "result (a key): text holds a NUL"),
        ({"a": {float("nan"): 1}}, "result is not JSON"),
        ({float("-inf"): 1}, "result is not JSON"),
        (_nested(MAX_NESTING + 1), f"nested deeper than {MAX_NESTING} levels"),
    ],
    ids=["nul", "surrogate", "nul-key", "nan-key", "inf-key", "too-deep"],
)
def test_refused_with_the_place_named(value: Any, named: str) -> None:
    with pytest.raises(NotStorable) as refused:
        check_storable(value, "result")
    assert named in str(refused.value)


@pytest.mark.parametrize(
    "value",
    [
        {"text": "a literal \\u0000, not a NUL"},
        {"NaN": 1, "Infinity": 2, "-Infinity": [3]},
        ["[" * 300, "{" * 300],
        _nested(MAX_NESTING),
        {"emoji": "\U0001f600", "accents": "àéî"},
        None,
        3.5,
    ],
    ids=["escaped-text", "nan-text-keys", "brackets-in-text", "deepest", "non-ascii", "null", "n"],
)
def test_stored_when_it_only_looks_suspect(value: Any) -> None:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert check_storable(value, "result") == len(text.encode("utf-8"))


def test_not_json_and_too_large_are_refused() -> None:
    with pytest.raises(NotStorable, match="result is not JSON"):
        check_storable({"s": {1, 2}}, "result")
    with pytest.raises(NotStorable, match="result is not JSON"):
        check_storable([float("nan")], "result")
    with pytest.raises(NotStorable, match="result is 12 bytes, over the 11-byte limit"):
        check_storable({"a": "1234"}, "result", max_bytes=11)
    assert check_storable({"a": "1234"}, "result", max_bytes=12) == 12


_VALUES = [
    {"n": 1, "ok": True, "none": None, "f": [0.1, -2.5e-300, 1e16], "big": 2**80},
    ["àéî \U0001f600", 'quote " backslash \\ tab \t', {"": {}}, []],
    {1: "int key", 2.5: "float key", False: "bool key", None: "null key"},
    "just text",
    7,
]


@pytest.mark.parametrize("value", _VALUES, ids=["mixed", "text", "keys", "str", "int"])
def test_compact_json_is_json_dumps_with_the_check_settings(value: Any) -> None:
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert compact_json(value) == expected


def _error_of(value: Any) -> str:
    with pytest.raises((TypeError, ValueError)) as refused:
        json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return f"{type(refused.value).__name__}: {refused.value}"


def test_compact_json_raises_what_json_dumps_raises() -> None:
    """The cached encoder has no circular check: a circular value must still be
    refused as circular (not as too deep), and every other refusal read the same."""
    circular: list[Any] = [1]
    circular.append({"again": circular})
    for value in (circular, {"s": {1, 2}}, [float("nan")], {"k": object()}):
        with pytest.raises((TypeError, ValueError)) as refused:
            compact_json(value)
        assert f"{type(refused.value).__name__}: {refused.value}" == _error_of(value)
    with pytest.raises(NotStorable, match="result is not JSON: Circular reference detected"):
        check_storable({"a": circular}, "result")
