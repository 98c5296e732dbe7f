"""Retries, concurrency and escalation."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Literal

from pydantic import (
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from jobsched.core.durations import Duration, format_duration
from jobsched.core.spec.base import (
    _A_CHANNEL,
    _SNS_ARN,
    DEFAULT_EVENT_RUNS_PER_MINUTE,
    SecretRef,
    SnsTopicArn,
    StrictModel,
    TargetUrl,
    _bounded,
    _fail,
)
from jobsched.core.spec.schedule import check_timezone

# --------------------------------------------------------------------------- retries, limits, alerts


class Backoff(StrictModel):
    initial: Annotated[Duration, _bounded(timedelta(seconds=1), timedelta(hours=12))] = timedelta(seconds=30)
    multiplier: float = Field(default=2.0, ge=1.0, le=10.0)
    max: Annotated[Duration, _bounded(timedelta(seconds=1), timedelta(days=1))] = timedelta(minutes=10)
    jitter: Literal["full", "equal", "none"] = "full"

    @model_validator(mode="after")
    def _ordered(self) -> Backoff:
        if self.max < self.initial:
            raise _fail(
                "invalid_backoff",
                "max ({max}) must be at least initial ({initial})",
                max=format_duration(self.max),
                initial=format_duration(self.initial),
            )
        return self


class RetryPolicy(StrictModel):
    max_attempts: int = Field(default=3, ge=1, le=20)
    backoff: Backoff = Field(default_factory=Backoff)


class Concurrency(StrictModel):
    max_running: int = Field(default=1, ge=1, le=1000)
    overlap: Literal["skip", "allow", "replace", "queue"] = "skip"
    max_runs_per_minute: int = Field(
        default=DEFAULT_EVENT_RUNS_PER_MINUTE,
        ge=1,
        le=1000,
        description="runs started by events in one minute; later events of that minute are dropped and counted",
    )


class SecondaryContact(StrictModel):
    """Who is paged when an incident goes on: ``after`` more failures after the first page."""

    model_config = ConfigDict(**StrictModel.model_config, json_schema_extra=_A_CHANNEL)

    sns_topic: SnsTopicArn | None = None
    webhook: TargetUrl | None = None
    after: int = Field(default=3, ge=1, le=1000, description="further consecutive failures before paging")

    @field_validator("sns_topic")
    @classmethod
    def _topic(cls, value: str | None) -> str | None:
        return _sns_topic(value)

    @model_validator(mode="after")
    def _somewhere(self) -> SecondaryContact:
        if self.sns_topic is None and self.webhook is None:
            raise _fail("no_escalation_channel", "give sns_topic, webhook or both")
        return self


def _sns_topic(value: str | None) -> str | None:
    if value is not None and not _SNS_ARN.fullmatch(value):
        raise _fail(
            "invalid_topic_arn",
            "'{value}' is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)",
            value=value,
        )
    return value


class Escalation(StrictModel):
    model_config = ConfigDict(**StrictModel.model_config, json_schema_extra=_A_CHANNEL)

    sns_topic: SnsTopicArn | None = None
    webhook: TargetUrl | None = None
    webhook_format: Literal["json", "slack"] = Field(
        default="json", description="json: the page document; slack: {text} for Slack-compatible incoming webhooks"
    )
    webhook_secret: SecretRef | None = Field(
        default=None,
        description="secretsmanager:NAME[#key] or ssm:/NAME of the team's: the job's webhooks are signed with it "
        "(X-Jobsched-Signature: v1=HMAC-SHA256(secret, timestamp + '.' + body))",
    )
    after_failures: int = Field(default=1, ge=1, le=100, description="consecutive failures before the first page")
    auto_pause_after: int | None = Field(default=None, ge=1, le=1000, description="consecutive failures")
    secondary: SecondaryContact | None = None

    @field_validator("sns_topic")
    @classmethod
    def _topic(cls, value: str | None) -> str | None:
        return _sns_topic(value)

    @model_validator(mode="after")
    def _somewhere(self) -> Escalation:
        if self.sns_topic is None and self.webhook is None:
            raise _fail("no_escalation_channel", "give sns_topic, webhook or both")
        return self


# ------------------------------------------------------------------------------------ freshness

_DEADLINE = re.compile(r"^(?:[01]\d|2[0-3]):[0-5]\d$")


class FreshnessSpec(StrictModel):
    """By when a successful run must exist (``core.freshness``): each day's ``deadline`` (local wall time), with
    the success at most ``max_age`` old then; or, without a deadline, at any time within ``max_age``."""

    deadline: str | None = Field(default=None, description='HH:MM, local time in timezone: "09:00"')
    timezone: str | None = Field(default=None, description="an IANA zone (default: the schedule's, else UTC)")
    max_age: Annotated[Duration, _bounded(timedelta(minutes=1), timedelta(days=31))] | None = Field(
        default=None, description="with deadline: how old the success may be then (default 24h); alone: at any time"
    )

    @field_validator("deadline")
    @classmethod
    def _deadline(cls, value: str | None) -> str | None:
        if value is not None and not _DEADLINE.fullmatch(value):
            raise _fail(
                "invalid_freshness_deadline", "'{value}' is not a time of day: HH:MM, 00:00 to 23:59", value=value
            )
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str | None) -> str | None:
        return check_timezone(value) if value is not None else None

    @model_validator(mode="after")
    def _something(self) -> FreshnessSpec:
        if self.deadline is None and self.max_age is None:
            raise _fail("empty_freshness", "give deadline (HH:MM), max_age, or both")
        if self.timezone is not None and self.deadline is None:
            raise _fail("timezone_without_deadline", "timezone says where deadline's time of day is: give deadline")
        return self
