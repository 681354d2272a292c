"""Definition-time checks of the steps' time arguments: durations (`for_`, `lookback`),
instants (`until`) and timeouts that take either (durations.py has the grammar)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ..durations import DURATION_EXAMPLES, is_duration, parse_duration, parse_instant
from ..errors import InvalidInput


def shown(value: Any) -> str:
    """`value` as a message quotes it: its repr, cut at 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_duration(value: Any, argument: str, instead: str | None) -> None:
    """Raises: ValueError, InvalidInput: `value` is no duration (`instead`: the argument
    that takes an instant, named when `value` is one)."""
    if isinstance(value, timedelta) and instead:  # a wait takes one; a lookback only text
        return
    if isinstance(value, str) and not is_duration(value) and instead:
        try:
            parse_instant(value)
        except InvalidInput:
            pass
        else:
            raise ValueError(
                f"{value!r} is an instant; {argument} takes a duration, {instead} an instant"
            )
    if not isinstance(value, str):
        raise ValueError(f"{shown(value)} is not a duration: expected {DURATION_EXAMPLES}")
    parse_duration(value)


def check_instant(value: Any) -> None:
    """Raises: ValueError: `value` is no instant with a time zone."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{value!r} has no time zone")
        return
    if isinstance(value, str) and is_duration(value):
        raise ValueError(f"{value!r} is a duration; until takes an instant, for_= a duration")
    if not isinstance(value, str):
        raise ValueError(
            f"{shown(value)} is not an ISO-8601 instant such as '2030-01-31T09:00:00Z'"
        )
    try:
        parse_instant(value)
    except InvalidInput:
        raise ValueError(
            f"{value!r} is not an ISO-8601 instant with an offset such as '2030-01-31T09:00:00Z'"
        ) from None


def check_duration_or_instant(value: Any) -> None:
    """Raises: ValueError: `value` is neither a duration nor an instant."""
    if isinstance(value, datetime):
        check_instant(value)
        return
    if isinstance(value, timedelta):
        return
    if isinstance(value, str):
        try:
            (parse_duration if is_duration(value) else parse_instant)(value)
            return
        except InvalidInput:
            pass
    raise ValueError(
        f"{shown(value)} is neither a duration ({DURATION_EXAMPLES}) nor an instant such "
        "as '2030-01-31T09:00:00Z'"
    )
