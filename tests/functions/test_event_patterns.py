"""The EventBridge pattern matcher used to route events with template.yaml's rules."""

from __future__ import annotations

from typing import Any

import pytest
from workflow_runner.aws.patterns import UnsupportedPattern, matches

EVENT: dict[str, Any] = {
    "source": "com.example.shop",
    "detail-type": "order.placed",
    "detail": {"total": 42.5, "tags": ["new", "vip"], "flag": True, "note": None},
}


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ({"source": ["com.example.shop"]}, True),
        ({"source": ["com.example.other"]}, False),
        ({"source": ["a", "com.example.shop"]}, True),
        ({"source": [{"anything-but": ["workflow-runner"]}]}, True),
        ({"source": [{"anything-but": ["com.example.shop"]}]}, False),
        ({"source": [{"anything-but": "com.example.shop"}]}, False),
        ({"source": [{"anything-but": {"prefix": "com."}}]}, False),
        ({"detail-type": [{"prefix": "order."}]}, True),
        ({"detail-type": [{"prefix": "user."}]}, False),
        ({"detail-type": [{"suffix": ".placed"}]}, True),
        ({"detail-type": [{"equals-ignore-case": "ORDER.PLACED"}]}, True),
        ({"detail": {"total": [{"numeric": [">", 40, "<=", 42.5]}]}}, True),
        ({"detail": {"total": [{"numeric": [">", 50]}]}}, False),
        ({"detail": {"tags": ["vip"]}}, True),
        ({"detail": {"tags": ["gold"]}}, False),
        ({"detail": {"flag": [True]}}, True),
        ({"detail": {"flag": [1]}}, False),
        ({"detail": {"note": [None]}}, True),
        ({"detail": {"missing": [{"exists": False}]}}, True),
        ({"detail": {"missing": [{"exists": True}]}}, False),
        ({"detail": {"total": [{"exists": True}]}}, True),
        ({"detail": {"nested": {"x": ["1"]}}}, False),
        ({"source": ["com.example.shop"], "detail-type": ["user.signed-up"]}, False),
        ({}, True),
    ],
)
def test_pattern_matching(pattern: dict[str, Any], expected: bool) -> None:
    assert matches(pattern, EVENT) is expected


def test_missing_field_never_matches_anything_but() -> None:
    assert not matches({"detail": {"absent": [{"anything-but": ["x"]}]}}, EVENT)


@pytest.mark.parametrize(
    "pattern",
    [
        {"source": "com.example.shop"},
        {"source": [{"wildcard": "com.*"}]},
        {"$or": [{"source": ["x"]}]},
        {"source": [{"prefix": "a", "suffix": "b"}]},
        {"detail": {"total": [{"numeric": [">"]}]}},
    ],
)
def test_unsupported_or_malformed_patterns_raise(pattern: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedPattern):
        matches(pattern, EVENT)
