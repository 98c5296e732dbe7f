"""Waits for data: what a run's ``wait_for`` conditions are for its logical instant, how often they are polled,
and which events wake the runs waiting on them. Pure: the pipeline's ``waiting`` room checks and records.

A waiting run holds nothing: no Lambda, no slot, no worker. Its message comes back by itself (an SQS delay,
polls spaced by ``poll_delay``: 30 s, then as long as it has waited, at most 15 minutes), and an event that may
satisfy it (the object's Object Created, the upstream job's Run Finished) sends it at once through the intake.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from jobsched.core.durations import format_duration
from jobsched.core.events import TriggerRule
from jobsched.core.runs import instant_text
from jobsched.core.spec import AfterTrigger, JobSpec, JobTrigger, S3Trigger, WaitCondition, WaitPolicy
from jobsched.core.templates import render_key, static_prefix, static_suffix
from jobsched.core.tz import UTC, get_zone

FIRST_POLL = timedelta(seconds=30)
MAX_WAITERS_WOKEN = 500  # waiting runs and tasks of one job that one event wakes (the rest are polled)
MAX_POLL = timedelta(minutes=15)  # SQS's longest delay: a waiting run never needs the wakeups index to poll


@dataclass(frozen=True)
class Awaited:
    """One condition made concrete for one run: an object, or a succeeded run of a job in a window."""

    kind: Literal["s3", "job"]
    bucket: str = ""
    key: str = ""
    job: str = ""
    first: datetime | None = None  # job waits: the upstream run's logical instant in [first, last]
    last: datetime | None = None

    @property
    def wakes_on(self) -> str:
        """What an event must be about to wake a run waiting on this: ``s3://bucket/key`` or ``job:team/name``."""
        return f"s3://{self.bucket}/{self.key}" if self.kind == "s3" else f"job:{self.job}"

    def describe(self) -> str:
        if self.kind == "s3":
            return f"s3://{self.bucket}/{self.key}"
        assert self.first is not None and self.last is not None
        return f"{self.job} (a succeeded run for {instant_text(self.first)}..{instant_text(self.last)})"


def key_zone(spec: JobSpec) -> ZoneInfo:
    """The timezone an object key's {logical_date} is rendered in: the job's schedule's (UTC without one)."""
    return get_zone(spec.schedule.timezone) if spec.schedule is not None else UTC


def awaited(spec: JobSpec, conditions: list[WaitCondition], instant: datetime) -> list[Awaited]:
    """The conditions for the run of ``instant``; object keys rendered in the job's schedule timezone."""
    zone = key_zone(spec)
    found = []
    for condition in conditions:
        if condition.s3 is not None:
            bucket, key = condition.bucket_and_key
            found.append(Awaited("s3", bucket=bucket, key=render_key(key, instant, zone)))
        else:
            assert condition.job is not None
            found.append(Awaited("job", job=condition.job, first=instant - condition.window, last=instant))
    return found


def poll_delay(waited: timedelta) -> timedelta:
    """The next check after having waited ``waited``: doubling from 30 s, at most 15 minutes apart."""
    return min(max(FIRST_POLL, waited), MAX_POLL)


def policy_of(policy: WaitPolicy | None) -> WaitPolicy:
    return policy or WaitPolicy()


def timed_out_reason(policy: WaitPolicy, pending: list[Awaited]) -> str:
    return f"waited {format_duration(policy.timeout)} for " + ", ".join(item.describe() for item in pending)


def waiting_reason(since: datetime, pending: list[Awaited]) -> str:
    return "waiting for " + ", ".join(item.describe() for item in pending) + f" since {instant_text(since)}"


def job_rules(spec: JobSpec) -> list[TriggerRule]:
    """Every rule the job needs: its triggers', then those that wake its waiting runs and tasks."""
    rules = [TriggerRule(trigger, f"triggers[{index}]") for index, trigger in enumerate(spec.triggers)]
    return rules + wake_rules(spec)


def wake_rules(spec: JobSpec) -> list[TriggerRule]:
    """The rules that wake the job's waiting runs (and tasks): one per waited-for bucket, its Object Created
    under the longest prefix (and suffix) all the job's keys in it share, and each waited-for job's succeeded
    Run Finished. A rule may match more than the waits need: a wake only sends the runs awaiting that exact
    object to be checked. One rule a bucket keeps a job of 60 tasks waiting on 5 prefixes each from taking a
    shared bus's 300 rules (it took 300, one per prefix)."""
    keys: dict[str, list[str]] = {}
    found: dict[str, TriggerRule] = {}
    for path, condition in spec.wait_conditions():
        if condition.s3 is not None:
            bucket, key = condition.bucket_and_key
            keys.setdefault(bucket, []).append(key)
            found.setdefault(f"s3://{bucket}", TriggerRule(JobTrigger(s3=S3Trigger(bucket=bucket)), path, wake=True))
        else:
            assert condition.job is not None
            rule = TriggerRule(JobTrigger(after=AfterTrigger(job=condition.job)), path, wake=True)
            found.setdefault(rule.fingerprint, rule)
    for bucket, templates in keys.items():
        rule = found[f"s3://{bucket}"]
        found[f"s3://{bucket}"] = TriggerRule(JobTrigger(s3=_covering(bucket, templates)), rule.path, wake=True)
    return list(found.values())


def _covering(bucket: str, templates: list[str]) -> S3Trigger:
    """The S3 trigger whose prefix and suffix every key of ``templates`` (with placeholders) matches."""
    prefix = _common_start([static_prefix(key) for key in templates])
    fixed = all(prefix == key for key in templates)  # one key, no placeholder: the key itself
    suffix = "" if fixed else _common_start([static_suffix(key)[::-1] for key in templates])[::-1]
    if len(prefix) + len(suffix) > min(len(key) for key in templates):
        suffix = ""  # a suffix overlapping the prefix would match nothing
    return S3Trigger(bucket=bucket, prefix=prefix, suffix=suffix)


def _common_start(texts: list[str]) -> str:
    """The longest text every one of ``texts`` starts with, character by character (S3 keys are not paths)."""
    first, last = min(texts), max(texts)
    size = next((i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), min(len(first), len(last)))
    return first[:size]


def per_prefix_wake_rules(spec: JobSpec) -> list[TriggerRule]:
    """The wake rules an earlier release deployed (one per bucket, prefix and suffix): removed with the job's
    rules, so an upgrade leaves none behind on the bus."""
    found: dict[str, TriggerRule] = {}
    for path, condition in spec.wait_conditions():
        if condition.s3 is not None:
            bucket, key = condition.bucket_and_key
            prefix, suffix = static_prefix(key), static_suffix(key)
            trigger = JobTrigger(s3=S3Trigger(bucket=bucket, prefix=prefix, suffix="" if prefix == key else suffix))
            rule = TriggerRule(trigger, path, wake=True)
            found.setdefault(rule.fingerprint, rule)
    return list(found.values())


def wake_rule(spec: JobSpec, fingerprint: str) -> TriggerRule | None:
    return next((rule for rule in wake_rules(spec) if rule.fingerprint == fingerprint), None)
