"""Five-field cron schedules evaluated in UTC.

Supported syntax: ``*``, numbers, ranges ``a-b``, steps ``*/n``, ``a-b/n`` and ``a/n``,
comma-separated lists, month names ``JAN``-``DEC``, weekday names ``SUN``-``SAT`` (both 0
and 7 mean Sunday), and the macros ``@yearly``, ``@annually``, ``@monthly``, ``@weekly``,
``@daily``, ``@midnight`` and ``@hourly``.

Day-of-month and day-of-week combine as in Vixie cron: when either field starts with
``*`` a day must satisfy both; when neither does, a day satisfying either one fires.
"""

from __future__ import annotations

import bisect
import calendar
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import MAXYEAR, UTC, datetime, timedelta
from typing import Final

from workflow_runner.errors import InvalidCronExpression

__all__ = ["CronSchedule"]

# The Gregorian calendar, weekdays included, repeats every 400 years (146097 days is a
# whole number of weeks), so a schedule with no fire time in that span has none at all.
_SEARCH_YEARS: Final = 400

_MACROS: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_MONTH_NAMES: Final = {
    name: number
    for number, name in enumerate(
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"),
        start=1,
    )
}
_WEEKDAY_NAMES: Final = {
    name: number for number, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))
}

_NUMBER_RE: Final = re.compile(r"[0-9]+")
_NAME_RE: Final = re.compile(r"[A-Za-z]{3}")


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: Mapping[str, int]
    names_hint: str = ""


_MINUTE: Final = _Field("minute", 0, 59, {})
_HOUR: Final = _Field("hour", 0, 23, {})
_DAY_OF_MONTH: Final = _Field("day-of-month", 1, 31, {})
_MONTH: Final = _Field("month", 1, 12, _MONTH_NAMES, " or a month name (JAN-DEC)")
# 7 is accepted as a second spelling of Sunday and folded to 0 after parsing.
_DAY_OF_WEEK: Final = _Field("day-of-week", 0, 7, _WEEKDAY_NAMES, " or a weekday name (SUN-SAT)")


class _FieldError(Exception):
    """A problem inside one field, turned into InvalidCronExpression by the caller."""


def _parse_value(text: str, field: _Field) -> int:
    # Names are checked against an ASCII pattern before upper-casing because str.upper()
    # maps some non-ASCII letters onto ASCII ones ("ſun" would otherwise read as SUN).
    if _NUMBER_RE.fullmatch(text):
        value = int(text)
    elif field.names and _NAME_RE.fullmatch(text) and text.upper() in field.names:
        value = field.names[text.upper()]
    else:
        raise _FieldError(f'{field.name} value "{text}" is not a number{field.names_hint}')
    if not field.low <= value <= field.high:
        raise _FieldError(f"{field.name} value {value} out of range {field.low}-{field.high}")
    return value


def _parse_item(item: str, field: _Field) -> set[int]:
    base, slash, step_text = item.partition("/")
    step = 1
    if slash:
        if not _NUMBER_RE.fullmatch(step_text):
            raise _FieldError(f'{field.name} step "{step_text}" is not a whole number')
        step = int(step_text)
        if step == 0:
            raise _FieldError(f"{field.name} step must be at least 1")
    if base == "*":
        low, high = field.low, field.high
    elif "-" in base:
        start_text, _, end_text = base.partition("-")
        low, high = _parse_value(start_text, field), _parse_value(end_text, field)
        if low > high:
            raise _FieldError(f"{field.name} range {base} runs backwards")
    else:
        low = _parse_value(base, field)
        # "a/n" means every n-th value from a to the end of the field's range.
        high = field.high if slash else low
    return set(range(low, high + 1, step))


def _parse_field(text: str, field: _Field) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        if not item:
            raise _FieldError(f'{field.name} field "{text}" has an empty list item')
        values |= _parse_item(item, field)
    return frozenset(values)


@dataclass(frozen=True)
class CronSchedule:
    """A parsed cron expression; build one with :meth:`CronSchedule.parse`."""

    expression: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days_of_month: frozenset[int]
    months: frozenset[int]
    # 0 = Sunday through 6 = Saturday.
    days_of_week: frozenset[int]
    # Whether the field was written starting with "*", which selects Vixie's AND rule.
    day_of_month_star: bool
    day_of_week_star: bool

    @classmethod
    def parse(cls, expr: str) -> CronSchedule:
        """Parse a five-field cron expression or macro.

        Args:
            expr: ``minute hour day-of-month month day-of-week``, or a macro such as
                ``@daily``.

        Returns:
            The schedule, keeping ``expr`` verbatim in ``expression``.

        Raises:
            InvalidCronExpression: If ``expr`` is not a string or breaks the syntax; the
                message names the offending field.
        """
        if not isinstance(expr, str):
            raise InvalidCronExpression(f"Invalid cron expression {expr!r}: expected a string")
        text = expr.strip()
        if text.startswith("@"):
            macro = _MACROS.get(text.lower())
            if macro is None:
                raise InvalidCronExpression(
                    f'Invalid cron expression "{expr}": unknown macro "{text}" '
                    f"(supported: {', '.join(_MACROS)})"
                )
            text = macro
        parts = text.split()
        if len(parts) != 5:
            raise InvalidCronExpression(
                f'Invalid cron expression "{expr}": expected 5 fields '
                f"(minute hour day-of-month month day-of-week), got {len(parts)}"
            )
        minute, hour, day_of_month, month, day_of_week = parts
        try:
            minutes = _parse_field(minute, _MINUTE)
            hours = _parse_field(hour, _HOUR)
            days_of_month = _parse_field(day_of_month, _DAY_OF_MONTH)
            months = _parse_field(month, _MONTH)
            weekdays = _parse_field(day_of_week, _DAY_OF_WEEK)
        except _FieldError as error:
            raise InvalidCronExpression(f'Invalid cron expression "{expr}": {error}') from None
        return cls(
            expression=expr,
            minutes=tuple(sorted(minutes)),
            hours=tuple(sorted(hours)),
            days_of_month=days_of_month,
            months=months,
            days_of_week=frozenset(day % 7 for day in weekdays),
            day_of_month_star=day_of_month.startswith("*"),
            day_of_week_star=day_of_week.startswith("*"),
        )

    def next_after(self, moment: datetime) -> datetime:
        """Return the first fire time strictly after ``moment``.

        Args:
            moment: A timezone-aware datetime.

        Returns:
            A UTC datetime with zero seconds and microseconds.

        Raises:
            InvalidCronExpression: If the schedule never fires (e.g. ``0 0 31 2 *``) or
                would next fire after the last representable year.
            ValueError: If ``moment`` is naive.
        """
        start = self._first_candidate(moment)
        last_year = min(MAXYEAR, moment.year + _SEARCH_YEARS)
        found = None if start is None else self._search(start, last_year)
        if found is None:
            raise InvalidCronExpression(
                f'Invalid cron expression "{self.expression}": it never fires after '
                f"{moment.isoformat()} (searched through the year {last_year})"
            )
        return found

    def fire_times(self, after: datetime, until: datetime) -> list[datetime]:
        """Return every fire time ``t`` with ``after < t <= until``, in order.

        Args:
            after: Exclusive, timezone-aware lower bound.
            until: Inclusive, timezone-aware upper bound; the caller keeps the span sensible.

        Returns:
            UTC datetimes; empty when nothing fires in the range, including for schedules
            that never fire.

        Raises:
            ValueError: If either bound is naive.
        """
        _require_aware(until, "until")
        start = self._first_candidate(after)
        end = until.astimezone(UTC)
        times: list[datetime] = []
        while start is not None and start <= end:
            found = self._search(start, end.year)
            if found is None or found > end:
                break
            times.append(found)
            start = _plus_one_minute(found)
        return times

    def _first_candidate(self, moment: datetime) -> datetime | None:
        _require_aware(moment, "moment")
        return _plus_one_minute(moment.astimezone(UTC).replace(second=0, microsecond=0))

    def _search(self, start: datetime, last_year: int) -> datetime | None:
        # Walk month by month and pick days and times from the sorted field values, so a
        # search costs at most a few operations per month rather than one per minute.
        year, month, day = start.year, start.month, start.day
        hour, minute = start.hour, start.minute
        while year <= last_year:
            if month in self.months:
                for candidate_day in self._days_in_month(year, month):
                    if candidate_day < day:
                        continue
                    clock = (
                        self._first_time_from(hour, minute)
                        if candidate_day == day
                        else (self.hours[0], self.minutes[0])
                    )
                    if clock is not None:
                        return datetime(year, month, candidate_day, *clock, tzinfo=UTC)
            day, hour, minute = 1, 0, 0
            month += 1
            if month > 12:
                year, month = year + 1, 1
        return None

    def _days_in_month(self, year: int, month: int) -> list[int]:
        # calendar.weekday counts Monday as 0; cron counts Sunday as 0.
        first_weekday = (calendar.weekday(year, month, 1) + 1) % 7
        length = calendar.monthrange(year, month)[1]
        both_required = self.day_of_month_star or self.day_of_week_star
        days = []
        for day in range(1, length + 1):
            in_month_field = day in self.days_of_month
            in_week_field = (first_weekday + day - 1) % 7 in self.days_of_week
            if both_required:
                fires = in_month_field and in_week_field
            else:
                fires = in_month_field or in_week_field
            if fires:
                days.append(day)
        return days

    def _first_time_from(self, hour: int, minute: int) -> tuple[int, int] | None:
        for candidate_hour in self.hours[bisect.bisect_left(self.hours, hour) :]:
            floor = minute if candidate_hour == hour else 0
            index = bisect.bisect_left(self.minutes, floor)
            if index < len(self.minutes):
                return candidate_hour, self.minutes[index]
        return None


def _require_aware(moment: datetime, name: str) -> None:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got {moment!r}")


def _plus_one_minute(moment: datetime) -> datetime | None:
    try:
        return moment + timedelta(minutes=1)
    except OverflowError:
        return None
