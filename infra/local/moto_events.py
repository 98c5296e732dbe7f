"""Patches to moto's EventBridge for the tests and the local runtime; never in AWS (``infra.local.moto_patches``
applies them with the others).

EventBridge delivery as AWS does it, which runs started by events depend on (#28). moto 5.2 answered a
PutEvents on the default bus with 500: it offers every event to schedule rules too (an empty pattern
matches all in moto) and fails on their Lambda targets. Schedule rules match no events in AWS, and the
local runtime drives the stack's own Lambda targets itself, so neither receives events here. The event an
input transformer passes as <aws.events.event.json> carries its time as ISO 8601, as in AWS (moto kept
epoch seconds). S3's EventBridge notifications go to the default bus only, through each rule's targets
and input transformers, with a fresh event id and a sequencer that grows with each write, as in AWS (moto
sent them to every bus, untransformed, all with one sequencer, so two writes looked like one event).
In CloudFormation, ``Ref`` of an ``AWS::Events::EventBus`` is its name, as in AWS; moto 5.2 gave the
bus object itself, which then sat in the functions' environment and failed every GetFunction with 500.
A rule's SQS target with a message group (``SqsParameters``) on a standard queue, an SQS fair queue,
delivers with that group as AWS does; moto took every group for a FIFO queue and dropped the event.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import threading
import time
import uuid
from typing import Any


def eventbridge_as_aws() -> None:
    """PutEvents and S3 notifications delivered as EventBridge delivers them (module docstring)."""
    from moto.events import models as events_models
    from moto.events.utils import EventTemplateParser
    from moto.s3 import notifications

    rule_class = events_models.Rule
    if getattr(rule_class.send_to_targets, "_as_aws", False):
        return
    original_send = rule_class.send_to_targets

    @functools.wraps(original_send)
    def send_to_targets(self: Any, original_event: Any, transform_input: bool = True) -> None:
        if self.scheduled_expression and not self.event_pattern.get_pattern():
            return  # a schedule rule matches no events
        if any(target["Arn"].split(":")[2] == "lambda" for target in self.targets):
            delivered = copy.copy(self)
            delivered.targets = [target for target in self.targets if target["Arn"].split(":")[2] != "lambda"]
            return original_send(delivered, original_event, transform_input)
        return original_send(self, original_event, transform_input)

    send_to_targets._as_aws = True  # type: ignore[attr-defined]
    rule_class.send_to_targets = send_to_targets  # type: ignore[method-assign]
    fair_queue_targets(rule_class)
    events_models.EventBus.physical_resource_id = property(lambda bus: bus.name)  # type: ignore[attr-defined]

    original_parse = EventTemplateParser.parse

    def parse(input_template: Any, input_paths_map: Any, event: Any) -> Any:
        if (
            input_template
            and "<aws.events.event.json>" in input_template
            and isinstance(event.get("time"), int | float)
        ):
            event = {**event, "time": _iso(float(event["time"]))}
        return original_parse(input_template, input_paths_map, event)

    EventTemplateParser.parse = staticmethod(parse)  # type: ignore[method-assign]

    sequencer = itertools.count(int(time.time() * 1000) << 16)
    lock = threading.Lock()

    def send_event_bridge_message(account_id: str, bucket: Any, event_name: str, key: Any) -> None:
        try:
            with lock:
                order = next(sequencer)
            now = time.time()
            event = {
                "version": "0",
                "id": str(uuid.uuid4()),
                "detail-type": notifications._detail_type(event_name),
                "source": "aws.s3",
                "account": account_id,
                "time": now,
                "region": bucket.region_name,
                "resources": [bucket.arn],
                "detail": {
                    "version": "0",
                    "bucket": {"name": bucket.name},
                    "object": {
                        "key": key.name,
                        "size": key.size,
                        "etag": key.etag.replace('"', ""),
                        **({"version-id": key.version_id} if key.version_id else {}),
                        "sequencer": format(order, "018X"),
                    },
                    "request-id": uuid.uuid4().hex[:16].upper(),
                    "requester": account_id,
                    "source-ip-address": "127.0.0.1",
                    "reason": _S3_REASONS.get(event_name.rsplit(":", 1)[-1], event_name.rsplit(":", 1)[-1]),
                },
                "ingestion-time": now,
            }
            backend = events_models.events_backends[account_id][bucket.region_name]
            default_bus = backend.event_buses.get("default")
            for rule in list(default_bus.rules.values()) if default_bus is not None else []:
                rule.send_to_targets(copy.deepcopy(event))  # type: ignore[arg-type]
        except Exception:
            pass

    notifications._send_event_bridge_message = send_event_bridge_message


_S3_REASONS = {"Put": "PutObject", "Post": "PostObject", "Copy": "CopyObject"}


def fair_queue_targets(rule_class: Any) -> None:
    """A rule's SQS target with a message group on a standard queue (an SQS fair queue) gets the group."""
    original_to_sqs = rule_class._send_to_sqs_queue

    def send_to_sqs_queue(self: Any, resource_id: str, event: dict[str, Any], group_id: str | None = None) -> None:
        if group_id and not resource_id.endswith(".fifo"):
            from moto.sqs.models import sqs_backends

            if "time" in event:
                event["time"] = _iso(float(event["time"]))
            backend = sqs_backends[self.account_id][self.region_name]
            backend.send_message(queue_name=resource_id, message_body=json.dumps(event), group_id=group_id)
            return
        original_to_sqs(self, resource_id, event, group_id)

    rule_class._send_to_sqs_queue = send_to_sqs_queue


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
