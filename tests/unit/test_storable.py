"""check_storable: what jsonb cannot hold is refused with the place named, whether the
compact JSON text shows it (the walk runs only then) or merely looks like it does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from workflow_runner.storable import MAX_NESTING, NotStorable, check_storable


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
