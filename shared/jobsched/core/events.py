"""Runs started by events: the rule each trigger becomes, what the rule delivers, and an event's identity. Pure.

Each trigger of a job is one EventBridge rule on its bus, named from the job and the trigger's content, whose
target is the deployment's intake queue. The rule's input transformer wraps the matched event in an envelope
naming the job and the trigger (``envelope_template``), so the intake knows whose rule matched without matching
anything itself: matching is EventBridge's own.

A run started by an event is named by the event's identity (``EventEnvelope.run_id``): a redelivered event
names the same run, and the runs table's conditional create lets one of them exist.

A batched trigger's events go into numbered batches instead (``core.event_batches``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, JsonValue

from jobsched.core.event_batches import BatchedEvent
from jobsched.core.runs import instant_text, parse_instant, scheduled_run_id
from jobsched.core.spec import DEFAULT_BUS, AfterTrigger, JobTrigger, S3Trigger

MAX_EVENT_PAYLOAD_BYTES = 32 * 1024  # what a target receives of the event; larger ones lose their detail
S3_SOURCE = "aws.s3"
S3_OBJECT_CREATED = "Object Created"
RULE_PREFIX_HASH = 12  # characters of the job's digest in its rule names
RUN_FINISHED_SOURCE = "jobsched"  # what every finished run puts (adapters/aws/run_events.py)
RUN_FINISHED = "Run Finished"
RULES_PER_BUS = 300  # EventBridge's default quota of rules per bus (adjustable): each trigger is one rule
MAX_BATCH_DETAIL_BYTES = 1024  # an event's detail goes into a batch's list up to this size


def trigger_fingerprint(trigger: JobTrigger) -> str:
    """A trigger's content as a short digest: a changed trigger is a new rule, never a rule changed in place."""
    canonical = json.dumps(trigger.model_dump(mode="json", exclude_none=True), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


WAKE_PREFIX = "wake-"  # a rule (and its envelopes) that wakes waiting runs instead of starting one


@dataclass(frozen=True)
class TriggerRule:
    """One EventBridge rule a job needs: a trigger that starts runs, or one that wakes its waiting runs."""

    trigger: JobTrigger
    path: str  # the field a refusal of the rule is about: triggers[i], or wait_for
    wake: bool = False

    @property
    def fingerprint(self) -> str:
        return (WAKE_PREFIX if self.wake else "") + trigger_fingerprint(self.trigger)

    @property
    def field(self) -> str:
        """The field under ``path`` EventBridge's refusal of the rule (a missing bus, a full one) is about."""
        if self.wake:
            return "s3" if self.trigger.s3 is not None else "job"
        return rule_field(self.trigger)


CONTAINER_TRIGGER = "container"  # the envelope of a container task's state change (one rule per deployment)
CONTAINER_STARTED_BY = "jobsched-"  # the startedBy prefix of every task the scheduler starts


def container_rule_patterns() -> dict[str, dict[str, Any]]:
    """The deployment's rules for the end of work the scheduler started, by rule name (under the stage's prefix):
    ECS Task State Change of its tasks once stopped, Batch Job State Change of its jobs once ended (their
    startedBy, or their name, is the attempt's token)."""
    return {
        "container-state-changes": {
            "source": ["aws.ecs"],
            "detail-type": ["ECS Task State Change"],
            "detail": {"lastStatus": ["STOPPED"], "startedBy": [{"prefix": CONTAINER_STARTED_BY}]},
        },
        "batch-state-changes": {
            "source": ["aws.batch"],
            "detail-type": ["Batch Job State Change"],
            "detail": {"status": ["SUCCEEDED", "FAILED"], "jobName": [{"prefix": CONTAINER_STARTED_BY}]},
        },
    }


def kubernetes_rule_pattern(state_machine_arn: str) -> dict[str, Any]:
    """The end of an execution of the deployment's kubernetes state machine (one per attempt of a kubernetes
    target): the only executions this rule matches, so a forged or foreign execution never reaches the intake."""
    return {
        "source": ["aws.states"],
        "detail-type": ["Step Functions Execution Status Change"],
        "detail": {"stateMachineArn": [state_machine_arn], "status": ["SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"]},
    }


def container_envelope_template() -> str:
    return '{"jobsched":{"job":"","trigger":"' + CONTAINER_TRIGGER + '"},"event":<aws.events.event.json>}'


def job_rule_prefix(stage: str, job: str) -> str:
    """Every rule of one job starts with this (EventBridge rule names: at most 64 of [.-_A-Za-z0-9])."""
    return f"jobsched-{stage}-{hashlib.sha256(job.encode()).hexdigest()[:RULE_PREFIX_HASH]}-"


def rule_name(stage: str, job: str, rule: TriggerRule) -> str:
    return job_rule_prefix(stage, job) + rule.fingerprint


def trigger_bus(trigger: JobTrigger, runs_bus: str = DEFAULT_BUS) -> str:
    """The bus the trigger's rule lives on: S3 sends its events to the default bus, and Run Finished events
    go to ``runs_bus`` (the deployment's own bus, where only jobsched may put)."""
    if trigger.after is not None:
        return runs_bus
    return trigger.event.bus if trigger.event is not None else DEFAULT_BUS


def rule_field(trigger: JobTrigger) -> str:
    """The field of the trigger EventBridge's refusal of its rule is about (a missing bus, a full one)."""
    return {"event": "event.bus", "s3": "s3", "after": "after"}[trigger.kind]


def rule_pattern(trigger: JobTrigger) -> dict[str, Any]:
    """The EventBridge pattern of a trigger's rule."""
    if trigger.event is not None:
        return dict(trigger.event.pattern)
    if trigger.after is not None:
        return after_pattern(trigger.after)
    assert trigger.s3 is not None
    return s3_pattern(trigger.s3)


def after_pattern(after: AfterTrigger) -> dict[str, Any]:
    """Run Finished of any of the upstream jobs, with one of the trigger's statuses."""
    jobs = [
        dict(zip(("team", "job"), ([part] for part in upstream.split("/", 1)), strict=True))
        for upstream in after.upstreams
    ]
    detail: dict[str, Any] = {"status": [status.upper() for status in after.status]}
    if len(jobs) == 1:
        detail |= jobs[0]
    else:
        detail["$or"] = jobs
    return {"source": [RUN_FINISHED_SOURCE], "detail-type": [RUN_FINISHED], "detail": detail}


def after_run_id(instant: datetime) -> str:
    """One run per logical instant whichever upstream finish (or redelivery, or rerun) reaches it first."""
    return f"{scheduled_run_id(instant)}-a"


def s3_pattern(s3: S3Trigger) -> dict[str, Any]:
    """Object Created in the bucket, with the key's prefix and suffix (both at once: a wildcard)."""
    detail: dict[str, Any] = {"bucket": {"name": [s3.bucket]}}
    key_filter = _key_filter(s3.prefix, s3.suffix)
    if key_filter is not None:
        detail["object"] = {"key": [key_filter]}
    return {"source": [S3_SOURCE], "detail-type": [S3_OBJECT_CREATED], "detail": detail}


def _key_filter(prefix: str, suffix: str) -> dict[str, str] | None:
    if prefix and suffix:
        return {"wildcard": _wildcard_literal(prefix) + "*" + _wildcard_literal(suffix)}
    if prefix:
        return {"prefix": prefix}
    if suffix:
        return {"suffix": suffix}
    return None


def _wildcard_literal(text: str) -> str:
    return text.replace("\\", "\\\\").replace("*", "\\*")


def s3_key_matches(s3: S3Trigger, bucket: str, key: str) -> bool:
    """What the rule's pattern says, checked again on arrival (a rule is only as right as its last update)."""
    if bucket != s3.bucket or not key.startswith(s3.prefix) or not key.endswith(s3.suffix):
        return False
    return len(key) >= len(s3.prefix) + len(s3.suffix)  # a wildcard's prefix and suffix do not overlap


def envelope_template(job: str, rule: TriggerRule) -> str:
    """The rule target's InputTemplate: the whole matched event inside an envelope naming job and trigger."""
    header = json.dumps({"job": job, "trigger": rule.fingerprint}, separators=(",", ":"))
    return '{"jobsched":' + header + ',"event":<aws.events.event.json>}'


class EnvelopeHeader(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    job: str
    trigger: str


class EventEnvelope(BaseModel):
    """What the intake queue carries: the job whose rule matched, its trigger's fingerprint, the event."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    jobsched: EnvelopeHeader
    event: dict[str, JsonValue]

    @property
    def job(self) -> str:
        return self.jobsched.job

    @property
    def event_id(self) -> str:
        return str(self.event.get("id") or "")

    @property
    def source(self) -> str:
        return str(self.event.get("source") or "")

    @property
    def detail_type(self) -> str:
        return str(self.event.get("detail-type") or "")

    @property
    def time(self) -> datetime:
        return parse_instant(str(self.event["time"]))

    @property
    def detail(self) -> dict[str, Any]:
        detail = self.event.get("detail")
        return detail if isinstance(detail, dict) else {}

    @property
    def s3_object(self) -> dict[str, Any] | None:
        """bucket, key, size, etag, version and sequencer of an S3 Object Created event (None otherwise)."""
        if self.source != S3_SOURCE or self.detail_type != S3_OBJECT_CREATED:
            return None
        bucket, found = self.detail.get("bucket"), self.detail.get("object")
        if not isinstance(bucket, dict) or not isinstance(found, dict):
            return None
        return {
            "bucket": str(bucket.get("name") or ""),
            "key": str(found.get("key") or ""),
            "size": found.get("size"),
            "etag": found.get("etag") or found.get("eTag"),
            "version": found.get("version-id"),
            "sequencer": found.get("sequencer"),
        }

    def identity(self) -> str:
        """What makes this event itself: EventBridge's id, or for an S3 object its bucket, key, version, etag
        and sequencer (S3 may notify one write twice under two ids; two writes differ in their sequencer)."""
        s3 = self.s3_object
        if s3 is not None and s3["sequencer"]:
            return "s3:" + "|".join(str(s3[part] or "") for part in ("bucket", "key", "version", "etag", "sequencer"))
        return f"event:{self.event_id}"

    def identity_digest(self) -> str:
        return hashlib.sha256(self.identity().encode()).hexdigest()

    def run_id(self) -> str:
        """Time-sortable, and the same however often the event is delivered."""
        return f"{scheduled_run_id(self.time)}-e-{self.identity_digest()[:16]}"

    def batched(self, kind: str) -> BatchedEvent:
        """The event as one entry of a batch's list: what started it, when, and its detail if small."""
        entry = {name: value for name, value in self.trigger_detail(kind).items() if name != "kind"}
        entry["time"] = instant_text(self.time)
        detail = json.dumps(self.detail, separators=(",", ":"))
        if len(detail.encode()) <= MAX_BATCH_DETAIL_BYTES:
            entry["detail"] = self.detail
        else:
            entry["detail_omitted"] = f"{len(detail.encode())} bytes"
        return BatchedEvent(key=self.identity_digest()[:32], time=self.time, entry=entry)

    def trigger_detail(self, kind: str) -> dict[str, Any]:
        """What the run record, the CLI and the console show of the event that started the run."""
        shown: dict[str, Any] = {"kind": kind, "event_id": self.event_id, "source": self.source}
        if self.detail_type:
            shown["detail_type"] = self.detail_type
        s3 = self.s3_object
        if s3 is not None:
            shown |= {name: value for name, value in s3.items() if value not in (None, "") and name != "sequencer"}
        return {name: str(value)[:1024] if isinstance(value, str) else value for name, value in shown.items()}

    @property
    def size(self) -> int:
        return len(json.dumps(self.event, separators=(",", ":")).encode())

    def payload(self, kind: str, *, events_ref: str) -> dict[str, Any]:
        """What the target receives: the trigger and the event, bounded: a larger event comes without its
        detail and with ``events_ref``, the API path that returns it whole."""
        event: dict[str, Any] = dict(self.event)
        shown: dict[str, Any] = {"trigger": self.trigger_detail(kind), "event": event}
        if self.size > MAX_EVENT_PAYLOAD_BYTES:
            event["detail"] = {"jobsched_omitted": f"the event is {self.size} bytes: GET events_ref for it whole"}
            shown["events_ref"] = events_ref
        return shown


def trigger_summary(detail: dict[str, Any]) -> str:
    """One line of what started a run (the CLI's `jobsched run`, the console's run page)."""
    if detail.get("kind") == "schedule":
        return f"schedule {detail.get('schedule')}"
    upstreams = detail.get("upstreams")
    if isinstance(upstreams, list):
        finished = ", ".join(
            f"{u.get('job')} {u.get('run_id')} {u.get('status')}" for u in upstreams if isinstance(u, dict)
        )
        return f"after {finished}"
    batch = detail.get("batch")
    if isinstance(batch, dict):
        return (
            f"batch {batch.get('number')} of {detail.get('kind')} events"
            f" (window {batch.get('window')}, at most {batch.get('max_events')} events)"
        )
    event = f"event {detail.get('event_id')}"
    if detail.get("kind") == "s3":
        return f"s3://{detail.get('bucket')}/{detail.get('key')} ({detail.get('size')} bytes, {event})"
    named = " ".join(str(detail[key]) for key in ("source", "detail_type") if detail.get(key))
    return f"{named} ({event})"
