"""The template's alarms, evaluated on the laptop (infra.local.cloudwatch) from what the local runtime observes:

- the handlers' EMF (every ``jobsched.watch.signals.emit``), also put into moto's CloudWatch with PutMetricData;
- AWS/Lambda ``Invocations`` and ``Errors`` per function, as the runtime invokes the handlers;
- AWS/Lambda ``Throttles``: always 0 (nothing throttles on the laptop), so those alarms show OK, not
  insufficient data;
- AWS/SQS ``ApproximateNumberOfMessagesVisible`` per queue, sampled at each evaluation, and
  ``ApproximateAgeOfOldestMessage``: the age of the oldest message the runtime's pollers received in the
  period (a message failing again and again grows older at each receive, as in SQS);
- AWS/ApiGateway ``5XXError``, ``4XXError`` and ``Count`` from each response of the local gateway.

A state change is logged; entering ALARM publishes to the alarm's SNS actions in moto, as CloudWatch
does; ``<state-dir>/alarms.json`` holds every alarm's state for ``jobsched local alarms``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infra.local.cloudwatch import AlarmBoard, Datapoints, alarms_from_template, metric_key
from infra.local.statefiles import write_atomically
from jobsched.watch import signals

log = logging.getLogger("jobsched.local.alarms")
LAMBDA, SQS, API_GATEWAY = "AWS/Lambda", "AWS/SQS", "AWS/ApiGateway"


class LocalAlarms:
    def __init__(
        self,
        template: dict[str, Any],
        physical: dict[str, str],
        *,
        endpoint: str,
        region: str,
        state_file: Path,
        scale: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.physical, self.endpoint, self.region = physical, endpoint, region
        self.board = AlarmBoard(alarms_from_template(template, self.resolve), scale=scale, created=clock())
        self.data = Datapoints()
        self.state_file, self.clock = state_file, clock
        self.lock = threading.Lock()
        self.pending: list[dict[str, Any]] = []  # EMF datapoints not yet put into moto's CloudWatch
        self.went_off: set[str] = set()  # alarms in ALARM since they last were OK
        keys = [query.key for alarm in self.board.alarms for query in alarm.queries if query.key is not None]
        self.queues = {dict(key[2]).get("QueueName", "") for key in keys if key[0] == SQS}
        self.apis = {dict(key[2])["ApiName"] for key in keys if key[0] == API_GATEWAY and "ApiName" in dict(key[2])}

    # ------------------------------------------------------------------------------ inputs

    def resolve(self, value: Any) -> str:
        """A template reference as deployed in moto: functions by name, queues by name, topics by ARN."""
        if isinstance(value, str):
            return value
        if "Ref" in value:
            return str(self.physical.get(value["Ref"], value["Ref"]))
        if "Fn::GetAtt" in value:
            logical, attribute = value["Fn::GetAtt"]
            deployed = str(self.physical.get(logical, logical))
            return deployed.rsplit("/", 1)[-1] if attribute == "QueueName" else deployed
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return str(separator).join(self.resolve(part) for part in parts)
        return json.dumps(value)

    def metric(self, name: str, value: float, dimensions: dict[str, str]) -> None:
        """The sink for ``jobsched.watch.signals.emit``."""
        now = self.clock()
        with self.lock:
            self.data.put(metric_key(signals.NAMESPACE, name, dimensions), value, now)
            self.pending.append(
                {
                    "MetricName": name,
                    "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()],
                    "Value": value,
                    "Timestamp": now,
                }
            )

    def invoked(self, function: str, *, failed: bool) -> None:
        now = self.clock()
        with self.lock:
            self.data.put(metric_key(LAMBDA, "Invocations", {"FunctionName": function}), 1, now)
            self.data.put(metric_key(LAMBDA, "Errors", {"FunctionName": function}), 1 if failed else 0, now)
            self.data.put(metric_key(LAMBDA, "Throttles", {"FunctionName": function}), 0, now)

    def api_response(self, status: int) -> None:
        """One response of the local gateway, counted as API Gateway counts it."""
        now = self.clock()
        with self.lock:
            for api in self.apis:
                dimensions = {"ApiName": api}
                self.data.put(metric_key(API_GATEWAY, "Count", dimensions), 1, now)
                self.data.put(metric_key(API_GATEWAY, "5XXError", dimensions), 1 if status >= 500 else 0, now)
                self.data.put(metric_key(API_GATEWAY, "4XXError", dimensions), 1 if 400 <= status < 500 else 0, now)

    def received(self, queue: str, sent_at: float) -> None:
        """A poller received a message sent at ``sent_at`` (epoch seconds) from ``queue``."""
        now = self.clock()
        age = max(0.0, now - sent_at)
        with self.lock:
            self.data.put(metric_key(SQS, "ApproximateAgeOfOldestMessage", {"QueueName": queue}), age, now)

    def _sample_queues(self, sqs: Any) -> None:
        now = self.clock()
        for queue in sorted(name for name in self.queues if name):
            try:
                url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
                depth = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
            except Exception:  # a queue the adapted template left out
                continue
            visible = float(depth["Attributes"]["ApproximateNumberOfMessages"])
            with self.lock:
                self.data.put(metric_key(SQS, "ApproximateNumberOfMessagesVisible", {"QueueName": queue}), visible, now)

    # ---------------------------------------------------------------------------- evaluation

    def evaluate(self) -> list[tuple[str, str, str]]:
        """One round: sample, evaluate, publish what entered ALARM, save the board. Returns the changes."""
        import boto3

        sqs = boto3.client("sqs", endpoint_url=self.endpoint, region_name=self.region)
        self._sample_queues(sqs)
        self._flush_to_cloudwatch()
        now = self.clock()
        with self.lock:
            changes = self.board.evaluate(self.data, now)
            longest = max((a.period * a.evaluation_periods for a in self.board.alarms), default=3600)
            self.data.forget_before(now - 2 * longest / self.board.scale)
        sns = boto3.client("sns", endpoint_url=self.endpoint, region_name=self.region)
        for alarm, state, reason in changes:
            # News is an alarm going off, and one that went off coming back; a new alarm's first OK is not.
            news = state == "ALARM" or alarm.name in self.went_off
            say = log.warning if state == "ALARM" else log.info if news else log.debug
            say("alarm %s -> %s: %s", alarm.name, state, reason)
            if state == "ALARM":
                self.went_off.add(alarm.name)
            elif state == "OK":
                self.went_off.discard(alarm.name)
            if state == "ALARM":
                for topic in alarm.actions:
                    message = {"AlarmName": alarm.name, "NewStateValue": state, "NewStateReason": reason}
                    sns.publish(TopicArn=topic, Subject=f"ALARM: {alarm.name}"[:100], Message=json.dumps(message))
        write_atomically(self.state_file, json.dumps(list(self.board.rows()), indent=2))
        return [(alarm.name, state, reason) for alarm, state, reason in changes]

    def _flush_to_cloudwatch(self) -> None:
        import boto3

        with self.lock:
            batch, self.pending = self.pending, []
        if not batch:
            return
        cloudwatch = boto3.client("cloudwatch", endpoint_url=self.endpoint, region_name=self.region)
        for start in range(0, len(batch), 500):
            cloudwatch.put_metric_data(Namespace=signals.NAMESPACE, MetricData=batch[start : start + 500])
