"""Durations and instants as a definition's check judges them (definition/checks.py
reports what they raise with the step's place)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ..durations import parse_duration, parse_instant
from ..errors import InvalidInput


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _duration(value: Any, argument: str, instead: str | None) -> None:
    if isinstance(value, timedelta) and instead:  # a wait takes one; a lookback only text
        return
    if isinstance(value, str) and not value.startswith("P") and instead:
        try:
            parse_instant(value)
        except InvalidInput:
            pass
        else:
            raise ValueError(
                f"{value!r} is an instant; {argument} takes a duration, {instead} an instant"
            )
    if not isinstance(value, str):
        raise ValueError(f"{_shown(value)} is not an ISO-8601 duration such as 'PT10M' or 'P3D'")
    try:
        parse_duration(value)
    except InvalidInput:
        raise ValueError(
            f"{value!r} is not an ISO-8601 duration such as 'PT10M' or 'P3D'"
        ) from None


def _instant(value: Any) -> None:
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{value!r} has no time zone")
        return
    if isinstance(value, str) and value.startswith("P"):
        raise ValueError(f"{value!r} is a duration; until takes an instant, for_= a duration")
    if not isinstance(value, str):
        raise ValueError(
            f"{_shown(value)} is not an ISO-8601 instant such as '2030-01-31T09:00:00Z'"
        )
    try:
        parse_instant(value)
    except InvalidInput:
        raise ValueError(
            f"{value!r} is not an ISO-8601 instant with an offset such as '2030-01-31T09:00:00Z'"
        ) from None


def _duration_or_instant(value: Any) -> None:
    if isinstance(value, datetime):
        _instant(value)
        return
    if isinstance(value, timedelta):
        return
    if isinstance(value, str):
        try:
            (parse_duration if value.startswith("P") else parse_instant)(value)
            return
        except InvalidInput:
            pass
    raise ValueError(
        f"{_shown(value)} is neither an ISO-8601 duration such as 'P3D' or 'PT12H' nor an "
        "instant such as '2030-01-31T09:00:00Z'"
    )
