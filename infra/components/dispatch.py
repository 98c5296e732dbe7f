"""The EventBridge ticks: the dispatcher's parts and the heartbeat checker."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as event_targets
from constructs import Construct

from infra.components.common import resource_name
from infra.components.functions import Functions
from infra.config import StageConfig


class Dispatch(Construct):
    """The dispatcher tick and the heartbeat tick, every minute."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig, functions: Functions) -> None:
        super().__init__(scope, construct_id)
        # One target per part of the tick, five targets a rule (EventBridge's limit): DispatcherTick, then
        # DispatcherTick2, ... for more than five parallel dispatchers.
        parts = config.burst.dispatchers
        self.ticks: list[events.Rule] = []
        for part in range(parts):
            if part % 5 == 0:
                suffix = "" if part == 0 else str(part // 5 + 1)
                self.ticks.append(
                    events.Rule(
                        self,
                        f"DispatcherTick{suffix}",
                        rule_name=resource_name(config, f"DispatcherTick{suffix}"),
                        schedule=events.Schedule.rate(Duration.minutes(1)),
                    )
                )
            tick_event = events.RuleTargetInput.from_object({"part": part, "parts": parts})
            self.ticks[-1].add_target(
                event_targets.LambdaFunction(functions.dispatcher, retry_attempts=2, event=tick_event)
            )
        self.tick = self.ticks[0]
        self.heartbeat_tick = events.Rule(
            self,
            "HeartbeatTick",
            rule_name=resource_name(config, "HeartbeatTick"),
            schedule=events.Schedule.rate(Duration.minutes(1)),
        )
        self.heartbeat_tick.add_target(event_targets.LambdaFunction(functions.heartbeat, retry_attempts=2))
