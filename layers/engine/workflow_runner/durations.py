"""Durations and ISO-8601 instants: parsing, formatting, and resolving wake-up times.

One duration grammar for everything a person types — a step's `for_`, `timeout` and
`lookback`, a RetryPolicy's `base` and `cap`, a retention, `wfr --every/--since/
--older-than`, the test kit's `advance` — in two spellings:

- ISO-8601, deliberately small: whole numbers of years, months, days, hours, minutes
  and seconds (`PT1H`, `P3D`, `P1Y2M3DT4H5M6S`); calendar units are fixed lengths
  (Y = 365 d, M = 30 d), not calendar arithmetic, so every stored value means the same
  thing to every reader;
- a number and a unit, largest unit first (`90s`, `30m`, `6h`, `3d`, `1w`, `1h30m`).

Durations are part of stored facts and fingerprints, and readers of an earlier release
know only ISO-8601: a definition keeps an ISO text exactly as written and stores the
short spelling as its ISO equivalent (`canonical_duration`).
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime, timedelta, timezone

from workflow_runner.errors import InvalidDuration

__all__ = [
    "DURATION_EXAMPLES",
    "canonical_duration",
    "format_duration",
    "format_instant",
    "is_duration",
    "parse_duration",
    "parse_instant",
    "resolve_wake_at",
]

_DAYS_PER_YEAR = 365
_DAYS_PER_MONTH = 30

# [0-9] rather than \d: \d would also accept non-ASCII digits such as "٣".
_DURATION_RE = re.compile(
    r"P(?:(?P<years>[0-9]+)Y)?(?:(?P<months>[0-9]+)M)?(?:(?P<days>[0-9]+)D)?"
    r"(?:T(?P<time>(?:(?P<hours>[0-9]+)H)?(?:(?P<minutes>[0-9]+)M)?(?:(?P<seconds>[0-9]+)S)?))?"
)

# The spelling people type on a command line: a number and a unit, largest first.
_SHORT_RE = re.compile(
    r"(?:(?P<weeks>[0-9]+)w)?(?:(?P<days>[0-9]+)d)?(?:(?P<hours>[0-9]+)h)?"
    r"(?:(?P<minutes>[0-9]+)m)?(?:(?P<seconds>[0-9]+)s)?"
)

# What every message about a bad duration offers instead.
DURATION_EXAMPLES = (
    'ISO-8601 such as "PT1H" or "P3D", or a number and a unit such as "90s", "30m", "6h", '
    '"3d" or "1w"'
)

_INSTANT_RE = re.compile(
    r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})"
    r"T(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2})"
    r"(?::(?P<second>[0-9]{2})(?:\.(?P<fraction>[0-9]{1,9}))?)?"
    r"(?:(?P<zulu>Z)|(?P<sign>[+-])(?P<off_hour>[0-9]{2}):?(?P<off_minute>[0-9]{2}))"
)


def _duration_error(text: object) -> InvalidDuration:
    shown = text if isinstance(text, str) else repr(text)
    return InvalidDuration(f'Invalid duration "{shown}" — expected {DURATION_EXAMPLES}')


def _instant_error(text: object) -> InvalidDuration:
    shown = text if isinstance(text, str) else repr(text)
    return InvalidDuration(
        f'Invalid ISO-8601 instant "{shown}" — expected a timestamp with an offset like '
        '"2026-01-31T09:00:00Z"'
    )


def parse_duration(text: str) -> timedelta:
    """Parse a duration: ISO-8601 (``PT1H``, ``P1D``, ``P1Y2M3DT4H5M6S``) or a number and
    a unit (``90s``, ``30m``, ``6h``, ``3d``, ``1w``; combined largest first, ``1h30m``).

    Years count as 365 days and months as 30 days. ISO weeks, fractions, signs,
    lowercase ISO letters, uppercase units and whitespace are rejected, as are ``P``,
    ``PT`` and a trailing ``T``.

    Args:
        text: The duration text.

    Returns:
        The duration as a non-negative timedelta.

    Raises:
        InvalidDuration: If ``text`` is not a string or not a duration of that form; the
            message shows both spellings.
    """
    if not isinstance(text, str):
        raise _duration_error(text)
    return _parse_text(text)


# A workflow spells few durations and parses each on every pass that waits, so the
# parsed ones are kept (timedelta is immutable; a failure is not kept, it raises again).
@functools.lru_cache(maxsize=1024)
def _parse_text(text: str) -> timedelta:
    if not text.startswith("P"):
        return _parse_short(text)
    found = _DURATION_RE.fullmatch(text)
    if found is None:
        raise _duration_error(text)
    parts = found.groupdict()
    time_part = parts.pop("time")
    # The regex alone would accept "P", "PT" and "P1DT"; ISO-8601 requires at least one
    # component overall and at least one after a "T".
    if time_part == "" or all(value is None for value in parts.values()):
        raise _duration_error(text)
    numbers = {name: int(value) if value is not None else 0 for name, value in parts.items()}
    try:
        return timedelta(
            days=numbers["years"] * _DAYS_PER_YEAR
            + numbers["months"] * _DAYS_PER_MONTH
            + numbers["days"],
            hours=numbers["hours"],
            minutes=numbers["minutes"],
            seconds=numbers["seconds"],
        )
    except OverflowError:
        raise _duration_error(text) from None


def _parse_short(text: str) -> timedelta:
    found = _SHORT_RE.fullmatch(text)
    if found is None or not text:
        raise _duration_error(text)
    numbers = {name: int(value or 0) for name, value in found.groupdict().items()}
    try:
        return timedelta(**numbers)
    except OverflowError:
        raise _duration_error(text) from None


def is_duration(text: str) -> bool:
    """Whether `text` is spelt as a duration (ISO-8601 or a number and a unit), to tell a
    duration from an instant where an argument takes either."""
    return text.startswith("P") or (bool(text) and _SHORT_RE.fullmatch(text) is not None)


def canonical_duration(text: str) -> str:
    """The duration as a definition stores it: ISO-8601 text exactly as written (stored
    facts and fingerprints stay what they were), the short spelling as its ISO-8601
    equivalent (``"6h"`` -> ``"PT6H"``, ``"90s"`` -> ``"PT1M30S"``).

    Raises:
        InvalidDuration: not a duration.
    """
    delta = parse_duration(text)
    return text if text.startswith("P") else format_duration(delta)


def _is_canonical(text: str) -> bool:
    """`YYYY-MM-DDTHH:MM:SS.ffffffZ`, the shape format_instant writes."""
    return (
        len(text) == 27
        and text[26] == "Z"
        and text[19] == "."
        and text[10] == "T"
        and text[4] == text[7] == "-"
        and text[13] == text[16] == ":"
        and text[20:26].isdigit()
        and text[:4].isdigit()
    )


def parse_instant(text: str) -> datetime:
    """Parse an ISO-8601 timestamp that carries ``Z`` or an explicit UTC offset.

    Seconds may be omitted; a fraction of up to nine digits is truncated to microseconds.

    Args:
        text: The timestamp, e.g. ``2026-11-29T10:00:00Z`` or ``2026-11-29T10:00:00.1+02:00``.

    Returns:
        The same instant as a timezone-aware datetime in UTC.

    Raises:
        InvalidDuration: If ``text`` is not a string, has no offset, or is not a valid date
            and time.
    """
    if not isinstance(text, str):
        raise _instant_error(text)
    if _is_canonical(text):
        # What format_instant writes (every instant the engine stores): the C parser is
        # a tenth of the cost, and a resume reads several.
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            pass  # not a real date: the general path below says what is wrong
    found = _INSTANT_RE.fullmatch(text)
    if found is None:
        raise _instant_error(text)
    fields = found.groupdict()
    fraction = (fields["fraction"] or "").ljust(6, "0")[:6]
    try:
        zone: timezone = UTC
        if not fields["zulu"]:
            off_hour, off_minute = int(fields["off_hour"]), int(fields["off_minute"])
            if off_minute >= 60:
                raise ValueError("offset minutes out of range")
            offset = timedelta(hours=off_hour, minutes=off_minute)
            zone = timezone(-offset if fields["sign"] == "-" else offset)
        local = datetime(
            int(fields["year"]),
            int(fields["month"]),
            int(fields["day"]),
            int(fields["hour"]),
            int(fields["minute"]),
            int(fields["second"] or 0),
            int(fraction),
            tzinfo=zone,
        )
        return local.astimezone(UTC)
    except (ValueError, OverflowError):
        # Out-of-range parts (month 13, offset +24:00) and instants that fall outside
        # datetime's range once shifted to UTC.
        raise _instant_error(text) from None


def resolve_wake_at(value: object, now: datetime) -> datetime:
    """Turn a wake-up specification into an absolute UTC instant.

    Args:
        value: A duration string (ISO-8601 or a number and a unit, relative to ``now``),
            an instant string with an offset, a timezone-aware datetime, or a timedelta
            (relative to ``now``).
        now: The current time; must be timezone-aware.

    Returns:
        The wake-up instant as a timezone-aware datetime in UTC.

    Raises:
        InvalidDuration: If ``value`` is of another type, is a naive datetime, or is a
            string that is neither a valid duration nor a valid instant.
        ValueError: If ``now`` is naive.
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be a timezone-aware datetime")
    if isinstance(value, str):
        if is_duration(value):
            return _shift(now, parse_duration(value), value)
        return parse_instant(value)
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidDuration(
                f"Invalid wake-up time {value!r} — a datetime must be timezone-aware"
            )
        try:
            return value.astimezone(UTC)
        except OverflowError:
            raise InvalidDuration(
                f"Invalid wake-up time {value!r} — it is outside the representable range"
            ) from None
    if isinstance(value, timedelta):
        return _shift(now, value, value)
    raise InvalidDuration(
        f"Invalid wake-up time {value!r} — expected a duration ({DURATION_EXAMPLES}), "
        'an ISO-8601 instant with an offset such as "2026-01-31T09:00:00Z", '
        "a timezone-aware datetime, or a timedelta"
    )


def _shift(now: datetime, delta: timedelta, original: object) -> datetime:
    try:
        return (now + delta).astimezone(UTC)
    except OverflowError:
        raise InvalidDuration(
            f"Invalid wake-up time {original!r} — it lies outside the representable range"
        ) from None


def format_instant(dt: datetime) -> str:
    """Format an aware datetime as UTC ISO-8601 with microseconds, e.g. ``...T10:00:00.000000Z``.

    Args:
        dt: A timezone-aware datetime.

    Returns:
        The instant in UTC, always with six fractional digits and a ``Z`` suffix.

    Raises:
        ValueError: If ``dt`` is naive.
    """
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(f"cannot format naive datetime {dt!r} as an instant")
    utc = dt.astimezone(UTC)
    # Built by hand because strftime("%Y") does not zero-pad years below 1000 on glibc.
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T"
        f"{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}.{utc.microsecond:06d}Z"
    )


def format_duration(td: timedelta) -> str:
    """Format a timedelta as an ISO-8601 duration using only D, H, M and S, e.g. ``PT1M30S``.

    Args:
        td: A non-negative timedelta of whole seconds.

    Returns:
        The duration text, ``PT0S`` for zero; ``parse_duration`` reads it back unchanged.

    Raises:
        ValueError: If ``td`` is negative or has a fractional second, which the duration
            grammar cannot express.
    """
    if td < timedelta(0):
        raise ValueError(f"cannot format negative duration {td!r}")
    if td.microseconds:
        raise ValueError(f"cannot format duration {td!r} with a fractional second")
    hours, remainder = divmod(td.seconds, 3600)
    minutes, seconds = divmod(remainder, 60)
    date_part = f"{td.days}D" if td.days else ""
    time_part = "".join(
        f"{amount}{unit}"
        for amount, unit in ((hours, "H"), (minutes, "M"), (seconds, "S"))
        if amount
    )
    if not date_part and not time_part:
        return "PT0S"
    return f"P{date_part}" + (f"T{time_part}" if time_part else "")
