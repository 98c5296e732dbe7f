"""The template's own alarms evaluated locally (infra.local.cloudwatch): statistics, M of N, missing data, metric
math, and the alarms that matter driven to ALARM and back from datapoints alone."""

from __future__ import annotations

from typing import Any

import pytest

from infra.local.cloudwatch import (
    AlarmBoard,
    AlarmSpec,
    Datapoints,
    MetricQuery,
    alarms_from_template,
    evaluate,
    evaluate_expression,
    metric_key,
    statistic,
)
from jobsched.watch.signals import NAMESPACE

Template = tuple[dict[str, Any], Any]
NOW = 1_800_000_000.0  # a period boundary for every period used here


def resolve(value: Any) -> str:
    """Deployed names as the tests know them: a Ref or GetAtt stands for its logical id."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return str(value["Ref"])
    if "Fn::GetAtt" in value:
        return str(value["Fn::GetAtt"][0])
    if "Fn::Join" in value:
        return "".join(resolve(part) for part in value["Fn::Join"][1])
    raise ValueError(value)


def by_name(template: dict[str, Any], name: str) -> AlarmSpec:
    [found] = [a for a in alarms_from_template(template, resolve) if a.name == f"jobsched-dev-{name}"]
    return found


def finished(data: Datapoints, outcome: str, count: int, at: float) -> None:
    for index in range(count):
        data.put(metric_key(NAMESPACE, "RunsFinished", {"outcome": outcome}), 1, at + index)


def test_statistics_as_cloudwatch_computes_them() -> None:
    values = [float(v) for v in range(1, 101)]
    assert statistic("Sum", values) == 5050 and statistic("Average", values) == 50.5
    assert statistic("p99", values) == 99 and statistic("p50", values) == 50 and statistic("Maximum", values) == 100
    assert statistic("SampleCount", values) == 100 and statistic("Sum", []) is None


def test_metric_math_with_if_fill_and_missing_inputs() -> None:
    ratio = "IF(FILL(ok, 0) + FILL(bad, 0) > 0, FILL(bad, 0) / (FILL(ok, 0) + FILL(bad, 0)), 0)"
    assert evaluate_expression(ratio, {"ok": 3.0, "bad": 1.0}) == 0.25
    assert evaluate_expression(ratio, {"ok": None, "bad": 2.0}) == 1.0
    assert evaluate_expression(ratio, {"ok": None, "bad": None}) == 0.0
    assert evaluate_expression("bad / (ok + bad)", {"ok": None, "bad": 2.0}) is None, "no FILL: no datapoint"
    with pytest.raises(ValueError):
        evaluate_expression("__import__('os')", {})


def test_m_of_n_and_each_missing_data_treatment() -> None:
    key = metric_key(NAMESPACE, "DueJobs", {})
    alarm = AlarmSpec(
        name="a",
        queries=(MetricQuery("m", key, "Sum", 60),),
        threshold=5,
        comparison="GreaterThanThreshold",
        evaluation_periods=3,
        datapoints_to_alarm=2,
        period=60,
    )
    data = Datapoints()
    data.put(key, 10, NOW - 30)  # the last period breaches, the two before have no data
    assert evaluate(alarm, data, NOW)[0] == "OK"  # missing: not counted
    assert evaluate(AlarmSpec(**{**alarm.__dict__, "treat_missing": "breaching"}), data, NOW)[0] == "ALARM"
    data.put(key, 7, NOW - 90)
    state, reason = evaluate(alarm, data, NOW)
    assert state == "ALARM" and reason.startswith("2 of the last 3 periods breaching (10, 7, missing)")
    assert evaluate(alarm, Datapoints(), NOW)[0] == "INSUFFICIENT_DATA"


def test_the_fast_burn_alarm_fires_on_failures_alone_and_clears_on_successes(dev: Template) -> None:
    """The template's SloFastBurn, as synthesized. Failures with no time-outs in the hour used to leave the
    expression without a datapoint (no FILL), so the alarm could not fire: the evaluator found it."""
    alarm = by_name(dev[0], "SloFastBurn")
    assert alarm.period == 3600 and alarm.treat_missing == "notBreaching"
    data = Datapoints()
    finished(data, "failed", 3, NOW - 600)
    assert evaluate(alarm, data, NOW)[0] == "ALARM"
    board = AlarmBoard([alarm])
    assert [state for _, state, _ in board.evaluate(data, NOW)] == ["ALARM"]
    finished(data, "succeeded", 100, NOW + 60)
    assert [state for _, state, _ in board.evaluate(data, NOW + 3600)] == ["OK"]  # 3 in 103: within budget


def test_a_stopped_dispatcher_drives_missed_ticks_and_a_dead_letter_drives_the_dlq_alarm(dev: Template) -> None:
    ticks = by_name(dev[0], "DispatcherMissedTicks")
    [(namespace, name, dimensions)] = [q.key for q in ticks.queries if q.key]
    data = Datapoints()
    assert evaluate(ticks, data, NOW)[0] == "ALARM", "no invocations at all: missing data breaches"
    for minute in range(5):
        data.put((namespace, name, dimensions), 1, NOW - 300 + minute * 60)
    assert evaluate(ticks, data, NOW)[0] == "OK"
    dlq = by_name(dev[0], "DlqNormalNotEmpty")
    [key] = [q.key for q in dlq.queries if q.key]
    data.put(key, 1, NOW - 10)
    assert evaluate(dlq, data, NOW)[0] == "ALARM"


def test_a_new_alarm_judges_no_period_that_began_before_it_was_created(dev: Template) -> None:
    """#46: the missed-ticks alarms started in ALARM for minutes on a healthy stack, on periods that began before
    the stack could send anything. A new alarm is INSUFFICIENT_DATA until a whole period has passed."""
    alarm = by_name(dev[0], "DispatcherMissedTicks")
    span = alarm.period
    created = NOW - span / 2
    board = AlarmBoard([alarm], created=created)
    assert board.evaluate(Datapoints(), NOW) == [], "no change from INSUFFICIENT_DATA"
    [row] = board.rows()
    assert row["state"] == "INSUFFICIENT_DATA" and row["reason"] == "no whole period since the alarm was created"
    later = NOW + span * (alarm.evaluation_periods + 1)
    [(_, state, _)] = board.evaluate(Datapoints(), later)
    assert state == "ALARM", "no ticks at all in whole periods since: breaching, as in AWS"


def test_time_scale_makes_a_five_minute_period_last_five_seconds(dev: Template) -> None:
    alarm = by_name(dev[0], "JobsQuarantined")
    data = Datapoints()
    data.put(metric_key(NAMESPACE, "QuarantinedJobs", {}), 1, NOW - 3)
    assert evaluate(alarm, data, NOW, scale=60)[0] == "ALARM"
    assert evaluate(alarm, data, NOW + 10, scale=60)[0] == "OK"


def test_every_alarm_of_the_template_can_be_evaluated(dev: Template) -> None:
    alarms = alarms_from_template(dev[0], resolve)
    assert (
        len(alarms) == 40
    )  # 28 before #28: + the events DLQ, errors, event-to-start p99, refused sources, unpublished Run Finished;
    # + WaitTimeouts (#29); + fast and slow burn of the critical and important tiers (#48)
    board = AlarmBoard(alarms, scale=60)
    board.evaluate(Datapoints(), NOW)
    states = {row["alarm"]: row["state"] for row in board.rows()}
    breaching_when_silent = {"jobsched-dev-DispatcherMissedTicks", "jobsched-dev-HeartbeatMissedTicks"}
    assert {name for name, state in states.items() if state == "ALARM"} == breaching_when_silent


def test_the_local_runtime_feeds_api_5xx_message_age_and_throttles(dev: Template, tmp_path: Any) -> None:
    """What the runtime observes beyond EMF: each gateway response, each received message's age, each
    invocation's (zero) throttles. Bad input (4xx) never drives the 5xx alarm; six 5xx in a period do."""
    from infra.local.alarms import LocalAlarms

    clock = [NOW - 3600]  # the alarms were created an hour ago: every period judged began after
    local = LocalAlarms(
        dev[0], {}, endpoint="http://unused", region="us-east-1", state_file=tmp_path / "a.json", clock=lambda: clock[0]
    )
    clock[0] = NOW - 60

    def states() -> dict[str, str]:
        local.board.evaluate(local.data, NOW)
        return {row["alarm"].removeprefix("jobsched-dev-"): row["state"] for row in local.board.rows()}

    for _ in range(40):
        local.api_response(422)
    for function in ("Dispatcher", "Worker", "Api"):
        local.invoked(function, failed=False)
    assert states()["Api5xx"] == "OK" and states()["WorkerThrottles"] == "OK"
    for _ in range(6):
        local.api_response(502)
    [escalations] = [queue for queue in local.queues if queue.startswith("QueuesEscalations") and "Dlq" not in queue]
    local.received(escalations, sent_at=NOW - 60 - 1000)  # redelivered for 16 minutes: pages are stuck
    after = states()
    assert after["Api5xx"] == "ALARM" and after["EscalationsOldest"] == "ALARM"
