"""The template's alarms and dashboards: who they page, what they watch, where their runbooks are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobsched.core.names import PRIORITIES
from tests.infra.templates import (
    Template,
    _actions,
    _service,
    resources,
)


def test_alarms_page_the_ops_topic_with_their_thresholds(dev: Template) -> None:
    template = dev[0]
    topics = {n for n, p in resources(template, "AWS::SNS::Topic").items() if p["TopicName"].endswith("ops-alarms")}
    assert all("KmsMasterKeyId" in p for p in resources(template, "AWS::SNS::Topic").values())
    alarms = {
        p["AlarmName"].removeprefix("jobsched-dev-"): p for p in resources(template, "AWS::CloudWatch::Alarm").values()
    }
    assert {
        "DlqHighNotEmpty",
        "DlqNormalNotEmpty",
        "DlqLowNotEmpty",
        "DispatcherErrors",
        "DispatcherMissedTicks",
        "JobsQuarantined",
        "FireLatenessP99Normal",
        "SloFastBurn",
        "SloSlowBurn",
        "OldestMessageNormal",
        "WorkerThrottles",
    } <= set(alarms)
    for alarm in alarms.values():
        assert [a["Ref"] for a in alarm["AlarmActions"]] == list(topics)
    assert alarms["DlqNormalNotEmpty"]["Threshold"] == 0
    assert alarms["SloFastBurn"]["Threshold"] == pytest.approx(14.4 * 0.005)
    assert alarms["SloSlowBurn"]["Threshold"] == pytest.approx(6 * 0.005)
    # Per tier, from the platform's objectives: critical 99.9%, important 99.5%; best-effort never pages.
    assert alarms["SloFastBurnCritical"]["Threshold"] == pytest.approx(14.4 * 0.001)
    assert alarms["SloSlowBurnImportant"]["Threshold"] == pytest.approx(6 * 0.005)
    assert not [name for name in alarms if "Best" in name]
    assert alarms["FireLatenessP99High"]["Threshold"] == 5.0
    assert alarms["DispatcherMissedTicks"]["ComparisonOperator"] == "LessThanThreshold"


def test_four_dashboards_and_the_jobs_one_is_the_console(dev: Template) -> None:
    dashboards = resources(dev[0], "AWS::CloudWatch::Dashboard")
    names = {p["DashboardName"] for p in dashboards.values()}
    assert names == {"jobsched-dev-executive", "jobsched-dev-oncall", "jobsched-dev-debug", "jobsched-dev-jobs"}
    [jobs] = [p for p in dashboards.values() if p["DashboardName"] == "jobsched-dev-jobs"]
    body = json.dumps(jobs["DashboardBody"])
    [console] = [
        logical
        for logical, f in resources(dev[0], "AWS::Lambda::Function").items()
        if f.get("Handler") == "functions.console.handler.handler"
    ]
    assert body.count('\\"type\\":\\"custom\\"') == 5 and console in body, "five custom widgets, the console"
    for view in ("team", "slo", "changes", "timeline", "job"):
        assert f'\\"view\\":\\"{view}\\"' in body, view
    assert "CONSOLE_TEAM" in body and '\\"variables\\"' in body, "the team comes from a dashboard variable"
    assert body.count(":team-CONSOLE_TEAM") == 5, "each widget invokes the typed team's alias"
    [executive] = [p for p in dashboards.values() if p["DashboardName"] == "jobsched-dev-executive"]
    executive_body = json.dumps(executive["DashboardBody"])
    assert executive_body.count('\\"type\\":\\"custom\\"') == 1 and '\\"view\\":\\"executive\\"' in executive_body
    assert ":oncall" in executive_body, "every team's heat-map row through the on-call alias"
    [oncall] = [p for p in dashboards.values() if p["DashboardName"] == "jobsched-dev-oncall"]
    oncall_body = json.dumps(oncall["DashboardBody"])
    assert oncall_body.count('\\"type\\":\\"custom\\"') == 1 and '\\"view\\":\\"incidents\\"' in oncall_body
    assert ":oncall" in oncall_body, "incidents across teams through the on-call alias"


def test_cloudwatch_may_publish_every_alarm_to_its_encrypted_topic(dev: Template) -> None:
    """An alarm reaches nobody if CloudWatch cannot use the topic's KMS key: the key policy must say so,
    for alarms of this account only."""
    template = dev[0]
    resources_by_id = template["Resources"]
    topics = {
        action["Ref"]
        for props in resources(template, "AWS::CloudWatch::Alarm").values()
        for action in props.get("AlarmActions", [])
    }
    assert topics, "alarms have actions"
    for topic in topics:
        key_ref = resources_by_id[topic]["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]
        statements = resources_by_id[key_ref]["Properties"]["KeyPolicy"]["Statement"]
        [grant] = [s for s in statements if _service(s) == "cloudwatch.amazonaws.com"]
        assert set(_actions(grant)) == {"kms:Decrypt", "kms:GenerateDataKey*"}
        assert grant["Condition"]["StringEquals"] == {"aws:SourceAccount": "123456789012"}
        policies = [p for p in resources(template, "AWS::SNS::TopicPolicy").values() if {"Ref": topic} in p["Topics"]]
        published = [
            s for p in policies for s in p["PolicyDocument"]["Statement"] if _service(s) == "cloudwatch.amazonaws.com"
        ]
        assert published and published[0]["Condition"]["StringEquals"] == {"aws:SourceAccount": "123456789012"}


def test_every_scheduled_or_queue_driven_component_and_every_dlq_is_alarmed(dev: Template) -> None:
    template = dev[0]
    names = {p["AlarmName"] for p in resources(template, "AWS::CloudWatch::Alarm").values()}
    for component in ("Dispatcher", "Heartbeat", "Escalation", "Pages", "Events"):
        assert f"jobsched-dev-{component}Errors" in names, component
    for ticking in ("Dispatcher", "Heartbeat"):
        [missed] = [
            p
            for p in resources(template, "AWS::CloudWatch::Alarm").values()
            if p["AlarmName"] == f"jobsched-dev-{ticking}MissedTicks"
        ]
        assert missed["TreatMissingData"] == "breaching" and missed["ComparisonOperator"] == "LessThanThreshold"
    dead_letter_queues = [
        q["QueueName"] for q in resources(template, "AWS::SQS::Queue").values() if q["QueueName"].endswith("-dlq")
    ]
    assert len(dead_letter_queues) == len(PRIORITIES) + 4  # work queues, escalations, pages, events, system events
    alarmed = json.dumps(list(resources(template, "AWS::CloudWatch::Alarm").values()))
    dlq_ids = [n for n, r in template["Resources"].items() if r["Type"] == "AWS::SQS::Queue" and "Dlq" in n]
    for logical in dlq_ids:
        assert logical in alarmed, f"no alarm watches {logical}"
    assert "jobsched-dev-Api5xx" in names
    assert {f"jobsched-dev-FireLatenessP99{p.title()}" for p in PRIORITIES} <= names


def test_every_alarm_links_its_section_of_the_alarm_runbook(dev: Template) -> None:
    """An alarm's description ends with its runbook link; the section exists in docs/operate/alarms.md."""
    import re

    runbook = (Path(__file__).resolve().parents[2] / "docs" / "operate" / "alarms.md").read_text()
    sections = {
        re.sub(r"[^a-z0-9 -]", "", heading.lower()).strip().replace(" ", "-")
        for heading in re.findall(r"^## (.+)$", runbook, flags=re.MULTILINE)
    }
    alarms = resources(dev[0], "AWS::CloudWatch::Alarm")
    assert len(alarms) >= 40
    for alarm in alarms.values():
        description = alarm["AlarmDescription"]
        link = description.rsplit("Runbook: ", 1)[1]
        page, _, section = link.partition("#")
        assert page == "docs/operate/alarms.md" and section in sections, (alarm["AlarmName"], link)
