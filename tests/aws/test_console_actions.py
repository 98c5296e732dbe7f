"""The console's buttons over real tables (moto): the call CloudWatch makes for a ``<cwdb-action>``, through a
team's alias, carried out by the API's domain functions and audited; everything else refused, nothing written."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest

from jobsched.console.actions import ActionResult, ActionStores, confirm_identity, handle_action, team_of_alias
from jobsched.console.widget import Viewer, WidgetControls, render_widget
from jobsched.core.runs import RunStatus
from tests.aws.harness import Clock, FakeLambdas, Stack

ACTIONS_FN = "arn:aws:lambda:us-east-1:123456789012:function:jobsched-test-ConsoleActions"
REPORT = {
    "name": "report",
    "team": "ops",
    "schedule": {"expression": "0 * * * *"},
    "target": {"type": "lambda", "function": "flaky"},
    "retry": {"max_attempts": 1},
}


@pytest.fixture
def lambdas() -> FakeLambdas:
    def flaky(event: dict[str, Any]) -> Any:
        raise RuntimeError("downstream is down")

    return FakeLambdas(functions={"flaky": flaky, "echo": lambda event: {}})


def call(
    stack: Stack, event: dict[str, Any], *, alias: str | None = "team-ops", request: str = "req-1"
) -> ActionResult:
    """What the actions handler does with CloudWatch's call: the invoked ARN carries the alias."""
    arn = f"{ACTIONS_FN}:{alias}" if alias else ACTIONS_FN
    stores = ActionStores(stack.jobs, stack.runs, stack.queues)
    return handle_action(event, invoked_function_arn=arn, request_id=request, stores=stores, now=stack.clock())


def widget_event(params: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
    """A button's JSON as CloudWatch sends it: the parameters at the top, the page's form in the context."""
    forms = {"all": {"reason": reason}} if reason is not None else {"all": {}}
    return {**params, "widgetContext": {"forms": forms, "params": {"view": "team", "team": "ops"}}}


def test_the_buttons_on_a_page_pause_resume_trigger_and_rerun_through_the_teams_alias(
    stack: Stack, clock: Clock
) -> None:
    stack.register(REPORT)
    clock.set("2027-01-04T09:00:00Z")
    stack.tick()
    stack.pump()
    [failed] = stack.run_list("ops/report")
    assert failed.status is RunStatus.FAILED
    now = clock()
    controls = WidgetControls(ACTIONS_FN, frozenset({"ops"}))

    def page(**params: str) -> str:
        viewer = Viewer(str(params["team"]))
        return render_widget(
            {"widgetContext": {"params": params}, **params}, stack.jobs, stack.runs, now, controls, viewer=viewer
        )

    # The team page offers pause and trigger, each a call to the ops alias with a confirmation.
    team = page(view="team", team="ops")
    calls = re.findall(
        r'<cwdb-action action="call" display="popup" endpoint="([^"]+)" confirmation="([^"]+)">([^<]+)<', team
    )
    assert {json.loads(body)["action"] for _, _, body in calls} == {"pause", "trigger"}
    assert {endpoint for endpoint, _, _ in calls} == {f"{ACTIONS_FN}:team-ops"}
    assert all(question.endswith("?") or "?" in question for _, question, _ in calls)
    assert 'name="reason"' in team

    # Pause with the reason typed into the page's field.
    [pause] = [json.loads(body) for _, _, body in calls if json.loads(body)["action"] == "pause"]
    result = call(stack, widget_event(pause, reason="vendor outage, INC-42"))
    assert result.ok and result.status == 200, result
    stored = stack.jobs.get("ops/report")
    assert stored is not None and stored.state == "PAUSED" and stored.paused_reason == "vendor outage, INC-42"
    # The job page now offers resume; resume it.
    job_page = page(view="job", team="ops", job="report")
    assert '"action": "resume"' in job_page and '"action": "page_test"' in job_page  # the job's page drills
    assert call(stack, widget_event({"action": "resume", "job": "ops/report"}), request="req-2").ok
    assert stack.jobs.get("ops/report").state == "ACTIVE"  # type: ignore[union-attr]

    # Trigger: a run is queued and runs.
    triggered = call(stack, widget_event({"action": "trigger", "job": "ops/report"}), request="req-3")
    assert triggered.ok and triggered.status == 202
    stack.pump()
    assert len(stack.run_list("ops/report")) == 2

    # Rerun the failed run from its page: the button carries the run id.
    run_page = page(view="run", team="ops", job="report", run_id=failed.run_id)
    [(_, question, body)] = re.findall(
        r'<cwdb-action action="call" display="popup" endpoint="([^"]+)" confirmation="([^"]+)">([^<]+)<', run_page
    )
    assert json.loads(body) == {"action": "rerun", "job": "ops/report", "run_id": failed.run_id, "force": False}
    assert failed.run_id in question
    rerun = call(stack, widget_event(json.loads(body)), request="req-4")
    assert rerun.ok and rerun.status == 202, rerun
    assert stack.runs.get("ops/report", failed.run_id).status is RunStatus.RETRYING  # type: ignore[union-attr]

    # Each action is in the job's history, under the console's name for the caller: the team's alias
    # and the Lambda request, which CloudTrail's record of the invocation ties to the person.
    entries, _ = stack.jobs.history("ops/report", limit=20)
    by_action = {entry.action: entry for entry in entries}
    assert by_action["pause"].principal == "console:team-ops/request/req-1"
    assert by_action["pause"].reason == "vendor outage, INC-42"
    assert by_action["resume"].principal == "console:team-ops/request/req-2"
    assert by_action["trigger"].principal == "console:team-ops/request/req-3"
    assert by_action["rerun"].principal == "console:team-ops/request/req-4"


def test_a_button_edited_to_name_another_teams_job_is_refused_and_changes_nothing(stack: Stack, clock: Clock) -> None:
    stack.register(REPORT)
    stack.register({**REPORT, "team": "payments"})
    before = stack.jobs.history("payments/report", limit=20)[0]
    # The caller may invoke the ops alias only; the event names payments' job.
    result = call(stack, widget_event({"action": "pause", "job": "payments/report"}, reason="mine now"))
    assert not result.ok and result.status == 403 and "payments" in result.message
    assert stack.jobs.get("payments/report").state == "ACTIVE"  # type: ignore[union-attr]
    # The unqualified function (no alias, so no team) acts for nobody.
    unqualified = call(stack, widget_event({"action": "trigger", "job": "ops/report"}), alias=None)
    assert not unqualified.ok and unqualified.status == 403
    assert stack.jobs.history("payments/report", limit=20)[0] == before
    assert stack.run_list("ops/report") == []


@pytest.mark.parametrize(
    ("event", "status", "words"),
    [
        ({"action": "pause", "job": "ops/report"}, 422, "reason"),  # no reason typed
        ({"action": "delete", "job": "ops/report"}, 422, "action"),
        ({"action": "pause", "job": "ops/../x", "reason": "r"}, 422, "job"),
        ({"action": "pause", "job": "ops/report", "reason": "x" * 501}, 422, "reason"),
        ({"action": "rerun", "job": "ops/report"}, 422, "run_id"),
        ({"action": "rerun", "job": "ops/report", "run_id": "no-such-run"}, 404, "no run"),
        ({"action": "trigger", "job": "ops/missing"}, 404, "ops/missing"),
    ],
)
def test_bad_input_gets_a_clear_refusal_and_writes_nothing(
    stack: Stack, event: dict[str, Any], status: int, words: str
) -> None:
    stack.register(REPORT)
    result = call(stack, widget_event(event))
    assert not result.ok and result.status == status and words in result.message, result
    assert "<script" not in result.html()
    assert stack.jobs.get("ops/report").state == "ACTIVE"  # type: ignore[union-attr]
    assert stack.run_list("ops/report") == []


def test_console_actions_count_toward_the_teams_request_rate(stack: Stack) -> None:
    stack.register(REPORT)
    limit = stack.jobs.team_limits("ops").requests_per_minute
    results = [call(stack, widget_event({"action": "resume", "job": "ops/report"})) for _ in range(limit + 1)]
    assert all(r.ok for r in results[:limit]) and results[-1].status == 429


def cloudtrail_record(
    request: str, *, person: str = "arn:aws:sts::123456789012:assumed-role/oncall/ana@example.com", **detail: Any
) -> dict[str, Any]:
    """EventBridge's copy of CloudTrail's data event for one invocation of the actions function."""
    return {
        "id": "7f1c",
        "source": "aws.lambda",
        "detail-type": "AWS API Call via CloudTrail",
        "detail": {
            "eventSource": "lambda.amazonaws.com",
            "eventName": "Invoke",
            "requestID": request,
            "userIdentity": {"type": "AssumedRole", "arn": person},
            "requestParameters": {"functionName": f"{ACTIONS_FN}:team-ops"},
        }
        | detail,
    }


def test_cloudtrails_record_of_the_invocation_names_the_person_on_the_audit_entry_once(stack: Stack) -> None:
    stack.register(REPORT)
    stack.register({**REPORT, "name": "other"})
    assert call(stack, widget_event({"action": "pause", "job": "ops/report"}, reason="INC-7"), request="req-1").ok
    assert call(stack, widget_event({"action": "trigger", "job": "ops/other"}), request="req-2").ok

    confirmed = confirm_identity(cloudtrail_record("req-1"), stack.jobs)
    assert confirmed is not None and confirmed[1] == "ops/report" and confirmed[0].team == "ops"
    entries, _ = stack.jobs.history("ops/report", limit=20)
    [pause] = [e for e in entries if e.action == "pause"]
    assert pause.confirmed_by == "arn:aws:sts::123456789012:assumed-role/oncall/ana@example.com"
    # Only that request's entry: the registration and the other job's trigger keep no name.
    assert all(e.confirmed_by is None for e in entries if e.action != "pause")
    [trigger] = [e for e in stack.jobs.history("ops/other", limit=20)[0] if e.action == "trigger"]
    assert trigger.confirmed_by is None
    # A redelivered (or forged) record for the same request does not rename it.
    assert confirm_identity(cloudtrail_record("req-1", person="arn:aws:iam::123456789012:user/mallory"), stack.jobs)
    [again] = [e for e in stack.jobs.history("ops/report", limit=20)[0] if e.action == "pause"]
    assert again.confirmed_by == pause.confirmed_by


@pytest.mark.parametrize(
    "record",
    [
        cloudtrail_record("req-unknown"),  # a request that never reached a job
        cloudtrail_record("req-1", eventName="GetFunction"),
        cloudtrail_record("req-1", requestParameters={"functionName": ACTIONS_FN}),  # no alias: no team
        cloudtrail_record("req-1", requestParameters={"functionName": f"{ACTIONS_FN}:team-payments"}),
        cloudtrail_record("req-1", userIdentity={}),
        cloudtrail_record("../x"),
        {"detail": "not a record"},
        {},
    ],
)
def test_a_record_of_anything_else_names_nobody(stack: Stack, record: dict[str, Any]) -> None:
    stack.register(REPORT)
    assert call(stack, widget_event({"action": "trigger", "job": "ops/report"}), request="req-1").ok
    assert confirm_identity(record, stack.jobs) is None
    assert all(e.confirmed_by is None for e in stack.jobs.history("ops/report", limit=20)[0])


def test_a_refused_call_for_another_teams_job_leaves_nothing_to_confirm(stack: Stack) -> None:
    stack.register({**REPORT, "team": "payments"})
    assert call(stack, widget_event({"action": "trigger", "job": "payments/report"}), request="req-9").status == 403
    assert confirm_identity(cloudtrail_record("req-9"), stack.jobs) is None
    payments = {
        **cloudtrail_record("req-9")["detail"],
        "requestParameters": {"functionName": f"{ACTIONS_FN}:team-payments"},
    }
    assert confirm_identity({"detail": payments}, stack.jobs) is None
    assert all(e.confirmed_by is None for e in stack.jobs.history("payments/report", limit=20)[0])


@pytest.mark.parametrize(
    "function, qualifier",
    [
        (f"{ACTIONS_FN}:team-ops", None),  # the full ARN
        (f"{ACTIONS_FN.split(':')[-1]}:team-ops", None),  # NAME:alias
        (":".join(ACTIONS_FN.split(":")[4:]) + ":team-ops", None),  # ACCOUNT:function:NAME:alias (partial ARN)
        (ACTIONS_FN.split(":")[-1], "team-ops"),  # NAME with the alias as Qualifier
        (ACTIONS_FN, "team-ops"),
    ],
)
def test_every_form_of_naming_the_alias_names_the_person(stack: Stack, function: str, qualifier: str | None) -> None:
    stack.register(REPORT)
    assert call(stack, widget_event({"action": "trigger", "job": "ops/report"}), request="req-1").ok
    parameters = {"functionName": function, **({"qualifier": qualifier} if qualifier else {})}
    confirmed = confirm_identity(cloudtrail_record("req-1", requestParameters=parameters), stack.jobs)
    assert confirmed is not None and confirmed[0].team == "ops"
    [trigger] = [e for e in stack.jobs.history("ops/report", limit=20)[0] if e.action == "trigger"]
    assert trigger.confirmed_by == "arn:aws:sts::123456789012:assumed-role/oncall/ana@example.com"


@pytest.mark.parametrize("function", ["team-ops", "a:b:c:d:e:team-ops", f"{ACTIONS_FN}:team-Op$", f"{ACTIONS_FN}:1"])
def test_a_name_that_is_no_teams_alias_names_nobody(function: str) -> None:
    assert team_of_alias(function) is None


def test_an_action_nobody_was_named_for_is_flagged_unconfirmed_after_an_hour(stack: Stack, clock: Clock) -> None:
    stack.register(REPORT)
    assert call(stack, widget_event({"action": "trigger", "job": "ops/report"}), request="req-1").ok
    [trigger] = [e for e in stack.jobs.history("ops/report", limit=20)[0] if e.action == "trigger"]
    assert not trigger.unconfirmed(clock() + timedelta(minutes=59))
    assert trigger.unconfirmed(clock() + timedelta(minutes=61))
    confirm_identity(cloudtrail_record("req-1"), stack.jobs)
    [trigger] = [e for e in stack.jobs.history("ops/report", limit=20)[0] if e.action == "trigger"]
    assert not trigger.unconfirmed(clock() + timedelta(days=1))
    [created] = [e for e in stack.jobs.history("ops/report", limit=20)[0] if e.action != "trigger"]
    assert not created.unconfirmed(clock() + timedelta(days=1))  # not a console action
