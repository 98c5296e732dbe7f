"""What starts a run besides the schedule (events, objects, other jobs' runs), and what a run waits for."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    JsonValue,
    ModelWrapValidatorHandler,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails

from jobsched.core.durations import Duration
from jobsched.core.event_patterns import pattern_problems
from jobsched.core.spec.base import (
    _EVENT_BUS,
    DEFAULT_BUS,
    MAX_BATCH_EVENTS,
    MAX_BATCH_WINDOW,
    MAX_UPSTREAMS,
    MAX_WAIT_CONDITIONS,
    MAX_WAIT_TIMEOUT,
    JobRef,
    StrictModel,
    _bounded,
    _fail,
    _validate_with,
)
from jobsched.core.templates import BUCKET, TemplateError, is_bucket_name, split_s3_uri

# ---------------------------------------------------------------------------------------- triggers


def _check_bucket(value: str) -> str:
    if not is_bucket_name(value):
        raise _fail(
            "invalid_bucket", "'{value}' is not an S3 bucket name (3-63 characters a-z, 0-9, '.', '-')", value=value
        )
    return value


class EventTrigger(StrictModel):
    """Runs start when an event on ``bus`` matches ``pattern`` (EventBridge's grammar; EventBridge matches)."""

    bus: str = Field(
        default=DEFAULT_BUS,
        description="the default bus, or a bus tagged jobsched-team=<team> (or shared by the platform)",
        json_schema_extra={"pattern": _EVENT_BUS.pattern},
    )
    pattern: dict[str, JsonValue] = Field(description="an EventBridge event pattern")

    @field_validator("bus")
    @classmethod
    def _bus(cls, value: str) -> str:
        if not _EVENT_BUS.fullmatch(value):
            raise _fail("invalid_event_bus", "'{value}' is not an event bus name or ARN", value=value)
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _grammar(cls, data: Any, handler: ModelWrapValidatorHandler[EventTrigger]) -> EventTrigger:
        # Checked on the raw pattern so every problem is reported with its path inside the pattern.
        found = []
        if isinstance(data, dict) and "pattern" in data:
            found = pattern_problems(data["pattern"], shared_bus=data.get("bus", DEFAULT_BUS) == DEFAULT_BUS)
        problems = [
            InitErrorDetails(
                type=_fail("invalid_event_pattern", "{message}", message=message), loc=("pattern", *loc), input=data
            )
            for loc, message in found
        ]
        return _validate_with(cls, data, handler, problems)


class S3Trigger(StrictModel):
    """Runs start when an object is created in ``bucket`` (its EventBridge notifications must be on)."""

    bucket: str = Field(description="tagged jobsched-team=<team>", json_schema_extra={"pattern": BUCKET.pattern})
    prefix: str = Field(default="", max_length=1024)
    suffix: str = Field(default="", max_length=1024)

    @field_validator("bucket")
    @classmethod
    def _bucket(cls, value: str) -> str:
        return _check_bucket(value)


class TriggerBatch(StrictModel):
    """Events of one trigger collected into one run: the batch opens at its first event and its run starts
    when the window has passed or ``max_events`` have arrived, whichever is first."""

    window: Annotated[Duration, _bounded(timedelta(seconds=10), MAX_BATCH_WINDOW)] = timedelta(minutes=5)
    max_events: int = Field(default=100, ge=1, le=MAX_BATCH_EVENTS)


AfterStatus = Literal["succeeded", "failed", "timed_out"]


def _succeeded_only() -> list[AfterStatus]:
    return ["succeeded"]


class AfterTrigger(StrictModel):
    """Runs of this job when upstream jobs' runs finish: after ``job``, after ``any`` of several, or after
    ``all`` of several have finished a run for the same logical instant. The run inherits that instant."""

    model_config = ConfigDict(
        **StrictModel.model_config,
        json_schema_extra={"oneOf": [{"required": ["all"]}, {"required": ["any"]}, {"required": ["job"]}]},
    )

    all: list[JobRef] | None = Field(default=None, min_length=1, max_length=MAX_UPSTREAMS)
    any: list[JobRef] | None = Field(default=None, min_length=1, max_length=MAX_UPSTREAMS)
    job: JobRef | None = None
    status: list[AfterStatus] = Field(
        default_factory=_succeeded_only, min_length=1, max_length=3, description="the upstream runs' outcomes"
    )

    @model_validator(mode="after")
    def _one_form(self) -> AfterTrigger:
        given = [form for form in (self.all, self.any, self.job) if form is not None]
        if len(given) != 1:
            raise _fail("one_after_form", "give exactly one of all, any (lists of team/name) or job (one team/name)")
        if len(set(self.upstreams)) != len(self.upstreams):
            raise _fail("duplicate_upstream", "each upstream job once")
        return self

    @property
    def upstreams(self) -> list[str]:
        return list(self.all or self.any or ([self.job] if self.job else []))

    @property
    def needs_all(self) -> bool:
        return self.all is not None and len(self.all) > 1


class JobTrigger(StrictModel):
    """What starts a run besides the schedule: one of ``event``, ``s3`` or ``after``, events optionally batched."""

    model_config = ConfigDict(
        **StrictModel.model_config,
        json_schema_extra={"oneOf": [{"required": ["event"]}, {"required": ["s3"]}, {"required": ["after"]}]},
    )

    event: EventTrigger | None = None
    s3: S3Trigger | None = None
    after: AfterTrigger | None = None
    batch: TriggerBatch | None = Field(default=None, description="absent: one run per event")

    @model_validator(mode="after")
    def _one_kind(self) -> JobTrigger:
        if sum(kind is not None for kind in (self.event, self.s3, self.after)) != 1:
            raise _fail(
                "one_trigger_kind",
                "give exactly one of event (an EventBridge pattern), s3 (object arrivals) or after (upstream jobs)",
            )
        if self.after is not None and self.batch is not None:
            raise _fail("batch_on_after", "an after trigger starts one run per logical instant: it takes no batch")
        return self

    @property
    def kind(self) -> Literal["event", "s3", "after"]:
        return "event" if self.event is not None else "s3" if self.s3 is not None else "after"


class WaitCondition(StrictModel):
    """One condition a run waits on before it starts: an object in the team's bucket, or a run of a job."""

    model_config = ConfigDict(
        **StrictModel.model_config,
        json_schema_extra={"oneOf": [{"required": ["s3"]}, {"required": ["job"]}]},
    )

    s3: str | None = Field(
        default=None,
        max_length=1100,
        description="s3://bucket/key; the key may hold {logical_date} or {logical_date:%Y-%m-%d}",
    )
    job: JobRef | None = Field(default=None, description="a succeeded run of this job (team/name)")
    within: Annotated[Duration, _bounded(timedelta(minutes=1), timedelta(days=31))] | None = Field(
        default=None, description="job waits: the run's logical instant in [T - within, T] (default 24h)"
    )

    @field_validator("s3")
    @classmethod
    def _s3(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            bucket, _ = split_s3_uri(value)
        except TemplateError as error:
            raise _fail("invalid_s3_wait", "{message}", message=str(error)) from None
        _check_bucket(bucket)
        return value

    @model_validator(mode="after")
    def _one_form(self) -> WaitCondition:
        if (self.s3 is None) == (self.job is None):
            raise _fail("one_wait_form", "give exactly one of s3 (s3://bucket/key) or job (team/name)")
        if self.s3 is not None and self.within is not None:
            raise _fail("within_on_s3", "within applies to job waits; an s3 wait names its object by the date")
        return self

    @property
    def window(self) -> timedelta:
        return self.within or timedelta(hours=24)

    @property
    def bucket_and_key(self) -> tuple[str, str]:
        assert self.s3 is not None
        return split_s3_uri(self.s3)


class WaitPolicy(StrictModel):
    """How long a run waits for its ``wait_for`` conditions, and what it becomes when they are not met."""

    timeout: Annotated[Duration, _bounded(timedelta(minutes=1), MAX_WAIT_TIMEOUT)] = timedelta(hours=1)
    on_timeout: Literal["fail", "skip"] = Field(
        default="fail", description="fail: FAILED, paged by the escalation; skip: recorded SKIPPED"
    )


WaitConditions = Annotated[list[WaitCondition], Field(max_length=MAX_WAIT_CONDITIONS)]
