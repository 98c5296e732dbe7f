"""Trigger rules in EventBridge: one rule per event or s3 trigger, its target the deployment's intake queue.

A rule is named by its job and its trigger's content (``jobsched.core.events.rule_name``), so deploying is
idempotent and a changed trigger is a new rule beside the old one until the job is stored. The target's input
transformer wraps each matched event in the envelope the intake reads. Rules are tagged with the team and the
job. EventBridge's own refusals (a pattern it does not take, a bus that does not exist, the bus's rule quota)
become ``TriggerRefused`` naming the trigger's field.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from botocore.exceptions import ClientError

from jobsched.adapters.aws.clients import client
from jobsched.core.errors import TriggerRefused
from jobsched.core.events import TriggerRule, envelope_template, rule_name, rule_pattern, trigger_bus
from jobsched.core.names import JOB_TAG, OWNER_TAG, PROJECT
from jobsched.core.spec import DEFAULT_BUS

INTAKE_TARGET_ID = "intake"


class TriggerRules:
    def __init__(
        self,
        *,
        stage: str,
        intake_queue_arn: str,
        events: Any | None = None,
        runs_bus: str = DEFAULT_BUS,
        system_queue_arn: str | None = None,
    ) -> None:
        self.stage, self.intake_queue_arn, self._client = stage, intake_queue_arn, events
        self.runs_bus = runs_bus  # where Run Finished events go: after triggers' rules live there
        # Run Finished (after triggers, waits on jobs) on the scheduler's own queue: no team's storm of events
        # stands in front of another team's downstream runs.
        self.system_queue_arn = system_queue_arn or intake_queue_arn

    @property
    def events(self) -> Any:
        return self._client or client("events")

    def deploy(self, job: str, team: str, rules: Sequence[TriggerRule]) -> None:
        for rule in rules:
            trigger = rule.trigger
            name, bus = rule_name(self.stage, job, rule), trigger_bus(trigger, self.runs_bus)
            try:
                self.events.put_rule(
                    Name=name,
                    EventBusName=bus,
                    EventPattern=json.dumps(rule_pattern(trigger), separators=(",", ":")),
                    State="ENABLED",
                    Description=f"{PROJECT} {rule.path} of {job}"[:512],
                    Tags=[{"Key": OWNER_TAG, "Value": team}, {"Key": JOB_TAG, "Value": job}],
                )
                response = self.events.put_targets(
                    Rule=name,
                    EventBusName=bus,
                    Targets=[
                        {
                            "Id": INTAKE_TARGET_ID,
                            "Arn": self.system_queue_arn if trigger.after is not None else self.intake_queue_arn,
                            "InputTransformer": {"InputTemplate": envelope_template(job, rule)},
                            # The team as the message group: SQS fair queues keep a quiet team's events from
                            # waiting behind another team's backlog.
                            "SqsParameters": {"MessageGroupId": team},
                        }
                    ],
                )
            except ClientError as error:
                raise _refusal(error, rule, bus) from error
            if response.get("FailedEntryCount"):
                raise RuntimeError(f"EventBridge refused the target of rule {name}: {response.get('FailedEntries')}")

    def remove(self, job: str, rules: Sequence[TriggerRule]) -> None:
        for rule in rules:
            name, bus = rule_name(self.stage, job, rule), trigger_bus(rule.trigger, self.runs_bus)
            try:
                self.events.remove_targets(Rule=name, EventBusName=bus, Ids=[INTAKE_TARGET_ID])
                self.events.delete_rule(Name=name, EventBusName=bus)
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                    raise

    def rules_on_bus(self, bus: str) -> int:
        """jobsched's trigger rules on one bus (what `jobsched capacity` sets against the quota)."""
        count, token = 0, None
        while True:
            request: dict[str, Any] = {"NamePrefix": f"{PROJECT}-{self.stage}-", "EventBusName": bus, "Limit": 100}
            if token:
                request["NextToken"] = token
            response = self.events.list_rules(**request)
            count += len(response.get("Rules", []))
            token = response.get("NextToken")
            if not token:
                return count


def _refusal(error: ClientError, rule: TriggerRule, bus: str) -> Exception:
    code = str(error.response.get("Error", {}).get("Code", ""))
    message = str(error.response.get("Error", {}).get("Message", error))
    trigger, index = rule.trigger, rule.path
    field = rule.field
    if code == "InvalidEventPatternException":
        return TriggerRefused(
            index, "event.pattern" if trigger.event is not None else field, "invalid_event_pattern", message
        )
    if code == "ResourceNotFoundException":
        return TriggerRefused(index, field, "event_bus_not_found", f"event bus '{bus}' does not exist")
    if code == "LimitExceededException":
        reason = f"event bus '{bus}' holds its quota of rules ({message}); ask the platform team to raise it"
        return TriggerRefused(index, field, "rule_quota_reached", reason)
    return cast(Exception, error)  # not ours to name: raised as it came
