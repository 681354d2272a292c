"""Unit tests for cron schedule parsing and fire-time computation."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from workflow_runner.cron import CronSchedule
from workflow_runner.errors import InvalidCronExpression


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, *rest: int) -> datetime:
    second, microsecond = (*rest, 0, 0)[:2]
    return datetime(year, month, day, hour, minute, second, microsecond, tzinfo=UTC)


def cron_weekday(moment: datetime) -> int:
    """Weekday numbered as cron does it: 0 = Sunday."""
    return (moment.weekday() + 1) % 7


# --- parsing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "field", "expected"),
    [
        ("* * * * *", "minutes", tuple(range(60))),
        ("5 * * * *", "minutes", (5,)),
        ("05 * * * *", "minutes", (5,)),
        ("1,2,3 * * * *", "minutes", (1, 2, 3)),
        ("10-12 * * * *", "minutes", (10, 11, 12)),
        ("*/15 * * * *", "minutes", (0, 15, 30, 45)),
        ("10-30/10 * * * *", "minutes", (10, 20, 30)),
        ("50/4 * * * *", "minutes", (50, 54, 58)),
        ("1,40-42,*/30 * * * *", "minutes", (0, 1, 30, 40, 41, 42)),
        ("*/100 * * * *", "minutes", (0,)),
        ("0 9-17/4 * * *", "hours", (9, 13, 17)),
        ("0 23 * * *", "hours", (23,)),
        ("0 0 1,15,31 * *", "days_of_month", frozenset({1, 15, 31})),
        ("0 0 * JAN,jul,Dec *", "months", frozenset({1, 7, 12})),
        ("0 0 * MAR-MAY *", "months", frozenset({3, 4, 5})),
        ("0 0 * */3 *", "months", frozenset({1, 4, 7, 10})),
        ("0 0 * * MON-FRI", "days_of_week", frozenset({1, 2, 3, 4, 5})),
        ("0 0 * * sun,Sat", "days_of_week", frozenset({0, 6})),
        ("0 0 * * 7", "days_of_week", frozenset({0})),
        ("0 0 * * 5-7", "days_of_week", frozenset({5, 6, 0})),
        ("0 0 * * 0-7", "days_of_week", frozenset(range(7))),
        ("0 0 * * */2", "days_of_week", frozenset({0, 2, 4, 6})),
    ],
)
def test_parse_expands_each_field_syntax(expression: str, field: str, expected: object) -> None:
    assert getattr(CronSchedule.parse(expression), field) == expected


@pytest.mark.parametrize(
    ("macro", "equivalent"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
    ],
)
def test_parse_expands_macros_to_their_five_field_form(macro: str, equivalent: str) -> None:
    schedule = CronSchedule.parse(macro)
    assert schedule.expression == macro
    assert dataclasses.replace(schedule, expression=equivalent) == CronSchedule.parse(equivalent)


def test_parse_keeps_the_original_text() -> None:
    text = "  */5   9-17 * * MON-FRI "
    assert CronSchedule.parse(text).expression == text


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("61 * * * *", "minute value 61 out of range 0-59"),
        ("* 24 * * *", "hour value 24 out of range 0-23"),
        ("* * 0 * *", "day-of-month value 0 out of range 1-31"),
        ("* * 32 * *", "day-of-month value 32 out of range 1-31"),
        ("* * * 13 *", "month value 13 out of range 1-12"),
        ("* * * 0 *", "month value 0 out of range 1-12"),
        ("* * * * 8", "day-of-week value 8 out of range 0-7"),
        ("* * * * * *", "expected 5 fields (minute hour day-of-month month day-of-week), got 6"),
        ("* * * *", "got 4"),
        ("", "got 0"),
        ("   ", "got 0"),
        ("? * * * *", 'minute value "?" is not a number'),
        ("* * ? * *", 'day-of-month value "?" is not a number'),
        ("* * L * *", 'day-of-month value "L" is not a number'),
        ("* * 15W * *", 'day-of-month value "15W" is not a number'),
        ("* * * * 5L", 'day-of-week value "5L" is not a number or a weekday name (SUN-SAT)'),
        ("* * * * 5#3", 'day-of-week value "5#3" is not a number'),
        ("* * * * MONDAY", 'day-of-week value "MONDAY" is not a number'),
        ("* * * FOO *", 'month value "FOO" is not a number or a month name (JAN-DEC)'),
        ("* * * * JAN", 'day-of-week value "JAN" is not a number'),
        ("* * MON * *", 'day-of-month value "MON" is not a number'),
        ("-5 * * * *", 'minute value "" is not a number'),
        ("5- * * * *", 'minute value "" is not a number'),
        ("1-2-3 * * * *", 'minute value "2-3" is not a number'),
        ("30-10 * * * *", "minute range 30-10 runs backwards"),
        ("*/0 * * * *", "minute step must be at least 1"),
        ("*/x * * * *", 'minute step "x" is not a whole number'),
        ("*/ * * * *", 'minute step "" is not a whole number'),
        ("1/2/3 * * * *", 'minute step "2/3" is not a whole number'),
        ("1,,2 * * * *", "empty list item"),
        ("1, * * * *", "empty list item"),
        ("*-5 * * * *", 'minute value "*" is not a number'),
        ("1.5 * * * *", 'minute value "1.5" is not a number'),
        ("\u0661 * * * *", "is not a number"),
        ("* * * * \u017fun", "is not a number"),
        ("@reboot", 'unknown macro "@reboot"'),
        ("@every 5m", 'unknown macro "@every 5m"'),
    ],
)
def test_parse_rejects_unsupported_syntax_naming_the_field(expression: str, message: str) -> None:
    with pytest.raises(InvalidCronExpression) as caught:
        CronSchedule.parse(expression)
    text = str(caught.value)
    assert text.startswith(f'Invalid cron expression "{expression}": ')
    assert message in text


def test_parse_reports_out_of_range_minutes_exactly() -> None:
    with pytest.raises(InvalidCronExpression) as caught:
        CronSchedule.parse("61 * * * *")
    assert (
        str(caught.value)
        == 'Invalid cron expression "61 * * * *": minute value 61 out of range 0-59'
    )


@pytest.mark.parametrize("value", [None, 5, ["*"] * 5])
def test_parse_rejects_non_strings(value: object) -> None:
    with pytest.raises(InvalidCronExpression, match="expected a string"):
        CronSchedule.parse(value)  # type: ignore[arg-type]


def test_schedules_are_immutable_and_hashable() -> None:
    schedule = CronSchedule.parse("0 9 * * MON")
    with pytest.raises(dataclasses.FrozenInstanceError):
        schedule.expression = "@daily"  # type: ignore[misc]
    assert hash(schedule) == hash(CronSchedule.parse("0 9 * * MON"))


# --- next_after -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "moment", "expected"),
    [
        ("* * * * *", utc(2026, 1, 1, 10, 0), utc(2026, 1, 1, 10, 1)),
        ("* * * * *", utc(2026, 1, 1, 10, 0, 59, 999999), utc(2026, 1, 1, 10, 1)),
        ("*/15 * * * *", utc(2026, 1, 1, 10, 7), utc(2026, 1, 1, 10, 15)),
        ("*/15 * * * *", utc(2026, 1, 1, 10, 45), utc(2026, 1, 1, 11, 0)),
        ("0 9 * * *", utc(2026, 1, 1, 9, 0), utc(2026, 1, 2, 9, 0)),
        ("0 9 * * *", utc(2026, 1, 1, 8, 59, 59), utc(2026, 1, 1, 9, 0)),
        ("30 23 31 12 *", utc(2026, 12, 31, 23, 30), utc(2027, 12, 31, 23, 30)),
        ("0 0 1 * *", utc(2026, 1, 31, 12, 0), utc(2026, 2, 1, 0, 0)),
        ("0 0 31 * *", utc(2026, 1, 31, 0, 0), utc(2026, 3, 31, 0, 0)),
        ("0 0 29 2 *", utc(2026, 1, 1), utc(2028, 2, 29)),
        ("0 0 29 2 *", utc(2096, 3, 1), utc(2104, 2, 29)),
        ("0 12 * * MON", utc(2026, 1, 1), utc(2026, 1, 5, 12, 0)),
        ("0 12 * * 7", utc(2026, 1, 1), utc(2026, 1, 4, 12, 0)),
        ("0 12 * * 0", utc(2026, 1, 4, 12, 0), utc(2026, 1, 11, 12, 0)),
        ("0 9 * * MON-FRI", utc(2026, 1, 2, 9, 0), utc(2026, 1, 5, 9, 0)),
        ("@yearly", utc(2026, 6, 1), utc(2027, 1, 1)),
        ("@monthly", utc(2026, 12, 15), utc(2027, 1, 1)),
        ("@weekly", utc(2026, 1, 1), utc(2026, 1, 4)),
        ("@hourly", utc(2026, 1, 1, 23, 30), utc(2026, 1, 2, 0, 0)),
    ],
)
def test_next_after_returns_the_first_fire_time_strictly_after(
    expression: str, moment: datetime, expected: datetime
) -> None:
    found = CronSchedule.parse(expression).next_after(moment)
    assert found == expected
    assert found.tzinfo is UTC


def test_next_after_interprets_the_schedule_in_utc_for_any_input_offset() -> None:
    tokyo = timezone(timedelta(hours=9))
    found = CronSchedule.parse("0 9 * * *").next_after(datetime(2026, 1, 1, 12, 0, tzinfo=tokyo))
    assert found == utc(2026, 1, 1, 9, 0)
    assert found.tzinfo is UTC


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        # 2026-01-13 is a Tuesday and 2026-01-15 a Thursday.
        (utc(2026, 1, 12, 0, 0), utc(2026, 1, 13, 0, 0)),
        (utc(2026, 1, 13, 0, 0), utc(2026, 1, 15, 0, 0)),
        (utc(2026, 1, 15, 0, 0), utc(2026, 1, 20, 0, 0)),
    ],
)
def test_restricted_day_of_month_and_day_of_week_fire_on_either(
    moment: datetime, expected: datetime
) -> None:
    assert CronSchedule.parse("0 0 15 * TUE").next_after(moment) == expected


def test_a_star_day_of_week_leaves_day_of_month_in_charge() -> None:
    assert CronSchedule.parse("0 0 15 * *").next_after(utc(2026, 1, 1)) == utc(2026, 1, 15)


def test_a_star_day_of_month_leaves_day_of_week_in_charge() -> None:
    assert CronSchedule.parse("0 0 * * TUE").next_after(utc(2026, 1, 1)) == utc(2026, 1, 6)


def test_a_star_prefixed_step_needs_both_day_fields_like_vixie_cron() -> None:
    # "*/2" begins with "*", so Vixie cron requires both fields: odd days that are Mondays.
    schedule = CronSchedule.parse("0 0 */2 * MON")
    assert schedule.next_after(utc(2026, 1, 1)) == utc(2026, 1, 5)
    assert schedule.next_after(utc(2026, 1, 5)) == utc(2026, 1, 19)


@pytest.mark.parametrize("expression", ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4,6,9,11 *"])
def test_next_after_reports_schedules_that_never_fire(expression: str) -> None:
    schedule = CronSchedule.parse(expression)
    started = time.perf_counter()
    with pytest.raises(InvalidCronExpression, match="never fires"):
        schedule.next_after(utc(2026, 1, 1))
    assert time.perf_counter() - started < 2


def test_next_after_gives_up_at_the_end_of_representable_time() -> None:
    with pytest.raises(InvalidCronExpression, match="never fires"):
        CronSchedule.parse("0 0 1 1 *").next_after(utc(9999, 6, 1))
    with pytest.raises(InvalidCronExpression, match="never fires"):
        CronSchedule.parse("* * * * *").next_after(utc(9999, 12, 31, 23, 59))


def test_next_after_skips_ahead_instead_of_stepping_minute_by_minute() -> None:
    schedule = CronSchedule.parse("59 23 31 12 *")
    started = time.perf_counter()
    moment = utc(2000, 1, 1)
    for _ in range(200):
        moment = schedule.next_after(moment)
    assert moment == utc(2199, 12, 31, 23, 59)
    assert time.perf_counter() - started < 2


def test_next_after_rejects_naive_datetimes() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        CronSchedule.parse("@daily").next_after(datetime(2026, 1, 1))


# --- fire_times -------------------------------------------------------------------------


def test_fire_times_lists_every_instant_after_the_start_up_to_and_including_the_end() -> None:
    schedule = CronSchedule.parse("0 */6 * * *")
    assert schedule.fire_times(utc(2026, 1, 1, 0, 0), utc(2026, 1, 2, 0, 0)) == [
        utc(2026, 1, 1, 6),
        utc(2026, 1, 1, 12),
        utc(2026, 1, 1, 18),
        utc(2026, 1, 2, 0),
    ]


def test_fire_times_crosses_weekends_and_hours() -> None:
    schedule = CronSchedule.parse("*/30 16-17 * * MON-FRI")
    assert schedule.fire_times(utc(2026, 1, 2, 17, 0), utc(2026, 1, 5, 16, 30)) == [
        utc(2026, 1, 2, 17, 30),
        utc(2026, 1, 5, 16, 0),
        utc(2026, 1, 5, 16, 30),
    ]


@pytest.mark.parametrize(
    ("after", "until"),
    [
        (utc(2026, 1, 1, 0, 0), utc(2026, 1, 1, 0, 0)),
        (utc(2026, 1, 2), utc(2026, 1, 1)),
        (utc(2026, 1, 1, 0, 0), utc(2026, 1, 1, 8, 59)),
    ],
)
def test_fire_times_is_empty_when_nothing_fires_in_range(after: datetime, until: datetime) -> None:
    assert CronSchedule.parse("0 9 * * *").fire_times(after, until) == []


def test_fire_times_is_empty_for_a_schedule_that_never_fires() -> None:
    assert CronSchedule.parse("0 0 31 2 *").fire_times(utc(2026, 1, 1), utc(2030, 1, 1)) == []


def test_fire_times_rejects_naive_bounds() -> None:
    schedule = CronSchedule.parse("@hourly")
    with pytest.raises(ValueError):
        schedule.fire_times(datetime(2026, 1, 1), utc(2026, 1, 2))
    with pytest.raises(ValueError):
        schedule.fire_times(utc(2026, 1, 1), datetime(2026, 1, 2))


# --- properties -------------------------------------------------------------------------


def _field(low: int, high: int, names: list[str] | None = None) -> st.SearchStrategy[str]:
    number = st.integers(low, high)
    value = number.map(str) if names is None else number.map(str) | st.sampled_from(names)

    def ordered_range(bounds: tuple[int, int]) -> str:
        start, end = sorted(bounds)
        return f"{start}-{end}"

    item = st.one_of(
        value,
        st.tuples(number, number).map(ordered_range),
        st.integers(1, high).map(lambda step: f"*/{step}"),
        st.tuples(st.tuples(number, number).map(ordered_range), st.integers(1, 5)).map(
            lambda pair: f"{pair[0]}/{pair[1]}"
        ),
    )
    return st.just("*") | st.lists(item, min_size=1, max_size=3).map(",".join)


expressions = st.tuples(
    _field(0, 59),
    _field(0, 23),
    _field(1, 28),
    _field(1, 12, ["JAN", "APR", "jul", "Oct"]),
    _field(0, 7, ["SUN", "mon", "Fri"]),
).map(" ".join)
moments = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)


def _fires_at(schedule: CronSchedule, moment: datetime) -> bool:
    day_of_month = moment.day in schedule.days_of_month
    day_of_week = cron_weekday(moment) in schedule.days_of_week
    if schedule.day_of_month_star or schedule.day_of_week_star:
        day_ok = day_of_month and day_of_week
    else:
        day_ok = day_of_month or day_of_week
    return (
        moment.second == 0
        and moment.microsecond == 0
        and moment.minute in schedule.minutes
        and moment.hour in schedule.hours
        and moment.month in schedule.months
        and day_ok
    )


@given(expressions, moments)
def test_next_after_is_strictly_later_and_satisfies_every_field(
    expression: str, moment: datetime
) -> None:
    schedule = CronSchedule.parse(expression)
    first = schedule.next_after(moment)
    second = schedule.next_after(first)
    assert moment < first < second
    assert _fires_at(schedule, first)
    assert _fires_at(schedule, second)


@given(st.sampled_from(["*/7 * * * *", "13 */5 * * *", "0 0 * * MON,THU", "* 3 1 * *"]), moments)
def test_next_after_skips_no_fire_time(expression: str, moment: datetime) -> None:
    schedule = CronSchedule.parse(expression)
    found = schedule.next_after(moment)
    candidate = moment.replace(second=0, microsecond=0) + timedelta(minutes=1)
    # Walk minute by minute only over the (short) gap these schedules can have.
    while candidate < found:
        assert not _fires_at(schedule, candidate)
        candidate += timedelta(minutes=1)


@given(expressions, moments, st.integers(min_value=0, max_value=3 * 24 * 60))
def test_fire_times_agrees_with_repeated_next_after(
    expression: str, after: datetime, span_minutes: int
) -> None:
    schedule = CronSchedule.parse(expression)
    until = after + timedelta(minutes=span_minutes)
    expected: list[datetime] = []
    current = schedule.next_after(after)
    while current <= until and len(expected) <= 5000:
        expected.append(current)
        current = schedule.next_after(current)
    assert schedule.fire_times(after, until) == expected
