"""Expression forms: Vixie cron, AWS cron, rate, at, macros and H."""

from __future__ import annotations

from datetime import date, datetime

import pytest

from jobsched.core.expressions import (
    CronExpression,
    ExpressionError,
    RateExpression,
    hash_value,
    parse_expression,
)
from tests.helpers import compiled, fire_times, local_times, utc


def days(expression: str, after: str, count: int, timezone: str = "UTC") -> list[str]:
    return [f"{o.at:%a %Y-%m-%d}" for o in compiled(expression, timezone).next_fires(_utc(after), count)]


def _utc(text: str) -> datetime:
    return utc(text)


class TestVixieCron:
    def test_day_of_month_or_day_of_week_when_both_restricted(self) -> None:
        # The 1st and 15th, and every Monday (2027-01-01 is a Friday).
        assert days("0 0 1,15 * 1", "2026-12-31T12:00Z", 4) == [
            "Fri 2027-01-01",
            "Mon 2027-01-04",
            "Mon 2027-01-11",
            "Fri 2027-01-15",
        ]

    def test_a_day_field_starting_with_star_means_and(self) -> None:
        # Vixie: '*/2' starts with '*', so the days are ANDed: odd days that are Mondays.
        assert days("0 0 */2 * 1", "2027-01-01T00:00Z", 3) == [
            "Mon 2027-01-11",
            "Mon 2027-01-25",
            "Mon 2027-02-01",
        ]

    @pytest.mark.parametrize("sunday", ["0", "7", "SUN"])
    def test_zero_and_seven_are_sunday(self, sunday: str) -> None:
        assert days(f"0 0 * * {sunday}", "2027-01-01T00:00Z", 2) == [
            "Sun 2027-01-03",
            "Sun 2027-01-10",
        ]

    def test_leap_day(self) -> None:
        assert days("0 12 29 2 *", "2027-01-01T00:00Z", 2) == ["Tue 2028-02-29", "Sun 2032-02-29"]

    def test_leap_day_in_local_time_zone(self) -> None:
        schedule = compiled("30 23 29 2 *", "America/Los_Angeles")
        assert fire_times(schedule, "2027-01-01T00:00Z", 1) == ["2028-03-01T07:30Z"]

    @pytest.mark.parametrize(
        ("macro", "expected"),
        [
            ("@hourly", ["2027-01-01T01:00Z", "2027-01-01T02:00Z"]),
            ("@daily", ["2027-01-02T00:00Z", "2027-01-03T00:00Z"]),
            ("@midnight", ["2027-01-02T00:00Z", "2027-01-03T00:00Z"]),
            ("@weekly", ["2027-01-03T00:00Z", "2027-01-10T00:00Z"]),
            ("@monthly", ["2027-02-01T00:00Z", "2027-03-01T00:00Z"]),
            ("@yearly", ["2028-01-01T00:00Z", "2029-01-01T00:00Z"]),
            ("@annually", ["2028-01-01T00:00Z", "2029-01-01T00:00Z"]),
        ],
    )
    def test_macros(self, macro: str, expected: list[str]) -> None:
        assert fire_times(compiled(macro), "2027-01-01T00:00Z", 2) == expected

    def test_macros_are_wildcard_or_fixed_like_their_expansion(self) -> None:
        hourly = parse_expression("@hourly")
        daily = parse_expression("@daily")
        assert isinstance(hourly, CronExpression) and hourly.wildcard
        assert isinstance(daily, CronExpression) and not daily.wildcard


class TestAwsCron:
    @pytest.mark.parametrize(("aws", "weekday"), [("1", "Sun"), ("2", "Mon"), ("6", "Fri"), ("7", "Sat")])
    def test_day_of_week_numbering_starts_at_sunday_one(self, aws: str, weekday: str) -> None:
        assert days(f"cron(0 9 ? * {aws} *)", "2027-01-01T12:00Z", 1)[0].startswith(weekday)

    def test_ranges_of_numbers_are_renumbered(self) -> None:
        # 2-6 = MON-FRI in AWS numbering.
        assert days("cron(0 9 ? * 2-6 *)", "2027-01-01T12:00Z", 3) == [
            "Mon 2027-01-04",
            "Tue 2027-01-05",
            "Wed 2027-01-06",
        ]
        assert days("cron(0 9 ? * MON-FRI *)", "2027-01-01T12:00Z", 3) == days(
            "cron(0 9 ? * 2-6 *)", "2027-01-01T12:00Z", 3
        )

    def test_last_day_of_month(self) -> None:
        assert days("cron(0 0 L * ? *)", "2027-01-01T00:00Z", 3) == [
            "Sun 2027-01-31",
            "Sun 2027-02-28",
            "Wed 2027-03-31",
        ]

    def test_nearest_weekday(self) -> None:
        # 2027-05-15 is a Saturday -> Friday the 14th; 2027-08-15 is a Sunday -> Monday the 16th.
        assert days("cron(0 0 15W 5,8 ? *)", "2027-01-01T00:00Z", 2) == [
            "Fri 2027-05-14",
            "Mon 2027-08-16",
        ]

    def test_nearest_weekday_does_not_leave_the_month(self) -> None:
        # 2027-05-01 is a Saturday: the nearest weekday within May is Monday the 3rd.
        assert days("cron(0 0 1W 5 ? *)", "2027-01-01T00:00Z", 1) == ["Mon 2027-05-03"]

    def test_last_weekday_of_month(self) -> None:
        # 2027-01-31 is a Sunday -> Fri 29th; 2027-02-28 Sunday -> Fri 26th; 2027-03-31 Wednesday.
        assert days("cron(0 18 LW * ? *)", "2027-01-01T00:00Z", 3) == [
            "Fri 2027-01-29",
            "Fri 2027-02-26",
            "Wed 2027-03-31",
        ]

    def test_nth_weekday_of_month(self) -> None:
        # 3#2: the second Tuesday (AWS 3 = TUE).
        assert days("cron(0 9 ? * 3#2 *)", "2027-01-01T00:00Z", 2) == [
            "Tue 2027-01-12",
            "Tue 2027-02-09",
        ]

    def test_last_given_weekday_of_month(self) -> None:
        # 6L: the last Friday.
        assert days("cron(0 9 ? * 6L *)", "2027-01-01T00:00Z", 2) == [
            "Fri 2027-01-29",
            "Fri 2027-02-26",
        ]

    def test_year_field_limits_and_ends_the_schedule(self) -> None:
        assert days("cron(0 0 1 1 ? 2028-2029)", "2027-01-01T00:00Z", 5) == [
            "Sat 2028-01-01",
            "Mon 2029-01-01",
        ]

    def test_year_list(self) -> None:
        assert days("cron(0 0 1 1 ? 2028,2031)", "2027-01-01T00:00Z", 5) == [
            "Sat 2028-01-01",
            "Wed 2031-01-01",
        ]

    def test_year_in_the_past_never_fires_again(self) -> None:
        assert days("cron(0 0 1 1 ? 2020)", "2027-01-01T00:00Z", 1) == []

    def test_aws_cron_in_a_time_zone(self) -> None:
        assert local_times(compiled("cron(0/15 8-9 ? * MON-FRI *)", "Europe/Berlin"), "2027-01-04T06:00Z", 3) == [
            "2027-01-04 08:00 CET",
            "2027-01-04 08:15 CET",
            "2027-01-04 08:30 CET",
        ]


class TestRateAndAt:
    def test_rate_counts_from_start_at_including_it(self) -> None:
        schedule = compiled("rate(90 minutes)", start_at="2027-01-01T00:00:00Z")
        assert fire_times(schedule, "2026-12-31T00:00Z", 3) == [
            "2027-01-01T00:00Z",
            "2027-01-01T01:30Z",
            "2027-01-01T03:00Z",
        ]

    def test_rate_without_start_counts_from_the_anchor_and_excludes_it(self) -> None:
        schedule = compiled("rate(1 day)", anchor="2027-01-01T10:17:00Z")
        assert fire_times(schedule, "2027-01-01T10:17Z", 2) == [
            "2027-01-02T10:17Z",
            "2027-01-03T10:17Z",
        ]

    def test_rate_resumes_on_its_grid_after_any_instant(self) -> None:
        schedule = compiled("rate(7 minutes)", start_at="2027-01-01T00:00:00Z")
        assert fire_times(schedule, "2027-01-01T01:00Z", 2) == [
            "2027-01-01T01:03Z",
            "2027-01-01T01:10Z",
        ]

    def test_at_fires_once_in_the_job_zone(self) -> None:
        schedule = compiled("at(2027-06-01T09:00:00)", "Europe/Berlin")
        assert fire_times(schedule, "2027-01-01T00:00Z", 3) == ["2027-06-01T07:00Z"]
        assert fire_times(schedule, "2027-06-01T07:00Z", 3) == []

    def test_rate_parses(self) -> None:
        parsed = parse_expression("rate(5 minutes)")
        assert isinstance(parsed, RateExpression) and parsed.interval.total_seconds() == 300


class TestHash:
    def test_h_is_stable_per_job_and_differs_between_jobs(self) -> None:
        first = compiled("H H * * *", key="payments/nightly").next_fires(_utc("2027-01-01T00:00Z"), 2)
        again = compiled("H H * * *", key="payments/nightly").next_fires(_utc("2027-01-01T00:00Z"), 2)
        assert first == again
        spread = {
            compiled("H * * * *", key=f"team/job-{i}").next_fires(_utc("2027-01-01T00:00Z"), 1)[0].at.minute
            for i in range(200)
        }
        assert len(spread) > 40  # 200 jobs land on many different minutes, not all on :00

    def test_hash_values_are_fixed_forever(self) -> None:
        # Changing the hash would move every H job; this pins the function.
        assert hash_value("payments/nightly-invoices", "minute", 60) == hash_value(
            "payments/nightly-invoices", "minute", 60
        )
        assert [hash_value("a/b", "minute", 60), hash_value("a/b", "hour", 24)] == [
            _pinned_minute(),
            _pinned_hour(),
        ]

    def test_h_range_and_step(self) -> None:
        for i in range(50):
            minutes = [
                o.at.minute
                for o in compiled("H(0-29)/15 * * * *", key=f"t/{i}").next_fires(_utc("2027-01-01T00:00Z"), 4)
            ]
            low, high = sorted(set(minutes))
            assert low < 15 and high == low + 15

    def test_h_range(self) -> None:
        for i in range(50):
            hour = compiled("0 H(1-5) * * *", key=f"t/{i}").next_fires(_utc("2027-01-01T00:00Z"), 1)[0].at.hour
            assert 1 <= hour <= 5


def _pinned_minute() -> int:
    import hashlib

    return int.from_bytes(hashlib.sha256(b"a/b\x00minute").digest()[:8], "big") % 60


def _pinned_hour() -> int:
    import hashlib

    return int.from_bytes(hashlib.sha256(b"a/b\x00hour").digest()[:8], "big") % 24


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("", "empty expression"),
        ("* * * *", "a cron entry has 5 fields"),
        ("0 0 * * * *", "for AWS 6-field syntax write cron("),
        ("cron(0 0 * * *)", "AWS cron has 6 fields"),
        ("cron(0 0 * * * *)", "'?' in exactly one of day-of-month and day-of-week"),
        ("cron(0 0 ? * ? *)", "'?' in exactly one of day-of-month and day-of-week"),
        ("cron(0 0 ? * 8 *)", "must be 1-7 (1 = SUN ... 7 = SAT)"),
        ("cron(0 0 ? * 2#6 *)", "the number after '#' must be 1-5"),
        ("cron(0 0 1 * ? 1969)", "year '1969' must lie within 1970-2199"),
        ("cron(0 0 L-2 * ? *)", "'L-n' is not supported"),
        ("61 * * * *", "61"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 * * * H", "a cron entry has 5 fields"),
        ("0 0 H * *", "'H' is allowed in the minute and hour fields only"),
        ("Hx * * * *", "write H, H(a-b), H/n or H(a-b)/n"),
        ("rate(0 minutes)", "at least 1"),
        ("rate(5 minute)", "write rate(5 minutes)"),
        ("rate(1 minutes)", "write rate(1 minute)"),
        ("rate(5 weeks)", "expected rate(N minute|minutes|hour|hours|day|days)"),
        ("rate(400 days)", "at most 366 days"),
        ("at(2027-02-30T00:00:00)", "not a valid date and time"),
        ("at(2027-01-01T00:00:00Z)", "no offset; set schedule.timezone instead"),
        ("@sometimes", "unknown macro @sometimes"),
    ],
)
def test_bad_expressions_say_what_is_allowed(expression: str, message: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        parse_expression(expression)
    assert message in str(caught.value)


def test_day_allowed_filters_last_weekday_exactly() -> None:
    parsed = parse_expression("cron(0 0 LW * ? *)")
    assert isinstance(parsed, CronExpression)
    assert parsed.day_allowed(date(2027, 1, 29)) and not parsed.day_allowed(date(2027, 1, 28))
