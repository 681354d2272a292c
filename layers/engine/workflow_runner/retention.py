"""How long settled runs are kept before the purge deletes them (engine/purge.py).

A retention is a duration of the project's grammar (durations.py: "P30D", "PT12H",
"30d", "12h"), a timedelta, or "forever" (never purged). It is at least MIN_RETENTION: the
purge must never race the stages that still touch a run just after it settled (the
pending projection, a dispatcher finishing a delivery, an operator's redrive).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from .durations import DURATION_EXAMPLES, format_duration, parse_duration
from .errors import InvalidInput

__all__ = [
    "DEFAULT_RETENTION",
    "FOREVER",
    "MIN_RETENTION",
    "Retention",
    "default_retention_from_env",
    "describe_retention",
    "parse_retention",
]

FOREVER = "forever"
MIN_RETENTION = timedelta(hours=1)
DEFAULT_RETENTION = timedelta(days=30)
RETENTION_ENV = "RUN_RETENTION"

# None: kept forever.
Retention = timedelta | None


def parse_retention(value: object) -> Retention:
    """A retention value as a timedelta, or None for "forever".

    Args:
        value: a duration string ("P30D", "PT6H", "30d"), a timedelta, or "forever".

    Returns:
        The retention; None means the runs are never purged.

    Raises:
        InvalidInput: not a duration or "forever", or shorter than MIN_RETENTION (the
            message says which, with the value).
    """
    if value == FOREVER:
        return None
    if isinstance(value, timedelta):
        period = value
    elif isinstance(value, str):
        try:
            period = parse_duration(value)
        except InvalidInput:
            raise InvalidInput(
                f'{value!r} is not a retention: expected a duration ({DURATION_EXAMPLES}) or "'
                f'{FOREVER}"'
            ) from None
    else:
        raise InvalidInput(
            f"{value!r} is not a retention: expected a duration string ({DURATION_EXAMPLES}), "
            f'a timedelta, or "{FOREVER}"'
        )
    if period < MIN_RETENTION:
        raise InvalidInput(
            f"{value!r} is shorter than the minimum retention "
            f'{format_duration(MIN_RETENTION)} (use "{FOREVER}" to keep runs)'
        )
    return period


def describe_retention(retention: Retention) -> str:
    """A retention as its setting is written ("P30D", "forever")."""
    if retention is None:
        return FOREVER
    return format_duration(timedelta(seconds=int(retention.total_seconds())))


def default_retention_from_env(environ: Mapping[str, str]) -> Retention:
    """The deployment's default retention: RUN_RETENTION, else DEFAULT_RETENTION.

    Raises:
        InvalidInput: RUN_RETENTION is set to something that is not a retention.
    """
    raw = environ.get(RETENTION_ENV, "").strip()
    if not raw:
        return DEFAULT_RETENTION
    try:
        return parse_retention(raw)
    except InvalidInput as error:
        raise InvalidInput(f"{RETENTION_ENV}: {error}") from None
