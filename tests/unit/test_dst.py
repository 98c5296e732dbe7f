"""DST: ISC cron semantics by default, per-schedule overrides, in the zones that break schedulers."""

from __future__ import annotations

import itertools

import pytest

from tests.helpers import compiled, fire_times, local_times, utc

NY = "America/New_York"


class TestNewYorkFallBack:
    """2027-11-07: 01:00-01:59 happens twice (EDT, then EST)."""

    def test_fixed_time_job_runs_once_on_the_first_occurrence(self) -> None:
        schedule = compiled("30 1 * * *", NY)
        assert local_times(schedule, "2027-11-06T00:00Z", 3) == [
            "2027-11-06 01:30 EDT",
            "2027-11-07 01:30 EDT",
            "2027-11-08 01:30 EST",
        ]

    def test_the_second_occurrence_is_reported_as_skipped(self) -> None:
        schedule = compiled("30 1 * * *", NY)
        [(fire, skipped)] = [entry for entry in schedule.preview(utc("2027-11-07T00:00Z"), 2) if entry[1]]
        assert fire.at == utc("2027-11-08T06:30Z")
        assert skipped[0].at == utc("2027-11-07T06:30Z")
        assert "occurs twice" in (skipped[0].reason or "")

    def test_aws_cron_fixed_time_runs_once(self) -> None:
        schedule = compiled("cron(30 1 * * ? *)", NY)
        assert fire_times(schedule, "2027-11-07T00:00Z", 2) == [
            "2027-11-07T05:30Z",
            "2027-11-08T06:30Z",
        ]

    def test_hourly_wildcard_job_runs_in_both_copies_of_the_repeated_hour(self) -> None:
        schedule = compiled("0 * * * *", NY)
        assert local_times(schedule, "2027-11-07T03:30Z", 4) == [
            "2027-11-07 00:00 EDT",
            "2027-11-07 01:00 EDT",
            "2027-11-07 01:00 EST",
            "2027-11-07 02:00 EST",
        ]

    def test_every_30_minutes_is_evenly_spaced_through_the_overlap(self) -> None:
        schedule = compiled("*/30 * * * *", NY)
        assert fire_times(schedule, "2027-11-07T04:45Z", 5) == [
            "2027-11-07T05:00Z",
            "2027-11-07T05:30Z",
            "2027-11-07T06:00Z",
            "2027-11-07T06:30Z",
            "2027-11-07T07:00Z",
        ]

    @pytest.mark.parametrize(
        ("fold", "expected"),
        [
            ("first", ["2027-11-07T05:30Z", "2027-11-08T06:30Z"]),
            ("last", ["2027-11-07T06:30Z", "2027-11-08T06:30Z"]),
            ("both", ["2027-11-07T05:30Z", "2027-11-07T06:30Z"]),
        ],
    )
    def test_fold_override(self, fold: str, expected: list[str]) -> None:
        schedule = compiled("30 1 * * *", NY, dst={"fold": fold})
        assert fire_times(schedule, "2027-11-07T00:00Z", 2) == expected

    def test_fold_first_on_a_wildcard_entry_runs_the_repeated_hour_once(self) -> None:
        schedule = compiled("0 * * * *", NY, dst={"fold": "first"})
        assert fire_times(schedule, "2027-11-07T04:30Z", 3) == [
            "2027-11-07T05:00Z",
            "2027-11-07T07:00Z",
            "2027-11-07T08:00Z",
        ]

    def test_after_inside_the_second_copy_still_finds_its_later_instants(self) -> None:
        schedule = compiled("*/20 * * * *", NY)
        # 06:10Z is 01:10 EST, the second pass through 01:xx.
        assert fire_times(schedule, "2027-11-07T06:10Z", 3) == [
            "2027-11-07T06:20Z",
            "2027-11-07T06:40Z",
            "2027-11-07T07:00Z",
        ]


class TestNewYorkSpringForward:
    """2027-03-14: 02:00-02:59 does not exist (01:59 EST is followed by 03:00 EDT)."""

    def test_fixed_time_in_the_gap_fires_at_the_first_instant_after_it(self) -> None:
        schedule = compiled("30 2 * * *", NY)
        assert local_times(schedule, "2027-03-13T00:00Z", 3) == [
            "2027-03-13 02:30 EST",
            "2027-03-14 03:00 EDT",
            "2027-03-15 02:30 EDT",
        ]

    def test_the_shifted_run_says_why(self) -> None:
        fire = compiled("30 2 * * *", NY).next_fires(utc("2027-03-14T00:00Z"), 1)[0]
        assert fire.reason == "02:30 does not exist on 2027-03-14 in America/New_York (DST gap): shifted to 03:00"
        assert [w.isoformat() for w in fire.moved_from] == ["2027-03-14T02:30:00"]

    def test_gap_skip_override_skips_the_day(self) -> None:
        schedule = compiled("30 2 * * *", NY, dst={"gap": "skip"})
        assert fire_times(schedule, "2027-03-13T12:00Z", 1) == ["2027-03-15T06:30Z"]

    def test_hourly_wildcard_job_skips_the_missing_hour(self) -> None:
        schedule = compiled("0 * * * *", NY)
        assert local_times(schedule, "2027-03-14T05:30Z", 3) == [
            "2027-03-14 01:00 EST",
            "2027-03-14 03:00 EDT",
            "2027-03-14 04:00 EDT",
        ]

    def test_shift_onto_an_existing_instant_is_one_run_not_two(self) -> None:
        schedule = compiled("0 1-3 * * *", NY)
        assert local_times(schedule, "2027-03-14T05:30Z", 3) == [
            "2027-03-14 01:00 EST",
            "2027-03-14 03:00 EDT",
            "2027-03-15 01:00 EDT",
        ]

    def test_one_time_at_inside_the_gap_is_shifted(self) -> None:
        schedule = compiled("at(2027-03-14T02:30:00)", NY)
        assert local_times(schedule, "2027-01-01T00:00Z", 5) == ["2027-03-14 03:00 EDT"]

    def test_wildcard_with_explicit_gap_shift_collapses_to_one_run(self) -> None:
        schedule = compiled("*/30 * * * *", NY, dst={"gap": "shift"})
        assert local_times(schedule, "2027-03-14T06:15Z", 3) == [
            "2027-03-14 01:30 EST",
            "2027-03-14 03:00 EDT",
            "2027-03-14 03:30 EDT",
        ]


class TestBerlin:
    def test_spring_gap_0230_shifts_to_0300_cest(self) -> None:
        schedule = compiled("30 2 * * *", "Europe/Berlin")
        assert local_times(schedule, "2027-03-27T12:00Z", 2) == [
            "2027-03-28 03:00 CEST",
            "2027-03-29 02:30 CEST",
        ]

    def test_autumn_overlap_0230_runs_once_in_cest(self) -> None:
        schedule = compiled("30 2 * * *", "Europe/Berlin")
        assert local_times(schedule, "2027-10-30T12:00Z", 2) == [
            "2027-10-31 02:30 CEST",
            "2027-11-01 02:30 CET",
        ]


class TestLordHowe:
    """Australia/Lord_Howe moves by 30 minutes: 02:00 -> 02:30 in October, 02:00 -> 01:30 in April."""

    def test_0215_in_the_half_hour_gap_fires_at_0230(self) -> None:
        schedule = compiled("15 2 * * *", "Australia/Lord_Howe")
        fires = schedule.next_fires(utc("2027-10-02T00:00Z"), 2)
        assert [f"{f.at:%Y-%m-%dT%H:%M}Z" for f in fires] == [
            "2027-10-02T15:30Z",
            "2027-10-03T15:15Z",
        ]
        assert fires[0].reason is not None and "shifted to 02:30" in fires[0].reason

    def test_0145_in_the_half_hour_overlap_runs_once(self) -> None:
        schedule = compiled("45 1 * * *", "Australia/Lord_Howe")
        # 2027-04-04: 01:30-01:59 occur twice (+11 then +10:30).
        assert fire_times(schedule, "2027-04-03T00:00Z", 2) == [
            "2027-04-03T14:45Z",
            "2027-04-04T15:15Z",
        ]

    def test_every_15_minutes_skips_the_missing_half_hour(self) -> None:
        schedule = compiled("*/15 * * * *", "Australia/Lord_Howe")
        # 2027-10-03 01:45 (+10:30) = 2027-10-02T15:15Z, then 02:30 (+11) = 15:30Z.
        assert fire_times(schedule, "2027-10-02T15:00Z", 3) == [
            "2027-10-02T15:15Z",
            "2027-10-02T15:30Z",
            "2027-10-02T15:45Z",
        ]


class TestSydney:
    def test_spring_gap_0230_fires_at_0300_aedt(self) -> None:
        schedule = compiled("30 2 * * *", "Australia/Sydney")
        assert local_times(schedule, "2027-10-02T00:00Z", 2) == [
            "2027-10-03 03:00 AEDT",
            "2027-10-04 02:30 AEDT",
        ]

    def test_autumn_overlap_0230_runs_once(self) -> None:
        schedule = compiled("30 2 * * *", "Australia/Sydney")
        assert local_times(schedule, "2027-04-03T00:00Z", 2) == [
            "2027-04-04 02:30 AEDT",
            "2027-04-05 02:30 AEST",
        ]


class TestKolkata:
    def test_half_hour_offset_without_dst(self) -> None:
        schedule = compiled("0 9 * * *", "Asia/Kolkata")
        assert fire_times(schedule, "2027-03-14T00:00Z", 2) == [
            "2027-03-14T03:30Z",
            "2027-03-15T03:30Z",
        ]

    def test_no_gaps_or_overlaps_all_year(self) -> None:
        schedule = compiled("0 * * * *", "Asia/Kolkata")
        fires = schedule.next_fires(utc("2027-01-01T00:00Z"), 24 * 365)
        assert all(f.reason is None for f in fires)
        assert all((b.at - a.at).total_seconds() == 3600 for a, b in itertools.pairwise(fires))


def test_rate_is_absolute_across_dst() -> None:
    schedule = compiled("rate(6 hours)", NY, start_at="2027-03-13T12:00:00Z")
    assert fire_times(schedule, "2027-03-13T12:00Z", 4) == [
        "2027-03-13T18:00Z",
        "2027-03-14T00:00Z",
        "2027-03-14T06:00Z",
        "2027-03-14T12:00Z",
    ]
    assert local_times(schedule, "2027-03-13T12:00Z", 4)[2:] == [
        "2027-03-14 01:00 EST",
        "2027-03-14 08:00 EDT",
    ]


def test_a_date_the_zone_skipped_entirely_has_no_run_and_the_next_date_runs_once() -> None:
    """Samoa skipped 2011-12-30 (crossing the date line): a daily 01:00 job runs on the 29th and the 31st once each."""
    from collections import Counter
    from zoneinfo import ZoneInfo

    from jobsched.core.spec import Schedule
    from jobsched.schedule.engine import compile_schedule

    apia = ZoneInfo("Pacific/Apia")
    schedule = Schedule.model_validate({"expression": "0 1 * * *", "timezone": "Pacific/Apia"})
    compiled = compile_schedule(schedule, hash_key="a/b", anchor=utc("2011-01-01T00:00:00Z"))
    occurrences = list(compiled.occurrences(utc("2011-12-28T00:00:00Z"), until=utc("2012-01-01T00:00:00Z")))
    fired = Counter(o.at.astimezone(apia).date().isoformat() for o in occurrences if o.fires)
    assert fired == {"2011-12-28": 1, "2011-12-29": 1, "2011-12-31": 1, "2012-01-01": 1}
    [skipped] = [o for o in occurrences if not o.fires]
    assert skipped.reason == "2011-12-30 does not exist in Pacific/Apia (the zone skipped the whole day)"
