"""TriggerRulesPort and the event-run window: the EventBridge adapter (moto) and the memory one agree."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import boto3
import pytest
from moto import mock_aws

from jobsched.adapters.aws.rules import TriggerRules
from jobsched.adapters.memory.rules import MemoryRules
from jobsched.core.errors import TriggerRefused
from jobsched.core.events import TriggerRule, envelope_template, rule_name, s3_pattern
from jobsched.core.runs import parse_instant
from jobsched.core.spec import JobTrigger
from jobsched.ports import TriggerRulesPort
from tests.contract.conftest import Stores

NOW = parse_instant("2027-03-01T10:00:30Z")
ORDERS = JobTrigger.model_validate({"event": {"pattern": {"source": ["com.acme.orders"]}}})
TEAM_BUS = JobTrigger.model_validate({"event": {"bus": "data-bus", "pattern": {"detail-type": ["X"]}}})
LANDING = JobTrigger.model_validate({"s3": {"bucket": "acme-landing", "prefix": "in/", "suffix": ".csv"}})


def at(index: int, trigger: JobTrigger) -> TriggerRule:
    return TriggerRule(trigger, f"triggers[{index}]")


@pytest.fixture(params=["moto", "memory"])
def rules(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[TriggerRulesPort]:
    if request.param == "memory":
        yield MemoryRules(stage="test", buses={"default", "data-bus"})
        return
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("JOBSCHED_AWS_ENDPOINT", raising=False)
    with mock_aws():
        events = boto3.client("events", region_name="us-east-1")
        events.create_event_bus(Name="data-bus")
        yield TriggerRules(stage="test", intake_queue_arn="arn:aws:sqs:us-east-1:123456789012:intake", events=events)


def test_deploy_is_idempotent_and_remove_takes_only_the_named_triggers(rules: TriggerRulesPort) -> None:
    rules.deploy("data/load", "data", [at(0, ORDERS), at(1, TEAM_BUS), at(2, LANDING)])
    rules.deploy("data/load", "data", [at(0, ORDERS), at(1, TEAM_BUS), at(2, LANDING)])
    assert (rules.rules_on_bus("default"), rules.rules_on_bus("data-bus")) == (2, 1)
    rules.remove("data/load", [at(0, ORDERS), at(0, ORDERS)])  # twice: the second finds nothing, quietly
    assert (rules.rules_on_bus("default"), rules.rules_on_bus("data-bus")) == (1, 1)
    rules.remove("data/other", [at(2, LANDING)])  # another job's rule of the same content: not this one
    assert rules.rules_on_bus("default") == 1


def test_a_rule_carries_the_triggers_pattern_and_the_envelope(rules: TriggerRulesPort) -> None:
    rules.deploy("data/load", "data", [at(0, LANDING)])
    name = rule_name("test", "data/load", at(0, LANDING))
    if isinstance(rules, MemoryRules):
        rule = rules.rules[("default", name)]
        pattern, template = rule.pattern, rule.template
    else:
        assert isinstance(rules, TriggerRules)
        pattern = json.loads(rules.events.describe_rule(Name=name)["EventPattern"])
        (target,) = rules.events.list_targets_by_rule(Rule=name)["Targets"]
        template = target["InputTransformer"]["InputTemplate"]
    assert LANDING.s3 is not None and pattern == s3_pattern(LANDING.s3)
    assert template == envelope_template("data/load", at(0, LANDING))


def test_a_missing_bus_is_refused_naming_the_trigger(rules: TriggerRulesPort) -> None:
    missing = JobTrigger.model_validate({"event": {"bus": "nobody", "pattern": {"source": ["x"]}}})
    with pytest.raises(TriggerRefused) as refused:
        rules.deploy("data/load", "data", [at(3, missing)])
    assert (refused.value.error.path, refused.value.error.code) == ("triggers[3].event.bus", "event_bus_not_found")


def test_a_wake_rule_is_its_own_rule_beside_a_trigger_of_the_same_content(rules: TriggerRulesPort) -> None:
    """A job may start on a bucket's objects and wait for one of them: two rules, two envelopes."""
    wake = TriggerRule(LANDING, "wait_for[0]", wake=True)
    rules.deploy("data/load", "data", [at(0, LANDING), wake])
    assert rules.rules_on_bus("default") == 2
    assert envelope_template("data/load", wake) != envelope_template("data/load", at(0, LANDING))
    rules.remove("data/load", [wake])
    assert rules.rules_on_bus("default") == 1


def test_the_event_run_window_admits_the_limit_each_minute(stores: Stores) -> None:
    taken = [stores.jobs.count_event_run("data/load", now=NOW + timedelta(seconds=i), limit=3) for i in range(5)]
    assert taken == [True, True, True, False, False]
    assert stores.jobs.count_event_run("data/other", now=NOW, limit=3)  # per job
    assert stores.jobs.count_event_run("data/load", now=NOW + timedelta(minutes=1), limit=3)  # per minute
