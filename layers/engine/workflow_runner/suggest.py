"""Closest names, for messages that say what was meant: an unknown workflow, task key,
event type or awaits name gets "did you mean ...?" and the names there are."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    """The names of `known` closest to `name`, best first (none when nothing is close)."""
    return difflib.get_close_matches(name, list(known), n=n)


def did_you_mean(name: str, known: Iterable[str], n: int = 3) -> str:
    """`"; did you mean 'a' or 'b'?"`, or "" when nothing in `known` is close to `name`."""
    close = closest(name, known, n)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def listing(names: Iterable[str]) -> str:
    """Names quoted and comma-separated, in order (`'a', 'b'`), or `none`."""
    shown = [repr(name) for name in names]
    return ", ".join(shown) if shown else "none"
