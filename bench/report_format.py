"""Formatting shared by the report's modules: numbers and Markdown tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# A target's comparison, as bench/run.py's TARGETS and the results' "target" strings
# write it ("<op> <bound>").
COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    ">=": lambda value, bound: value >= bound,
    "<=": lambda value, bound: value <= bound,
    "<": lambda value, bound: value < bound,
}


def meets(value: Any, target: str) -> bool | None:
    """Whether `value` meets `target` ("<op> <bound>", e.g. ">= 8.0"); None when the
    value is not a number (a run before the workload existed)."""
    op, bound = target.split()
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return COMPARISONS[op](value, float(bound))


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return lines
