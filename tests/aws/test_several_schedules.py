"""#49: several schedules per job, each with its own time zone and payload. Each run says which schedule fired it;
exactly one run per (job, schedule, instant) under redelivery and racing dispatcher ticks; two schedules landing on
one instant make one run unless one says `distinct: true`; and each keeps its local time across both DST changes
of March 2027 (New York on the 14th, London on the 28th)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobsched.cli.harness import run_test_file
from jobsched.core.runs import RunStatus
from jobsched.pipeline.lost_audit import AuditWait, judge_lost
from jobsched.schedule.engine import Occurrence
from tests.aws.api_client import ApiClient
from tests.aws.harness import Clock, Stack

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "schedules" / "market-close.yaml"


def market_close() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return document | {"target": {"type": "lambda", "function": "echo"}}


def test_each_schedule_runs_once_per_instant_with_its_payload_and_says_so(stack: Stack, clock: Clock) -> None:
    clock.set("2027-03-31T19:45:00Z")  # a Wednesday and the month's last day: 16:00 New York is 20:00 UTC
    stack.register(market_close())
    for _ in range(25):
        stack.tick()
        stack.tick()  # a second dispatcher tick in the same minute (a retried invocation) sends nothing new
        clock.advance(timedelta(minutes=1))
        stack.pump(deliveries=2)  # SQS delivers at least once: every message twice
    runs = {run.run_id: run for run in stack.run_list("trading/market-close")}
    assert sorted(runs) == ["20270331T200000Z", "20270331T200000Z-s-month-end"]
    assert all(run.status is RunStatus.SUCCEEDED for run in runs.values())
    us, month = runs["20270331T200000Z"], runs["20270331T200000Z-s-month-end"]
    assert us.trigger_detail == {"kind": "schedule", "schedule": "us-close"} and us.payload == {"market": "us"}
    assert month.trigger_detail == {"kind": "schedule", "schedule": "month-end"} and month.payload == {
        "report": "month"
    }
    invoked = sorted((event["payload"] for name, event in stack.lambdas.calls if name == "echo"), key=str)
    assert invoked == [{"market": "us"}, {"report": "month"}]  # the audit schedule shares us-close's run

    api = ApiClient(stack)
    shown = api.call("GET", "/teams/trading/jobs/market-close/runs/20270331T200000Z-s-month-end").body
    assert shown["trigger_detail"]["schedule"] == "month-end"
    preview = api.call("GET", "/teams/trading/jobs/market-close/preview?count=3&after=2027-04-01T00:00:00Z").body
    assert [(entry["schedule"], entry["local"][11:16]) for entry in preview] == [
        ("eu-close", "17:30"),
        ("us-close", "16:00"),
        ("eu-close", "17:30"),
    ]
    assert preview[1]["skipped"] is None and preview[2]["skipped"][0]["reason"].startswith("the same instant as")


@pytest.mark.parametrize("week", ["2027-03-08", "2027-03-15", "2027-03-29"])
def test_each_schedule_keeps_its_local_time_across_the_dst_changes(week: str, tmp_path: Path) -> None:
    """Before either change, after New York's, after London's: 17:30 London and 16:00 New York every time."""
    test = tmp_path / "close.test.yaml"
    monday = date.fromisoformat(week)
    window = {"from": f"{monday}T00:00:00Z", "to": f"{monday + timedelta(days=5)}T00:00:00Z"}  # to Friday night
    (tmp_path / "close.yaml").write_text(EXAMPLE.read_text())
    test.write_text(yaml.safe_dump({"job": "close.yaml", "window": window, "expect": {}}))
    observed = run_test_file(test).observed
    offsets = {"2027-03-08": ("17:30", "21:00"), "2027-03-15": ("17:30", "20:00"), "2027-03-29": ("16:30", "20:00")}
    london, new_york = offsets[week]
    month_end = ["20:00"] if week == "2027-03-29" else []  # Wednesday the 31st: the month end's own run
    expected = [london, new_york] * 2 + [london, new_york, *month_end] + [london, new_york] * 2
    assert [fire[11:16] for fire in observed.fires] == expected


def test_a_lost_message_of_one_schedule_is_found_and_the_shared_instant_not_settled_early() -> None:
    """The audit mark never covers an instant only partly settled: the month end's run may still be queued while
    the New York close's has its record."""
    at = datetime(2027, 3, 31, 20, tzinfo=UTC)
    us = Occurrence(at=at, wall=at, fires=True, fire_at=at, schedule="us-close")
    month = replace(us, schedule="month-end", distinct=True)
    wait = AuditWait(lost_after=timedelta(minutes=15))
    early = judge_lost([us, month], {us.run_id}, at + timedelta(minutes=5), wait)
    assert early.lost == [] and early.audited_to is None  # the month end's may still come
    late = judge_lost([us, month], {us.run_id}, at + timedelta(minutes=16), wait)
    assert late.lost == [month] and late.audited_to == at and month.run_id == "20270331T200000Z-s-month-end"
