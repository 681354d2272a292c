"""Unit tests for ISO-8601 duration and instant handling."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from workflow_runner.durations import (
    canonical_duration,
    format_duration,
    format_instant,
    parse_duration,
    parse_instant,
    resolve_wake_at,
)
from workflow_runner.errors import InvalidDuration, InvalidInput

NOW = datetime(2026, 1, 31, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PT1H", timedelta(hours=1)),
        ("PT90M", timedelta(minutes=90)),
        ("PT45S", timedelta(seconds=45)),
        ("PT0S", timedelta(0)),
        ("P1D", timedelta(days=1)),
        ("P7D", timedelta(days=7)),
        ("P1M", timedelta(days=30)),
        ("P1Y", timedelta(days=365)),
        ("P1Y2M3D", timedelta(days=365 + 60 + 3)),
        ("P1DT12H", timedelta(days=1, hours=12)),
        ("PT1M30S", timedelta(minutes=1, seconds=30)),
        ("P1Y2M3DT4H5M6S", timedelta(days=428, hours=4, minutes=5, seconds=6)),
        ("P0D", timedelta(0)),
        ("PT007M", timedelta(minutes=7)),
    ],
)
def test_parse_duration_accepts_whole_component_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


def test_parse_duration_reads_m_before_t_as_months_and_after_t_as_minutes() -> None:
    assert parse_duration("P1M") == timedelta(days=30)
    assert parse_duration("PT1M") == timedelta(minutes=1)
    assert parse_duration("P1MT1M") == timedelta(days=30, minutes=1)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "P",
        "PT",
        "P1DT",
        "P1W",
        "P2W3D",
        "PT1.5S",
        "PT1,5S",
        "P0.5D",
        "-PT1H",
        "+PT1H",
        "P-1D",
        "pt1h",
        "Pt1H",
        "PT1h",
        " PT1H",
        "PT1H ",
        "PT1H\n",
        "P 1D",
        "1H",
        "PT1H1H",
        "PT1S1M",
        "P1D1Y",
        "PT1D",
        "P1H",
        "P\u0661D",
        "P99999999999999999999D",
        "6",
        "h",
        "6 h",
        "6H",
        "1.5h",
        "-1h",
        "+1h",
        "30m1h",
        "1h1h",
        "6hours",
        " 6h",
        "\u0663h",
        "99999999999999999999d",
    ],
)
def test_parse_duration_rejects_malformed_text(text: str) -> None:
    # Twice: parsed durations are kept between calls, a rejection must not be.
    for _ in range(2):
        with pytest.raises(InvalidDuration) as caught:
            parse_duration(text)
        assert str(caught.value) == (
            f'Invalid duration "{text}" — expected ISO-8601 such as "PT1H" or "P3D", or a'
            ' number and a unit such as "90s", "30m", "6h", "3d" or "1w"'
        )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        ("6h", timedelta(hours=6)),
        ("3d", timedelta(days=3)),
        ("1w", timedelta(weeks=1)),
        ("1h30m", timedelta(minutes=90)),
        ("2d12h", timedelta(days=2, hours=12)),
        ("0s", timedelta(0)),
    ],
)
def test_a_number_and_a_unit_is_a_duration_too(text: str, expected: timedelta) -> None:
    """What people type on a command line (`--every 6h`) is accepted everywhere a
    duration is, definitions included."""
    assert parse_duration(text) == expected
    assert resolve_wake_at(text, NOW) == NOW + expected


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("PT1H", "PT1H"),
        ("P1DT0H", "P1DT0H"),  # ISO text is kept exactly as written
        ("PT90M", "PT90M"),
        ("6h", "PT6H"),
        ("90s", "PT1M30S"),
        ("1w", "P7D"),
        ("1h30m", "PT1H30M"),
    ],
)
def test_a_definition_stores_durations_as_iso_8601(text: str, stored: str) -> None:
    assert canonical_duration(text) == stored
    assert parse_duration(stored) == parse_duration(text)


@pytest.mark.parametrize("value", [None, 3600, 1.5, b"PT1H", timedelta(hours=1)])
def test_parse_duration_rejects_non_strings_quoting_their_repr(value: object) -> None:
    with pytest.raises(InvalidDuration, match="expected ISO-8601 such as") as caught:
        parse_duration(value)  # type: ignore[arg-type]
    assert f'"{value!r}"' in str(caught.value)


def test_invalid_duration_is_an_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        parse_duration("soon")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-29T10:00:00Z", datetime(2026, 11, 29, 10, 0, tzinfo=UTC)),
        ("2026-11-29T10:00Z", datetime(2026, 11, 29, 10, 0, tzinfo=UTC)),
        ("2026-11-29T10:00:00+00:00", datetime(2026, 11, 29, 10, 0, tzinfo=UTC)),
        ("2026-11-29T10:00:00-00:00", datetime(2026, 11, 29, 10, 0, tzinfo=UTC)),
        (
            "2026-11-29T10:00:00.123+02:00",
            datetime(2026, 11, 29, 8, 0, 0, 123000, tzinfo=UTC),
        ),
        ("2026-11-29T10:00:00-0530", datetime(2026, 11, 29, 15, 30, tzinfo=UTC)),
        (
            "2026-11-29T10:00:00.123456789Z",
            datetime(2026, 11, 29, 10, 0, 0, 123456, tzinfo=UTC),
        ),
        ("2026-12-31T23:30:00-01:00", datetime(2027, 1, 1, 0, 30, tzinfo=UTC)),
    ],
)
def test_parse_instant_returns_the_same_instant_in_utc(text: str, expected: datetime) -> None:
    parsed = parse_instant(text)
    assert parsed == expected
    assert parsed.utcoffset() == timedelta(0)
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-29T10:00:00",
        "2026-11-29",
        "2026-11-29 10:00:00Z",
        "20261129T100000Z",
        "2026-13-01T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2026-11-29T24:00:00Z",
        "2026-11-29T10:00:60Z",
        "2026-11-29T10:00:00+24:00",
        "2026-11-29T10:00:00+01:60",
        "2026-11-29T10:00:00z",
        " 2026-11-29T10:00:00Z",
        "2026-11-29T10:00:00Z\n",
        "0001-01-01T00:00:00+01:00",
        # The shape format_instant writes (parse_instant's fast path), not a real instant.
        "2026-02-30T10:00:00.000000Z",
        "2026-11-29T24:00:00.000000Z",
        "2026-11-29T10:00:00.00000\u0663Z",
        "2026-11-29 10:00:00.000000Z",
        "tomorrow",
        "",
    ],
)
def test_parse_instant_rejects_naive_malformed_or_unrepresentable_text(text: str) -> None:
    with pytest.raises(InvalidDuration) as caught:
        parse_instant(text)
    assert str(caught.value) == (
        f'Invalid ISO-8601 instant "{text}" — expected a timestamp with an offset like '
        '"2026-01-31T09:00:00Z"'
    )


def test_parse_instant_rejects_non_strings() -> None:
    with pytest.raises(InvalidDuration, match="Invalid ISO-8601 instant"):
        parse_instant(NOW)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("PT1H", NOW + timedelta(hours=1)),
        ("P7D", NOW + timedelta(days=7)),
        ("2026-11-29T10:00:00+01:00", datetime(2026, 11, 29, 9, 0, tzinfo=UTC)),
        (
            datetime(2026, 2, 1, 12, 0, tzinfo=timezone(timedelta(hours=3))),
            datetime(2026, 2, 1, 9, tzinfo=UTC),
        ),
        (timedelta(minutes=5), NOW + timedelta(minutes=5)),
    ],
)
def test_resolve_wake_at_accepts_each_supported_form(value: object, expected: datetime) -> None:
    resolved = resolve_wake_at(value, NOW)
    assert resolved == expected
    assert resolved.tzinfo is UTC


def test_resolve_wake_at_returns_utc_even_when_now_has_another_offset() -> None:
    now = datetime(2026, 1, 31, 12, 0, tzinfo=timezone(timedelta(hours=3)))
    resolved = resolve_wake_at("PT1H", now)
    assert resolved == datetime(2026, 1, 31, 10, 0, tzinfo=UTC)
    assert resolved.tzinfo is UTC


@pytest.mark.parametrize(
    ("value", "message_part"),
    [
        (datetime(2026, 1, 31, 9, 0), "timezone-aware"),
        (True, "expected a duration"),
        (3600, "expected a duration"),
        (1.5, "expected a duration"),
        (None, "expected a duration"),
        (["PT1H"], "expected a duration"),
        ("P1W", "Invalid duration"),
        ("tomorrow", "Invalid ISO-8601 instant"),
        ("2026-11-29T10:00:00", "Invalid ISO-8601 instant"),
        (timedelta(days=999_999_999), "outside the representable range"),
    ],
)
def test_resolve_wake_at_rejects_unsupported_values_naming_them(
    value: object, message_part: str
) -> None:
    with pytest.raises(InvalidDuration, match=message_part) as caught:
        resolve_wake_at(value, NOW)
    assert (repr(value) if not isinstance(value, str) else value) in str(caught.value)


def test_resolve_wake_at_requires_an_aware_now() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        resolve_wake_at("PT1H", datetime(2026, 1, 31, 9, 0))


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (datetime(2026, 11, 29, 10, 0, tzinfo=UTC), "2026-11-29T10:00:00.000000Z"),
        (datetime(2026, 11, 29, 10, 0, 0, 5, tzinfo=UTC), "2026-11-29T10:00:00.000005Z"),
        (
            datetime(2026, 11, 29, 12, 0, tzinfo=timezone(timedelta(hours=2))),
            "2026-11-29T10:00:00.000000Z",
        ),
        (datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC), "0999-01-02T03:04:05.000000Z"),
    ],
)
def test_format_instant_writes_utc_with_microseconds_and_z(moment: datetime, expected: str) -> None:
    assert format_instant(moment) == expected


def test_format_instant_rejects_naive_datetimes() -> None:
    with pytest.raises(ValueError, match="naive"):
        format_instant(datetime(2026, 11, 29, 10, 0))


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        (timedelta(0), "PT0S"),
        (timedelta(seconds=90), "PT1M30S"),
        (timedelta(days=1), "P1D"),
        (timedelta(hours=1), "PT1H"),
        (timedelta(days=400), "P400D"),
        (timedelta(days=2, hours=3, seconds=4), "P2DT3H4S"),
        (timedelta(hours=23, minutes=59, seconds=59), "PT23H59M59S"),
    ],
)
def test_format_duration_uses_days_hours_minutes_and_seconds_only(
    delta: timedelta, expected: str
) -> None:
    assert format_duration(delta) == expected


@pytest.mark.parametrize("delta", [timedelta(seconds=-1), timedelta(milliseconds=1500)])
def test_format_duration_rejects_what_the_grammar_cannot_express(delta: timedelta) -> None:
    with pytest.raises(ValueError):
        format_duration(delta)


offsets = st.builds(
    timezone,
    st.timedeltas(
        min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23, minutes=59)
    ),
)


@given(
    st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=offsets)
)
def test_format_instant_round_trips_through_parse_instant(moment: datetime) -> None:
    text = format_instant(moment)
    assert parse_instant(text) == moment
    assert format_instant(parse_instant(text)) == text


@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)))
def test_parse_instant_reads_the_stored_shape_as_the_general_grammar_does(moment: datetime) -> None:
    """format_instant's shape takes a faster parser; the same instant written with an
    explicit offset takes the general one."""
    text = format_instant(moment.replace(tzinfo=UTC))
    assert parse_instant(text) == parse_instant(text[:-1] + "+00:00") == moment.replace(tzinfo=UTC)
    assert parse_instant(text).tzinfo is UTC


@given(st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=100_000)))
def test_format_duration_round_trips_through_parse_duration(delta: timedelta) -> None:
    whole = timedelta(days=delta.days, seconds=delta.seconds)
    assert parse_duration(format_duration(whole)) == whole
