"""Calendars (holidays, business days, excluded dates) and blackout windows (skip, defer)."""

from __future__ import annotations

from tests.helpers import compiled, fire_times, local_times, utc

NY = "America/New_York"


class TestCalendar:
    def test_us_holidays_are_skipped_with_the_holiday_named(self) -> None:
        schedule = compiled("0 9 * * *", NY, calendar={"skip_holidays": "US"})
        [(fire, skipped)] = schedule.preview(utc("2027-07-03T14:00Z"), 1)
        assert f"{fire.at:%Y-%m-%d}" == "2027-07-06"
        reasons = [s.reason or "" for s in skipped]
        # 2027-07-04 is a Sunday, observed on Monday the 5th: both are holidays in the US calendar.
        assert any("Independence Day" in r and "2027-07-04" in r for r in reasons)
        assert any("2027-07-05" in r for r in reasons)

    def test_subdivision_holidays(self) -> None:
        # Patriots' Day is a Massachusetts holiday (third Monday of April), not a federal one.
        federal = compiled("0 9 * * *", NY, calendar={"skip_holidays": "US"})
        massachusetts = compiled("0 9 * * *", NY, calendar={"skip_holidays": "US-MA"})
        assert local_times(federal, "2027-04-19T00:00Z", 1) == ["2027-04-19 09:00 EDT"]
        assert local_times(massachusetts, "2027-04-19T00:00Z", 1) == ["2027-04-20 09:00 EDT"]

    def test_market_calendar(self) -> None:
        # Good Friday: NYSE closed, not a US federal holiday.
        schedule = compiled("0 16 * * *", NY, calendar={"skip_holidays": "NYSE"})
        assert local_times(schedule, "2027-03-26T00:00Z", 1) == ["2027-03-27 16:00 EDT"]
        schedule = compiled("0 16 * * *", NY, calendar={"skip_holidays": "NYSE", "business_days_only": True})
        assert local_times(schedule, "2027-03-26T00:00Z", 1) == ["2027-03-29 16:00 EDT"]

    def test_business_days_use_the_local_date_not_the_utc_date(self) -> None:
        # 20:00 Friday in New York is already Saturday in UTC; it is still a business day here.
        schedule = compiled("0 20 * * *", NY, calendar={"business_days_only": True})
        assert local_times(schedule, "2027-01-08T12:00Z", 2) == [
            "2027-01-08 20:00 EST",
            "2027-01-11 20:00 EST",
        ]

    def test_weekend_follows_the_holiday_country(self) -> None:
        # The UAE weekend is Saturday-Sunday since 2022; Israel's is Friday-Saturday.
        israel = compiled(
            "0 9 * * *",
            "Asia/Jerusalem",
            calendar={"skip_holidays": "IL", "business_days_only": True},
        )
        weekdays = {f"{o.at:%a}" for o in israel.next_fires(utc("2027-01-03T00:00Z"), 10)}
        assert "Fri" not in weekdays and "Sat" not in weekdays and "Sun" in weekdays

    def test_excluded_dates(self) -> None:
        schedule = compiled("0 9 * * *", calendar={"exclude_dates": ["2027-12-24", "2027-12-31"]})
        assert fire_times(schedule, "2027-12-23T12:00Z", 2) == [
            "2027-12-25T09:00Z",
            "2027-12-26T09:00Z",
        ]

    def test_a_calendar_that_excludes_everything_gives_nothing_not_a_hang(self) -> None:
        schedule = compiled("0 9 * * 6", calendar={"business_days_only": True})
        assert schedule.next_fires(utc("2027-01-01T00:00Z"), 1) == []


class TestBlackouts:
    def test_skip_window(self) -> None:
        schedule = compiled(
            "0 * * * *",
            NY,
            blackouts=[{"cron": "0 22 * * FRI", "duration": "4h", "action": "skip"}],
        )
        assert local_times(schedule, "2027-01-09T01:30Z", 3) == [
            "2027-01-08 21:00 EST",
            "2027-01-09 02:00 EST",
            "2027-01-09 03:00 EST",
        ]

    def test_skipped_instants_carry_the_window(self) -> None:
        schedule = compiled("0 * * * *", blackouts=[{"cron": "0 22 * * FRI", "duration": "2h"}])
        [(fire, skipped)] = schedule.preview(utc("2027-01-08T21:30Z"), 1)
        assert fire.at == utc("2027-01-09T00:00Z")
        assert [f"{s.at:%H:%M}" for s in skipped] == ["22:00", "23:00"]
        assert "in blackout '0 22 * * FRI' for 2h" in (skipped[0].reason or "")

    def test_defer_fires_once_at_the_window_end(self) -> None:
        schedule = compiled(
            "*/30 * * * *",
            blackouts=[{"cron": "0 22 * * FRI", "duration": "4h", "action": "defer"}],
        )
        fires = schedule.next_fires(utc("2027-01-08T21:00Z"), 3)
        assert [f"{f.at:%Y-%m-%dT%H:%M}" for f in fires] == [
            "2027-01-08T21:30",
            "2027-01-09T02:00",
            "2027-01-09T02:30",
        ]
        deferred = fires[1]
        # The instants 22:00 ... 01:30 became one run at 02:00 (which was itself due: merged, not doubled).
        assert len(deferred.moved_from) == 8

    def test_defer_when_after_is_inside_the_window(self) -> None:
        schedule = compiled(
            "30 1 * * *",
            NY,
            blackouts=[{"cron": "0 22 * * FRI", "duration": "4h", "action": "defer"}],
        )
        fires = schedule.next_fires(utc("2027-01-09T06:45Z"), 2)
        assert [f"{f.at:%Y-%m-%dT%H:%M}Z" for f in fires] == [
            "2027-01-09T07:00Z",
            "2027-01-10T06:30Z",
        ]
        assert fires[0].reason is not None and fires[0].reason.startswith("deferred by blackout")

    def test_absolute_window(self) -> None:
        schedule = compiled(
            "0 * * * *",
            blackouts=[{"start": "2027-01-01T10:00:00Z", "end": "2027-01-01T12:30:00Z", "action": "defer"}],
        )
        assert fire_times(schedule, "2027-01-01T09:30Z", 3) == [
            "2027-01-01T12:30Z",
            "2027-01-01T13:00Z",
            "2027-01-01T14:00Z",
        ]

    def test_overlapping_recurring_windows_merge(self) -> None:
        # Windows start every hour and last 90 minutes: one continuous blackout.
        schedule = compiled(
            "*/20 * * * *",
            blackouts=[{"cron": "0 1-3 * * *", "duration": "90m", "action": "defer"}],
        )
        assert fire_times(schedule, "2027-01-01T00:50Z", 3) == [
            "2027-01-01T04:30Z",
            "2027-01-01T04:40Z",
            "2027-01-01T05:00Z",
        ]


class TestWindow:
    def test_start_and_end_are_inclusive(self) -> None:
        schedule = compiled("0 * * * *", start_at="2027-01-01T03:00:00Z", end_at="2027-01-01T05:00:00Z")
        assert fire_times(schedule, "2026-12-31T00:00Z", 10) == [
            "2027-01-01T03:00Z",
            "2027-01-01T04:00Z",
            "2027-01-01T05:00Z",
        ]

    def test_window_with_offsets_is_stored_in_utc(self) -> None:
        schedule = compiled("0 * * * *", "Asia/Kolkata", start_at="2027-01-01T09:00:00+05:30")
        # 09:00+05:30 is 03:30Z, itself an instant of this schedule (minute :00 in Kolkata is :30 in UTC).
        assert fire_times(schedule, "2026-12-31T00:00Z", 2) == ["2027-01-01T03:30Z", "2027-01-01T04:30Z"]
