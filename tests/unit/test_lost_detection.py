"""Lost run messages found at the job's pace (the pipeline of ``scripts/bench_lost_detection.py``, which prints these
figures): with no backlog in its priority class, a minutely job's lost instant is recorded MISSED and paged within 5
minutes; under a deep backlog, an instant that is only queued is never recorded MISSED (the audit waits the long
way, 15 minutes)."""

from __future__ import annotations

from datetime import timedelta

from jobsched.core.runs import scheduled_run_id
from scripts.bench_lost_detection import START, Pipeline, detection_delay, false_missed_under_backlog


def test_with_no_backlog_a_lost_instant_of_a_minutely_job_is_recorded_and_paged_within_5_minutes() -> None:
    delays = [detection_delay(minute, quick=True) for minute in (3, 7, 11)]
    assert all(delay is not None and delay <= 5 for delay in delays), delays
    before = detection_delay(3, quick=False)  # the 15-minute wait alone, as before #48
    assert before is not None and before >= 15
    pipeline = Pipeline(quick=True)
    lost = scheduled_run_id(START + timedelta(seconds=30, minutes=3))
    for minute in range(12):
        pipeline.minute()
        if minute == 0:
            assert pipeline.purge(lost)
    assert pipeline.missed() == {lost}, "only the lost one"
    [page] = [event for event in pipeline.escalations.events if event["kind"] == "missed_schedule"]
    assert page["job"] == "data/minutely"


def test_under_a_deep_backlog_an_instant_only_queued_is_never_recorded_missed() -> None:
    assert false_missed_under_backlog(500, 14) == 0
