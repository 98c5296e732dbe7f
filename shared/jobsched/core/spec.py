"""The job specification: one pydantic schema for job files, API bodies, storage and OpenAPI.

Every message names what is allowed. Cross-field checks that can find several problems at once
(the DAG) carry them all in the error context; ``jobsched.core.errors`` expands them into one error each.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import date, timedelta
from functools import cache
from graphlib import CycleError, TopologicalSorter
from typing import Annotated, Any, Literal, TypeVar

import holidays
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.config import JsonDict
from pydantic_core import InitErrorDetails, PydanticCustomError

from jobsched.core.bounds import Instant, is_stored
from jobsched.core.checks import MAX_CHECKS, MAX_EXPECT_CHARS, CheckDefinitionError, check_schema, parse_assertion
from jobsched.core.durations import Duration, format_duration
from jobsched.core.event_patterns import pattern_problems
from jobsched.core.expressions import CronExpression, ExpressionError, parse_expression
from jobsched.core.item_lists import MAX_DISTRIBUTED_ITEMS, ItemFormat
from jobsched.core.references import ITEM as ITEM_REFERENCE
from jobsched.core.references import REFERENCE as REFERENCE_WHOLE
from jobsched.core.references import RUN_PAYLOAD as RUN_PAYLOAD_REFERENCE
from jobsched.core.references import has_reference, referenced_tasks
from jobsched.core.references import scan as scan_references
from jobsched.core.templates import BUCKET, TemplateError, is_bucket_name, split_s3_uri
from jobsched.core.tz import UTC, available_zones, suggest_zone
from jobsched.core.urls import ParsedUrl, UrlRefused, never_reachable, parse_url

MAX_DAG_TASKS = 100
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_SYNC_TARGET_TIMEOUT = timedelta(minutes=14)  # the worker Lambda itself stops at 15 minutes
MAX_ASYNC_TIMEOUT = timedelta(days=7)
MAX_JITTER = timedelta(hours=1)
MIN_PARKED_HEARTBEAT = timedelta(minutes=3)  # the heartbeat checker ticks each minute
MAX_TRIGGERS = 5  # event and s3 triggers of one job (each is an EventBridge rule)
MAX_BATCH_EVENTS = 500  # events one batched run receives
MAX_UPSTREAMS = 10  # jobs one after trigger waits on
MAX_WAIT_CONDITIONS = 5  # wait_for entries of a job or a DAG task (each is checked at every poll)
MAX_WAIT_TIMEOUT = timedelta(days=2)
# A batch's run is sent once, delayed by the window: SQS delays a message by at most 15 minutes.
MAX_BATCH_WINDOW = timedelta(minutes=15)
DEFAULT_BUS = "default"
DEFAULT_EVENT_RUNS_PER_MINUTE = 60

ModelT = TypeVar("ModelT", bound=BaseModel)

NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")  # a team's or a job's name
MAX_EMAIL = 254
_LAMBDA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}(?::[A-Za-z0-9_$-]{1,128})?$")
_LAMBDA_ARN = re.compile(
    r"^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]{1,64}(?::[A-Za-z0-9_$-]{1,128})?$"
)
_SNS_ARN = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(?:\.fifo)?$")
_STATES_ARN = re.compile(r"^arn:aws[a-z-]*:states:[a-z0-9-]+:\d{12}:stateMachine:[A-Za-z0-9_-]{1,80}$")
_EVENT_BUS = re.compile(
    r"^(?:[A-Za-z0-9._/-]{1,256}|arn:aws[a-z-]*:events:[a-z0-9-]+:\d{12}:event-bus/[A-Za-z0-9._/-]+)$"
)
# A header value is one line of Latin-1 text (RFC 9110 field-value: visible characters, spaces, tabs, obs-text);
# CR, LF and NUL would split or end the request, and http.client refuses them (and anything beyond Latin-1).
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
# Credentials belong in secret_headers (resolved at run time), never in the stored job.
_CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "cookie"})
_SECRET_REF = re.compile(r"^(secretsmanager|ssm):([A-Za-z0-9/_+=.@:-]{1,2048}?)(?:#([A-Za-z0-9_.-]{1,128}))?$")


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


def _fail(code: str, template: str, **context: Any) -> PydanticCustomError:
    return PydanticCustomError(code, template, context or None)


def header_value_allowed(value: str) -> bool:
    """Whether an HTTP header value is one line of text (also checked on secret values once resolved)."""
    return len(value) <= 8192 and _HEADER_VALUE.fullmatch(value) is not None


def _check_name(value: str) -> str:
    if not NAME.fullmatch(value):
        raise _fail(
            "invalid_name",
            "'{value}' is not allowed: use 1-63 characters a-z, 0-9 and '-', "
            "starting and ending with a letter or digit",
            value=value,
        )
    return value


Name = Annotated[str, AfterValidator(_check_name), WithJsonSchema({"type": "string", "pattern": NAME.pattern})]


def _check_job_ref(value: str) -> str:
    team, slash, name = value.partition("/")
    if not slash or not NAME.fullmatch(team) or not NAME.fullmatch(name):
        raise _fail("invalid_job_ref", "'{value}' is not a job: write team/name", value=value)
    return value


JobRef = Annotated[
    str,
    AfterValidator(_check_job_ref),
    WithJsonSchema({"type": "string", "pattern": f"{NAME.pattern[:-1]}/{NAME.pattern[1:]}"}),
]
# What the "give sns_topic, webhook or both" validators require, said in the schema too.
_A_CHANNEL: JsonDict = {
    "anyOf": [
        {"required": ["sns_topic"], "properties": {"sns_topic": {"type": "string"}}},
        {"required": ["webhook"], "properties": {"webhook": {"type": "string"}}},
    ]
}


def _check_email(value: str) -> str:
    """Linear time (the regex it replaces backtracked quadratically on 'a@' + dots + '@')."""
    local, at, domain = value.partition("@")
    labels = domain.split(".")
    valid = (
        len(value) <= MAX_EMAIL
        and at == "@"
        and local
        and "@" not in domain
        and len(labels) >= 2
        and all(labels)
        and not any(character.isspace() for character in value)
    )
    if not valid:
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise _fail(
            "invalid_email",
            "'{value}' is not an email address (at most {limit} characters)",
            value=shown,
            limit=MAX_EMAIL,
        )
    return value


def _parsed_url(value: str) -> ParsedUrl:
    try:
        return parse_url(value)
    except UrlRefused as error:
        raise _fail(error.code, "{error}", error=str(error)) from None


def _check_http_url(value: str) -> str:
    _parsed_url(value)
    return value


def _check_target_url(value: str) -> str:
    """A URL jobsched will call: parsed by the same parser that sends (no backslashes, no userinfo);
    metadata and link-local addresses are refused in every stage (the stage's own deny-list is applied
    when the job is stored and again on the resolved address at every call)."""
    parsed = _parsed_url(value)
    if parsed.scheme == "http" and parsed.host not in ("localhost", "127.0.0.1", "::1"):
        raise _fail(
            "insecure_url",
            "'{value}': use https (plain http is allowed for localhost only)",
            value=value,
        )
    address = parsed.literal_address
    if address is not None and never_reachable(address):
        raise _fail(
            "address_not_allowed",
            "'{value}': {address} is a link-local or metadata address; jobsched never calls those",
            value=value,
            address=str(address),
        )
    return value


def _check_json_payload(value: JsonValue) -> JsonValue:
    size = len(json.dumps(value, separators=(",", ":")).encode())
    if size > MAX_PAYLOAD_BYTES:
        raise _fail(
            "payload_too_large",
            "payload is {size} bytes; at most {limit} bytes are allowed (pass a reference instead)",
            size=size,
            limit=MAX_PAYLOAD_BYTES,
        )
    return value


def _check_secret_ref(value: str) -> str:
    if not _SECRET_REF.fullmatch(value):
        raise _fail(
            "invalid_secret_reference",
            "'{value}' is not a secret reference; write secretsmanager:NAME[#json-key] or ssm:/parameter/name",
            value=value,
        )
    return value


def parse_secret_ref(reference: str) -> tuple[str, str, str | None]:
    """(source, name, json_key) of a validated secret reference."""
    match = _SECRET_REF.fullmatch(reference)
    if not match:
        raise ValueError(f"not a secret reference: {reference!r}")
    return match.group(1), match.group(2), match.group(3)


EmailAddress = Annotated[str, AfterValidator(_check_email)]
_URL_SCHEMA = WithJsonSchema(
    {"type": "string", "format": "uri", "pattern": r"^https?://[A-Za-z0-9.-]+(:[0-9]+)?(/.*)?$"}
)
HttpUrl = Annotated[str, AfterValidator(_check_http_url), _URL_SCHEMA]
# A URL jobsched calls: https, or plain http to this machine only (what _check_target_url allows).
_TARGET_URL_SCHEMA = WithJsonSchema(
    {
        "type": "string",
        "format": "uri",
        "pattern": r"^(https://[A-Za-z0-9.-]+|http://(localhost|127\.0\.0\.1))(:[0-9]+)?(/.*)?$",
    }
)
TargetUrl = Annotated[str, AfterValidator(_check_target_url), _TARGET_URL_SCHEMA]
Payload = Annotated[JsonValue, AfterValidator(_check_json_payload)]
SecretRef = Annotated[
    str, AfterValidator(_check_secret_ref), WithJsonSchema({"type": "string", "pattern": _SECRET_REF.pattern})
]
SnsTopicArn = Annotated[str, WithJsonSchema({"type": "string", "pattern": _SNS_ARN.pattern})]


def _bounded(minimum: timedelta, maximum: timedelta) -> AfterValidator:
    def check(value: timedelta) -> timedelta:
        if not minimum <= value <= maximum:
            raise _fail(
                "duration_out_of_range",
                "{value} is out of range; allowed: {minimum} to {maximum}",
                value=format_duration(value),
                minimum=format_duration(minimum),
                maximum=format_duration(maximum),
            )
        return value

    return AfterValidator(check)


# ---------------------------------------------------------------------------------------- schedule


class DstPolicy(StrictModel):
    """What a schedule does at DST transitions. Unset fields follow ISC cron: fixed-time entries
    shift out of a gap and fire once in an overlap (gap: shift, fold: first); entries whose minute or
    hour field starts with '*' fire at every wall time that exists (gap: skip, fold: both)."""

    gap: Literal["shift", "skip"] | None = None
    fold: Literal["first", "last", "both"] | None = None


class CatchupPolicy(StrictModel):
    """What happens to instants missed while the scheduler could not fire them."""

    policy: Literal["none", "latest", "all"] = "latest"
    window: Annotated[Duration, _bounded(timedelta(minutes=1), timedelta(days=31))] = timedelta(hours=6)
    max_runs: int = Field(default=10, ge=1, le=1000)


@cache
def _holiday_codes() -> tuple[dict[str, list[str]], frozenset[str]]:
    return holidays.list_supported_countries(), frozenset(holidays.list_supported_financial())


def _parse_holiday_calendar(value: Any) -> Any:
    """'US', 'US-NY', a market like 'NYSE', or {country, subdivision}."""
    if isinstance(value, str):
        country, _, subdivision = value.strip().partition("-")
        return {"country": country, "subdivision": subdivision or None}
    return value


class HolidayCalendar(StrictModel):
    country: str
    subdivision: str | None = None

    @model_validator(mode="after")
    def _known(self) -> HolidayCalendar:
        countries, markets = _holiday_codes()
        code = self.country.upper()
        if code in markets and self.subdivision is None:
            self.country = code
            return self
        if code not in countries:
            raise _fail(
                "unknown_holiday_calendar",
                "unknown holiday calendar '{value}'; use an ISO 3166 country code such as US, GB, DE "
                "(optionally with a subdivision, US-NY) or a market: {markets}",
                value=self.country,
                markets=", ".join(sorted(markets)),
            )
        self.country = code
        if self.subdivision is not None:
            allowed = countries[code]
            match = {s.upper(): s for s in allowed}.get(self.subdivision.upper())
            if match is None:
                raise _fail(
                    "unknown_subdivision",
                    "'{value}' is not a subdivision of {country}; allowed: {allowed}",
                    value=self.subdivision,
                    country=code,
                    allowed=", ".join(allowed) or "none",
                )
            self.subdivision = match
        return self

    def label(self) -> str:
        return f"{self.country}-{self.subdivision}" if self.subdivision else self.country


class CalendarPolicy(StrictModel):
    skip_holidays: Annotated[HolidayCalendar | None, BeforeValidator(_parse_holiday_calendar)] = None
    business_days_only: bool = False
    exclude_dates: list[Annotated[str, BeforeValidator(lambda v: str(v))]] = Field(
        default_factory=list, max_length=1000
    )

    @field_validator("exclude_dates")
    @classmethod
    def _iso_dates(cls, values: list[str]) -> list[str]:
        for value in values:
            try:
                date.fromisoformat(value)
            except ValueError:
                raise _fail("invalid_date", "'{value}' is not a date; write YYYY-MM-DD", value=value) from None
        return sorted(set(values))


class Blackout(StrictModel):
    """A window in which the job must not fire: recurring (cron start + duration) or absolute."""

    cron: str | None = None
    duration: Annotated[Duration, _bounded(timedelta(minutes=1), timedelta(days=31))] | None = None
    start: AwareDatetime | None = None
    end: AwareDatetime | None = None
    action: Literal["skip", "defer"] = "skip"

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parsed = parse_expression(value)
            except ExpressionError as error:
                raise _fail("invalid_cron", "{error}", error=str(error)) from None
            if not isinstance(parsed, CronExpression):
                raise _fail("invalid_cron", "a blackout starts on a cron entry, not {value}", value=value)
        return value

    @model_validator(mode="after")
    def _one_form(self) -> Blackout:
        recurring = self.cron is not None or self.duration is not None
        absolute = self.start is not None or self.end is not None
        if recurring == absolute or (recurring and (self.cron is None or self.duration is None)):
            raise _fail(
                "invalid_blackout",
                "give either cron + duration (a recurring window) or start + end (one window)",
            )
        if absolute:
            if self.start is None or self.end is None or self.end <= self.start:
                raise _fail("invalid_blackout", "an absolute blackout needs start before end")
            self.start, self.end = self.start.astimezone(UTC), self.end.astimezone(UTC)
        return self


class Schedule(StrictModel):
    expression: str
    timezone: str = "UTC"
    dst: DstPolicy = Field(default_factory=DstPolicy)
    start_at: Instant | None = None
    end_at: Instant | None = None
    jitter: Annotated[Duration, _bounded(timedelta(0), MAX_JITTER)] = timedelta(0)
    catchup: CatchupPolicy = Field(default_factory=CatchupPolicy)
    calendar: CalendarPolicy | None = None
    blackouts: list[Blackout] = Field(default_factory=list, max_length=20)

    @field_validator("expression")
    @classmethod
    def _expression(cls, value: str) -> str:
        try:
            parse_expression(value)
        except ExpressionError as error:
            raise _fail("invalid_schedule_expression", "{error}", error=str(error)) from None
        return " ".join(value.split())

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        if value in available_zones():
            return value
        suggestion = suggest_zone(value)
        hint = f" (did you mean '{suggestion}'?)" if suggestion else ""
        raise _fail(
            "unknown_timezone",
            "unknown time zone '{value}'; use an IANA name such as America/New_York, Europe/Berlin or UTC{hint}",
            value=value,
            hint=hint,
        )

    @model_validator(mode="after")
    def _window(self) -> Schedule:
        if self.start_at and self.end_at and self.end_at <= self.start_at:
            raise _fail(
                "invalid_schedule_window",
                "end_at ({end}) must be after start_at ({start})",
                end=self.end_at.isoformat(),
                start=self.start_at.isoformat(),
            )
        return self


# ----------------------------------------------------------------------------------------- targets


class _TargetBase(StrictModel):
    timeout: Duration = timedelta(minutes=5)


class _PayloadTarget(_TargetBase):
    payload: Payload = None


class LambdaTarget(_PayloadTarget):
    type: Literal["lambda"]
    function: str = Field(
        description="function name, name:alias, or ARN",
        json_schema_extra={"pattern": f"{_LAMBDA_NAME.pattern}|{_LAMBDA_ARN.pattern}"},
    )
    timeout: Annotated[Duration, _bounded(timedelta(seconds=1), MAX_SYNC_TARGET_TIMEOUT)] = timedelta(minutes=5)

    @field_validator("function")
    @classmethod
    def _function(cls, value: str) -> str:
        if not (_LAMBDA_NAME.fullmatch(value) or _LAMBDA_ARN.fullmatch(value)):
            raise _fail(
                "invalid_function",
                "'{value}' is not a Lambda function name or ARN (arn:aws:lambda:REGION:ACCOUNT:function:NAME)",
                value=value,
            )
        return value


class SqsTarget(_PayloadTarget):
    type: Literal["sqs"]
    queue_url: HttpUrl
    message_group_id: str | None = Field(default=None, max_length=128, description="FIFO queues only")


class StepFunctionsTarget(_PayloadTarget):
    type: Literal["stepfunctions"]
    state_machine_arn: str = Field(json_schema_extra={"pattern": _STATES_ARN.pattern})
    timeout: Annotated[Duration, _bounded(timedelta(seconds=1), MAX_ASYNC_TIMEOUT)] = timedelta(hours=1)

    @field_validator("state_machine_arn")
    @classmethod
    def _arn(cls, value: str) -> str:
        if not _STATES_ARN.fullmatch(value):
            raise _fail(
                "invalid_state_machine_arn",
                "'{value}' is not a state machine ARN (arn:aws:states:REGION:ACCOUNT:stateMachine:NAME)",
                value=value,
            )
        return value


class EventBridgeTarget(_PayloadTarget):
    type: Literal["eventbridge"]
    bus: str = Field(default="default", json_schema_extra={"pattern": _EVENT_BUS.pattern})
    detail_type: str = Field(default="Scheduled Job Run", min_length=1, max_length=128)
    source: str = Field(default="jobsched", min_length=1, max_length=256)

    @field_validator("bus")
    @classmethod
    def _bus(cls, value: str) -> str:
        if not _EVENT_BUS.fullmatch(value):
            raise _fail("invalid_event_bus", "'{value}' is not an event bus name or ARN", value=value)
        return value

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        if value.startswith("aws."):
            raise _fail("reserved_source", "sources starting with 'aws.' are reserved for AWS services")
        return value


class HttpTarget(_PayloadTarget):
    type: Literal["http"]
    url: TargetUrl
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict, max_length=50)
    secret_headers: dict[str, SecretRef] = Field(default_factory=dict, max_length=20)
    timeout: Annotated[Duration, _bounded(timedelta(seconds=1), MAX_SYNC_TARGET_TIMEOUT)] = timedelta(seconds=30)

    @field_validator("headers", "secret_headers")
    @classmethod
    def _header_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not _HEADER_NAME.fullmatch(name):
                raise _fail("invalid_header", "'{name}' is not a valid HTTP header name", name=name)
        return value

    @field_validator("headers")
    @classmethod
    def _header_values(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if is_stored(info):  # checked since #26: a job stored before fails its runs in the http adapter instead
            return value
        for name, text in value.items():
            if not header_value_allowed(text):
                raise _fail(
                    "invalid_header",
                    "the value of header '{name}' is not one line of text: no CR, LF, NUL or other control characters, "
                    "Latin-1 characters only",
                    name=name,
                )
        return value

    @field_validator("headers")
    @classmethod
    def _no_credentials(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if name.lower() in _CREDENTIAL_HEADERS:
                raise _fail(
                    "secret_in_headers",
                    "header '{name}' carries credentials: move it to secret_headers as "
                    "secretsmanager:NAME or ssm:/NAME (values are resolved at run time, never stored)",
                    name=name,
                )
        return value


class CallbackTarget(_TargetBase):
    """The run stays RUNNING until external work reports completion with the run's token."""

    type: Literal["callback"]
    timeout: Annotated[Duration, _bounded(timedelta(seconds=1), MAX_ASYNC_TIMEOUT)] = timedelta(hours=1)


class ApprovalTarget(_TargetBase):
    """A DAG task that waits for a person: a member of the team approves or rejects it (API, CLI, console). It
    holds nothing while it waits (the state's task token); ``timeout`` ends the wait (TIMED_OUT). Never retried."""

    type: Literal["approval"]
    timeout: Annotated[Duration, _bounded(timedelta(minutes=1), MAX_ASYNC_TIMEOUT)] = timedelta(hours=24)
    message: str = Field(
        default="", max_length=1000, description="what the approver is asked (in the page and the run view)"
    )
    page_on_reject: bool = Field(
        default=False,
        description="a rejection fails the run and pages like a failure; by default it is a decision: the run "
        "ends CANCELLED with who rejected it and why, recorded and shown, and nobody is paged",
    )


_ECS_CLUSTER = re.compile(
    r"^(?:[A-Za-z0-9_-]{1,255}|arn:aws[a-z-]*:ecs:[a-z0-9-]+:\d{12}:cluster/[A-Za-z0-9_-]{1,255})$"
)
_TASK_DEFINITION = re.compile(
    r"^(?:[A-Za-z0-9_-]{1,255}(?::\d{1,10})?"
    r"|arn:aws[a-z-]*:ecs:[a-z0-9-]+:\d{12}:task-definition/[A-Za-z0-9_-]{1,255}:\d{1,10})$"
)
_SUBNET = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_SECURITY_GROUP = re.compile(r"^sg-[0-9a-f]{8,17}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
MAX_COMMAND_BYTES = 8 * 1024  # a container override's command, all arguments together
MAX_ENVIRONMENT_BYTES = 8 * 1024  # names and values together (ECS allows its overrides 8 KB in all)
RESERVED_ENV_PREFIX = "JOBSCHED_"  # what the scheduler sets: a team may not override them


def _check_pattern(value: str, pattern: re.Pattern[str], code: str, what: str) -> str:
    if not pattern.fullmatch(value):
        raise _fail(code, "'{value}' is not {what}", value=value, what=what)
    return value


class EcsNetwork(StrictModel):
    """awsvpc networking (Fargate requires it): the team's subnets and security groups."""

    subnets: list[str] = Field(min_length=1, max_length=16)
    security_groups: list[str] = Field(default_factory=list, max_length=5)
    assign_public_ip: bool = False

    @field_validator("subnets")
    @classmethod
    def _subnets(cls, value: list[str]) -> list[str]:
        return [_check_pattern(item, _SUBNET, "invalid_subnet", "a subnet id (subnet-...)") for item in value]

    @field_validator("security_groups")
    @classmethod
    def _groups(cls, value: list[str]) -> list[str]:
        return [
            _check_pattern(i, _SECURITY_GROUP, "invalid_security_group", "a security group id (sg-...)") for i in value
        ]


def _bounded_command(value: list[str] | None) -> list[str] | None:
    if value is not None and sum(len(part.encode()) for part in value) > MAX_COMMAND_BYTES:
        raise _fail("command_too_large", "the command is over {limit} bytes", limit=MAX_COMMAND_BYTES)
    return value


def _bounded_environment(value: dict[str, str]) -> dict[str, str]:
    for name in value:
        _check_pattern(name, _ENV_NAME, "invalid_env_name", "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
        if name.startswith(RESERVED_ENV_PREFIX):
            raise _fail("reserved_env_name", "'{name}': JOBSCHED_ variables are the scheduler's", name=name)
    if sum(len(k.encode()) + len(v.encode()) for k, v in value.items()) > MAX_ENVIRONMENT_BYTES:
        raise _fail("environment_too_large", "the environment is over {limit} bytes", limit=MAX_ENVIRONMENT_BYTES)
    return value


class ContainerOverride(StrictModel):
    """What one run changes in the task definition's container: bounded, so a job cannot make the task huge."""

    name: str = Field(min_length=1, max_length=255, description="the container of the task definition")
    command: list[str] | None = Field(default=None, max_length=100)
    environment: dict[str, str] = Field(default_factory=dict, max_length=100)
    cpu: int | None = Field(default=None, ge=128, le=16384, description="CPU units (1024 = 1 vCPU)")
    memory: int | None = Field(default=None, ge=128, le=122880, description="MiB")

    _command = field_validator("command")(staticmethod(_bounded_command))
    _environment = field_validator("environment")(staticmethod(_bounded_environment))


class EcsTarget(_TargetBase):
    """A task on ECS (Fargate or EC2), started with RunTask once per attempt; no Lambda waits on it: its Task
    State Change ends the run. Cluster and task definition must be the team's."""

    type: Literal["ecs"]
    cluster: str = Field(max_length=2048, json_schema_extra={"pattern": _ECS_CLUSTER.pattern})
    task_definition: str = Field(max_length=2048, json_schema_extra={"pattern": _TASK_DEFINITION.pattern})
    launch_type: Literal["FARGATE", "EC2"] | None = None
    capacity_provider: str | None = Field(default=None, min_length=1, max_length=255)
    network: EcsNetwork | None = None
    container: ContainerOverride | None = None
    timeout: Annotated[Duration, _bounded(timedelta(seconds=10), MAX_ASYNC_TIMEOUT)] = timedelta(hours=1)

    @field_validator("cluster")
    @classmethod
    def _cluster(cls, value: str) -> str:
        return _check_pattern(value, _ECS_CLUSTER, "invalid_cluster", "an ECS cluster name or ARN")

    @field_validator("task_definition")
    @classmethod
    def _task_definition(cls, value: str) -> str:
        return _check_pattern(
            value, _TASK_DEFINITION, "invalid_task_definition", "a task definition family[:revision] or ARN"
        )

    @model_validator(mode="after")
    def _capacity(self) -> EcsTarget:
        if self.launch_type is not None and self.capacity_provider is not None:
            raise _fail("launch_type_or_capacity_provider", "give launch_type or capacity_provider, not both")
        if self.launch_type == "FARGATE" and self.network is None:
            raise _fail("fargate_needs_network", "a FARGATE task needs network: {subnets: [...]} (awsvpc)")
        return self


_JOB_QUEUE = re.compile(
    r"^(?:[A-Za-z0-9_-]{1,128}|arn:aws[a-z-]*:batch:[a-z0-9-]+:\d{12}:job-queue/[A-Za-z0-9_-]{1,128})$"
)
_JOB_DEFINITION = re.compile(
    r"^(?:[A-Za-z0-9_-]{1,128}(?::\d{1,10})?"
    r"|arn:aws[a-z-]*:batch:[a-z0-9-]+:\d{12}:job-definition/[A-Za-z0-9_-]{1,128}:\d{1,10})$"
)
MAX_ARRAY_SIZE = 10_000  # AWS Batch's own limit of an array job's children


class BatchContainerOverride(StrictModel):
    """What one run changes in the job definition's container: bounded like an ECS override."""

    command: list[str] | None = Field(default=None, max_length=100)
    environment: dict[str, str] = Field(default_factory=dict, max_length=100)
    vcpus: float | None = Field(default=None, gt=0, le=256, description="vCPUs (0.25 steps on Fargate)")
    memory: int | None = Field(default=None, ge=128, le=1_048_576, description="MiB")

    _command = field_validator("command")(staticmethod(_bounded_command))
    _environment = field_validator("environment")(staticmethod(_bounded_environment))


class BatchTarget(_TargetBase):
    """A job on AWS Batch (SubmitJob once per attempt; an array job when array_size is given, succeeding when
    every child does). No Lambda waits: its Batch Job State Change ends the run. Queue and definition must be
    the team's."""

    type: Literal["batch"]
    job_queue: str = Field(max_length=2048, json_schema_extra={"pattern": _JOB_QUEUE.pattern})
    job_definition: str = Field(max_length=2048, json_schema_extra={"pattern": _JOB_DEFINITION.pattern})
    array_size: int | None = Field(default=None, ge=2, le=MAX_ARRAY_SIZE, description="children of an array job")
    container: BatchContainerOverride | None = None
    timeout: Annotated[Duration, _bounded(timedelta(seconds=60), MAX_ASYNC_TIMEOUT)] = timedelta(hours=1)

    @field_validator("job_queue")
    @classmethod
    def _job_queue(cls, value: str) -> str:
        return _check_pattern(value, _JOB_QUEUE, "invalid_job_queue", "a Batch job queue name or ARN")

    @field_validator("job_definition")
    @classmethod
    def _job_definition(cls, value: str) -> str:
        return _check_pattern(
            value, _JOB_DEFINITION, "invalid_job_definition", "a Batch job definition name[:revision] or ARN"
        )


_EKS_CLUSTER = re.compile(
    r"^(?:[A-Za-z0-9][A-Za-z0-9_-]{0,99}|arn:aws[a-z-]*:eks:[a-z0-9-]+:\d{12}:cluster/[A-Za-z0-9][A-Za-z0-9_-]{0,99})$"
)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,1023}$")
# Kubernetes quantities: CPU as 500m, 0.5 or 2; memory as 512Mi, 4Gi, 1G or a number of bytes.
_QUANTITY = re.compile(r"^(?:\d+(?:\.\d+)?)(?:m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


class ComputeResources(StrictModel):
    cpu: str | None = Field(default=None, max_length=32, json_schema_extra={"pattern": _QUANTITY.pattern})
    memory: str | None = Field(default=None, max_length=32, json_schema_extra={"pattern": _QUANTITY.pattern})

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str | None) -> str | None:
        if value is not None:
            _check_pattern(value, _QUANTITY, "invalid_quantity", "a Kubernetes quantity (500m, 2, 512Mi, 4Gi)")
        return value


class KubernetesResources(StrictModel):
    requests: ComputeResources = Field(default_factory=ComputeResources)
    limits: ComputeResources = Field(default_factory=ComputeResources)


class KubernetesTarget(_TargetBase):
    """A batch/v1 Job on an EKS cluster, run by the deployment's Step Functions state machine
    (``eks:runJob.sync``): one execution per attempt, named by the attempt. The cluster must be the team's (or
    shared by the platform); the namespace and service account the team's, by the platform's grants
    (``tenancy.ownership.TeamGrants``)."""

    type: Literal["kubernetes"]
    cluster: str = Field(max_length=2048, json_schema_extra={"pattern": _EKS_CLUSTER.pattern})
    namespace: str = Field(max_length=63, description="the team's namespace: its name, or one the platform grants it")
    image: str = Field(max_length=1024, json_schema_extra={"pattern": _IMAGE.pattern})
    command: list[str] | None = Field(default=None, max_length=100)
    args: list[str] | None = Field(default=None, max_length=100)
    environment: dict[str, str] = Field(default_factory=dict, max_length=100)
    resources: KubernetesResources = Field(default_factory=KubernetesResources)
    service_account: str | None = Field(default=None, max_length=253)
    ttl_after_finished: Annotated[Duration, _bounded(timedelta(0), timedelta(days=7))] = Field(
        default=timedelta(hours=1), description="how long the finished Job stays for its logs (ttlSecondsAfterFinished)"
    )
    timeout: Annotated[Duration, _bounded(timedelta(minutes=1), MAX_ASYNC_TIMEOUT)] = timedelta(hours=1)

    _command = field_validator("command")(staticmethod(_bounded_command))
    _args = field_validator("args")(staticmethod(_bounded_command))
    _environment = field_validator("environment")(staticmethod(_bounded_environment))

    @field_validator("cluster")
    @classmethod
    def _cluster(cls, value: str) -> str:
        return _check_pattern(value, _EKS_CLUSTER, "invalid_eks_cluster", "an EKS cluster name or ARN")

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        return _check_pattern(value, _IMAGE, "invalid_image", "a container image reference")

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        return _check_pattern(value, _DNS_LABEL, "invalid_namespace", "a Kubernetes namespace (a DNS label)")

    @field_validator("service_account")
    @classmethod
    def _service_account(cls, value: str | None) -> str | None:
        if value is not None:
            _check_pattern(value, _DNS_SUBDOMAIN, "invalid_service_account", "a Kubernetes service account name")
        return value


Target = Annotated[
    LambdaTarget
    | SqsTarget
    | StepFunctionsTarget
    | EventBridgeTarget
    | HttpTarget
    | CallbackTarget
    | ApprovalTarget
    | EcsTarget
    | BatchTarget
    | KubernetesTarget,
    Field(discriminator="type"),
]
TARGET_TYPES = (
    "lambda",
    "sqs",
    "stepfunctions",
    "eventbridge",
    "http",
    "callback",
    "approval",
    "ecs",
    "batch",
    "kubernetes",
)
# Targets whose result arrives from outside (a callback, a container's state change): no worker waits for it.
EXTERNAL_TARGETS = (CallbackTarget, ApprovalTarget, EcsTarget, BatchTarget, KubernetesTarget)
# Targets that run as containers: their timeout is a wall-clock limit from the start (heartbeats report progress
# and checkpoints but never extend it), and their task is stopped when the run ends early.
CONTAINER_TARGETS = (EcsTarget, BatchTarget, KubernetesTarget)
ContainerTarget = EcsTarget | BatchTarget | KubernetesTarget


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


# ------------------------------------------------------------------------------------------ checks

OUTPUT_TARGETS = ("lambda", "http", "callback", "approval")  # targets that hand back what they produced (an
# approval: its decision, who made it and their comment)


class OutputCheck(StrictModel):
    """A quality gate on what the target returned (core.checks): an assertion or a JSON Schema."""

    name: Name | None = Field(default=None, description="shown in the run view and pages; default: the check itself")
    expect: str | None = Field(
        default=None,
        max_length=MAX_EXPECT_CHARS,
        description="PATH OP VALUE on the output as JSON, e.g. output.rows > 0 or len(output.files) >= 1",
    )
    json_schema: dict[str, JsonValue] | None = Field(
        default=None, description="a JSON Schema the output must match (linear-cost keywords only)"
    )
    severity: Literal["error", "warn"] = Field(
        default="error", description="error: the attempt fails (not retried); warn: recorded and paged as a warning"
    )

    @field_validator("expect")
    @classmethod
    def _assertion(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_assertion(value)
            except CheckDefinitionError as error:
                raise _fail("invalid_check", "{message}", message=str(error)) from None
        return value

    @field_validator("json_schema")
    @classmethod
    def _schema(cls, value: dict[str, JsonValue] | None) -> dict[str, JsonValue] | None:
        if value is not None:
            try:
                check_schema(value)
            except CheckDefinitionError as error:
                raise _fail("invalid_check_schema", "{message}", message=str(error)) from None
        return value

    @model_validator(mode="after")
    def _one_form(self) -> OutputCheck:
        if (self.expect is None) == (self.json_schema is None):
            raise _fail("check_form", "give exactly one of expect (an assertion) or json_schema")
        return self

    @property
    def label(self) -> str:
        return self.name or (self.expect if self.expect is not None else "json_schema")


Checks = Annotated[list[OutputCheck], Field(max_length=MAX_CHECKS)]


def _check_checks_target(checks: list[OutputCheck], info: ValidationInfo) -> list[OutputCheck]:
    target = info.data.get("target")  # absent when the target itself was invalid: its own error says so
    if checks and target is not None and target.type not in OUTPUT_TARGETS:
        raise _fail(
            "checks_need_output",
            "checks test what a target returns: {allowed} targets return output, {type} does not",
            allowed=", ".join(OUTPUT_TARGETS),
            type=target.type,
        )
    return checks


# --------------------------------------------------------------------------------------------- DAG

MAX_MAP_ITEMS = 1000  # items of one inline map (its list is an upstream output of <= 32 KB)
MAX_MAP_CONCURRENCY = 40  # items running at once in an inline Map state
MAX_DISTRIBUTED_CONCURRENCY = 100  # items running at once in a distributed map (child executions)
MAP_TARGETS = ("lambda", "http", "sqs", "stepfunctions", "eventbridge")  # called once per item, synchronously


class MapSpec(StrictModel):
    """Fan-out: the task's target runs once per item of a list: one an upstream task returned (inline), or the
    items of an object in the team's S3 bucket (distributed: Step Functions' Distributed Map reads it)."""

    mode: Literal["inline", "distributed"] = Field(
        default="inline",
        description=f"inline: at most {MAX_MAP_ITEMS} items; distributed: the object's items, at most "
        f"{MAX_DISTRIBUTED_ITEMS}",
    )
    over: str = Field(
        max_length=1100,
        description="inline: one reference to an upstream's list, e.g. {{ tasks.list.output.parts }}; distributed: "
        "one reference to an upstream's s3://bucket/key, or s3://bucket/key itself (the key may hold {logical_date})",
    )
    format: ItemFormat | None = Field(
        default=None, description="distributed: json (the object is a list) or csv (a header row, then one item a row)"
    )
    max_concurrency: int = Field(
        default=10, ge=1, le=MAX_DISTRIBUTED_CONCURRENCY, description=f"inline: at most {MAX_MAP_CONCURRENCY}"
    )
    tolerated_failure_percentage: float = Field(
        default=0, ge=0, le=100, description="the task still succeeds while at most this share of its items failed"
    )

    @field_validator("over")
    @classmethod
    def _over(cls, value: str, info: ValidationInfo) -> str:
        over = value.strip()
        if REFERENCE_WHOLE.fullmatch(over):
            return value
        if info.data.get("mode") != "distributed":
            raise _fail(
                "invalid_map",
                "over is one reference to a list an upstream task returned, e.g. {{ tasks.list.output.parts }}",
            )
        try:
            bucket, _ = split_s3_uri(over)
        except TemplateError as error:
            raise _fail(
                "invalid_map",
                "a distributed map's over is one reference to an upstream's s3://bucket/key, or s3://bucket/key "
                "itself: {message}",
                message=str(error),
            ) from None
        _check_bucket(bucket)
        return value

    @field_validator("format")
    @classmethod
    def _format(cls, value: ItemFormat | None, info: ValidationInfo) -> ItemFormat | None:
        if value is not None and info.data.get("mode") != "distributed":
            raise _fail("map_format", "format applies to a distributed map (mode: distributed), which reads S3")
        return value

    @field_validator("max_concurrency")
    @classmethod
    def _concurrency(cls, value: int, info: ValidationInfo) -> int:
        if value > MAX_MAP_CONCURRENCY and info.data.get("mode") != "distributed":
            raise _fail(
                "map_concurrency",
                "an inline map runs at most {inline} items at once (got {value}); mode: distributed, up to {most}",
                inline=MAX_MAP_CONCURRENCY,
                value=value,
                most=MAX_DISTRIBUTED_CONCURRENCY,
            )
        return value

    @property
    def items_format(self) -> ItemFormat:
        return self.format or "json"

    @property
    def named_object(self) -> tuple[str, str] | None:
        """(bucket, key template) when the spec itself names the object (not an upstream's output)."""
        over = self.over.strip()
        return split_s3_uri(over) if self.mode == "distributed" and not REFERENCE_WHOLE.fullmatch(over) else None


class DagTask(StrictModel):
    # What _heartbeats requires, said in the schema: a heartbeat_timeout only on a callback task.
    model_config = ConfigDict(
        **StrictModel.model_config,
        json_schema_extra={
            "if": {"required": ["heartbeat_timeout"], "properties": {"heartbeat_timeout": {"type": "string"}}},
            "then": {"properties": {"target": {"properties": {"type": {"const": "callback"}}}}},
        },
    )

    name: Name
    target: Target
    depends_on: list[str] = Field(default_factory=list, max_length=MAX_DAG_TASKS)
    retry: RetryPolicy | None = None
    timeout: Annotated[Duration, _bounded(timedelta(seconds=1), MAX_ASYNC_TIMEOUT)] | None = Field(
        default=None, description="per attempt; default: the target's timeout"
    )
    heartbeat_timeout: Annotated[Duration, _bounded(timedelta(seconds=1), timedelta(days=1))] | None = Field(
        default=None, description="callback tasks: fail the attempt when no heartbeat arrives for this long"
    )
    trigger_rule: Literal["all_success", "all_done"] = "all_success"
    wait_for: WaitConditions = Field(
        default_factory=list, description="conditions the task waits on once its dependencies have finished"
    )
    wait: WaitPolicy | None = Field(default=None, description="with wait_for: how long, and then what")
    checks: Checks = Field(default_factory=list, description="quality gates on the task's output")
    map: MapSpec | None = Field(
        default=None, description="run the target once per item of an upstream task's list ({{ item }} in the payload)"
    )

    _checks_target = field_validator("checks")(_check_checks_target)

    @field_validator("map")
    @classmethod
    def _map_target(cls, value: MapSpec | None, info: ValidationInfo) -> MapSpec | None:
        target = info.data.get("target")
        if value is not None and target is not None and target.type not in MAP_TARGETS:
            raise _fail(
                "map_target",
                "a map runs its target once per item and waits for each: {allowed} targets can; {type} cannot",
                allowed=", ".join(MAP_TARGETS),
                type=target.type,
            )
        return value

    @model_validator(mode="after")
    def _heartbeats(self) -> DagTask:
        _check_wait_policy(self.wait_for, self.wait)
        if self.target.type in ("ecs", "batch", "kubernetes"):
            raise _fail(
                "container_task_in_dag",
                "an {type} target runs a job's runs; DAG tasks cannot run one yet",
                type=self.target.type,
            )
        if self.heartbeat_timeout is None:
            return self
        if self.target.type != "callback":
            raise _fail(
                "heartbeat_needs_callback",
                "heartbeat_timeout applies to callback tasks (the worker itself runs {type} targets within timeout)",
                type=self.target.type,
            )
        if (self.depends_on or self.wait_for) and self.heartbeat_timeout < MIN_PARKED_HEARTBEAT:
            # While it waits for its dependencies or its data the scheduler heartbeats the task once a minute.
            raise _fail(
                "heartbeat_too_short",
                "a task with depends_on or wait_for needs heartbeat_timeout of at least {minimum} (got {value})",
                minimum=format_duration(MIN_PARKED_HEARTBEAT),
                value=format_duration(self.heartbeat_timeout),
            )
        return self


def _check_wait_policy(conditions: list[WaitCondition], policy: WaitPolicy | None) -> None:
    if policy is not None and not conditions:
        raise _fail("wait_without_wait_for", "wait says how long to wait for wait_for's conditions: give wait_for")


class Dag(StrictModel):
    tasks: list[DagTask] = Field(min_length=1)

    @model_validator(mode="wrap")
    @classmethod
    def _graph(cls, data: Any, handler: ModelWrapValidatorHandler[Dag]) -> Dag:
        # Checked on the raw tasks so a cycle is reported together with any bad field of a task.
        tasks = data.get("tasks") if isinstance(data, dict) else None
        shape = [
            (task.get("name"), task.get("depends_on") or [])
            for task in (tasks if isinstance(tasks, list) else [])
            if isinstance(task, dict)
        ]
        problems = [
            InitErrorDetails(type=_fail("invalid_dag", "{message}", message=message), loc=loc, input=data)
            for loc, message in dag_problems(shape)
        ]
        return _validate_with(cls, data, handler, problems)

    @model_validator(mode="after")
    def _references(self, info: ValidationInfo) -> Dag:
        if is_stored(info):  # checked since #32: a stored job's unresolvable reference fails its task instead
            return self
        problems = reference_problems(self.tasks)
        if problems:
            raise ValidationError.from_exception_data(
                "Dag",
                [
                    InitErrorDetails(type=_fail(code, "{message}", message=message), loc=loc, input=None)
                    for loc, code, message in problems
                ],
            )
        return self

    def referenced_outputs(self) -> set[str]:
        """Tasks whose output a downstream task reads (its payload, or the list its map runs over): only theirs are
        kept for the run."""
        return {
            name
            for task in self.tasks
            for place in (getattr(task.target, "payload", None), task.map.over if task.map else None)
            for name in referenced_tasks(place)
        }

    def order(self) -> list[str]:
        """Task names in a dependency order (stable for the same spec)."""
        sorter: TopologicalSorter[str] = TopologicalSorter()
        for task in self.tasks:
            sorter.add(task.name, *task.depends_on)
        return list(sorter.static_order())


def reference_problems(tasks: list[DagTask]) -> list[tuple[tuple[str | int, ...], str, str]]:
    """(location, code, message) of every payload reference that cannot resolve: a bad form, an unknown task, a
    task not upstream (its output would not exist yet), or an upstream whose target returns no output."""
    by_name = {task.name: task for task in tasks}

    def ancestors(name: str) -> set[str]:
        seen: set[str] = set()
        pending = list(by_name[name].depends_on)
        while pending:
            current = pending.pop()
            if current not in seen and current in by_name:
                seen.add(current)
                pending.extend(by_name[current].depends_on)
        return seen

    problems: list[tuple[tuple[str | int, ...], str, str]] = []
    for index, task in enumerate(tasks):
        places: list[tuple[tuple[str | int, ...], Any]] = [
            (("tasks", index, "target", "payload"), getattr(task.target, "payload", None))
        ]
        if task.map is not None:
            places.append((("tasks", index, "map", "over"), task.map.over))
        for location, value in places:
            problems += _place_problems(task, location, value, by_name, ancestors)
    return problems


def _place_problems(
    task: DagTask,
    location: tuple[str | int, ...],
    value: Any,
    by_name: dict[str, DagTask],
    ancestors: Callable[[str], set[str]],
) -> list[tuple[tuple[str | int, ...], str, str]]:
    """The problems of the references in one place of a task (its payload, or its map's list)."""
    problems: list[tuple[tuple[str | int, ...], str, str]] = []
    found, unparsed = scan_references(value)
    problems += [(location, "invalid_reference", f"{where}: {why}" if where else why) for where, why in unparsed]
    upstream = ancestors(task.name) if found else set()
    for where, reference in found:
        at = f"{where}: " if where else ""
        if reference.task == RUN_PAYLOAD_REFERENCE:
            continue  # any task may read what the run was triggered with
        if reference.task == ITEM_REFERENCE:
            if task.map is None or location[-1] == "over":
                message = f"{at}{{{{ item }}}} is the item of a map task's payload; '{task.name}' has no map"
                problems.append((location, "item_outside_map", message))
            continue
        if reference.task not in by_name:
            known = ", ".join(sorted(by_name))
            message = f"{at}unknown task '{reference.task}'; tasks in this DAG: {known}"
            problems.append((location, "unknown_task_reference", message))
        elif reference.task not in upstream:
            message = f"{at}task '{reference.task}' is not upstream of '{task.name}': add it to depends_on"
            problems.append((location, "not_upstream", message))
        elif by_name[reference.task].target.type not in OUTPUT_TARGETS:
            kind = by_name[reference.task].target.type
            message = f"{at}task '{reference.task}' ({kind}) returns no output; {', '.join(OUTPUT_TARGETS)} do"
            problems.append((location, "no_output", message))
    return problems


def dag_problems(shape: list[tuple[Any, Any]]) -> list[tuple[tuple[str | int, ...], str]]:
    """Every structural problem of (name, depends_on) pairs as (location, message): all, not the first."""
    problems: list[tuple[tuple[str | int, ...], str]] = []
    if len(shape) > MAX_DAG_TASKS:
        problems.append((("tasks",), f"{len(shape)} tasks; at most {MAX_DAG_TASKS} are allowed"))
    seen = _first_index_of_each_name(shape, problems)
    sorter: TopologicalSorter[str] = TopologicalSorter()
    for index, (name, depends_on) in enumerate(shape):
        if not isinstance(name, str) or not isinstance(depends_on, list):
            continue
        sorter.add(name)
        for position, dependency in enumerate(depends_on):
            location: tuple[str | int, ...] = ("tasks", index, "depends_on", position)
            if not isinstance(dependency, str):
                continue  # not a task name: the field's own validation says so
            if dependency == name:
                problems.append((location, f"task '{name}' depends on itself"))
            elif dependency not in seen:
                known = ", ".join(sorted(seen)) or "none"
                problems.append((location, f"unknown task '{dependency}'; tasks in this DAG: {known}"))
            else:
                sorter.add(name, dependency)
    try:
        sorter.prepare()
    except CycleError as error:
        problems.append((("tasks",), "cycle: " + " -> ".join(error.args[1])))
    return problems


def _first_index_of_each_name(
    shape: list[tuple[Any, Any]], problems: list[tuple[tuple[str | int, ...], str]]
) -> dict[str, int]:
    """Each task name's first position; a repeated name is a problem at its later positions."""
    seen: dict[str, int] = {}
    for index, (name, _) in enumerate(shape):
        if not isinstance(name, str):
            continue
        if name in seen:
            problems.append((("tasks", index, "name"), f"duplicate task '{name}' (also tasks[{seen[name]}])"))
        else:
            seen[name] = index
    return seen


def _validate_with(
    cls: type[ModelT],
    data: Any,
    handler: ModelWrapValidatorHandler[ModelT],
    problems: list[InitErrorDetails],
) -> ModelT:
    """Run field validation and report ``problems`` together with its errors, not instead of them."""
    try:
        model = handler(data)
    except ValidationError as error:
        carried = [
            InitErrorDetails(
                type=PydanticCustomError(detail["type"], detail["msg"], detail.get("ctx")),
                loc=detail["loc"],
                input=detail["input"],
            )
            for detail in error.errors(include_url=False)
        ]
        raise ValidationError.from_exception_data(error.title, [*carried, *problems]) from None
    if problems:
        raise ValidationError.from_exception_data(cls.__name__, problems)
    return model


# --------------------------------------------------------------------------------------------- job


class JobSpec(StrictModel):
    """A job as teams write it. ``team`` + ``name`` identify it."""

    name: Name
    team: Name
    description: str = Field(default="", max_length=1024)
    owner: EmailAddress | None = None
    runbook_url: HttpUrl | None = None
    tags: dict[str, Annotated[str, BeforeValidator(lambda v: str(v) if isinstance(v, int | float) else v)]] = Field(
        default_factory=dict, max_length=50
    )
    schedule: Schedule | None = Field(default=None, description="absent: the job runs only when triggered")
    share_with: list[Name] = Field(
        default_factory=list, max_length=50, description="other teams whose jobs may run after this job's runs"
    )
    triggers: list[JobTrigger] = Field(
        default_factory=list, max_length=MAX_TRIGGERS, description="events that start runs, besides the schedule"
    )
    target: Target | None = None
    dag: Dag | None = None
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    concurrency: Concurrency = Field(default_factory=Concurrency)
    priority: Literal["high", "normal", "low"] = "normal"
    circuit_breaker: Literal["team", "job", "off"] = Field(
        default="team",
        description="whose failures of a target hold this job's runs: the team's jobs' (default), this job's "
        "own, or none (timeouts, throttles, 5xx and refused connections count; the job's own errors never do)",
    )
    heartbeat_timeout: Annotated[Duration, _bounded(timedelta(seconds=10), timedelta(days=1))] | None = None
    deadline: Annotated[Duration, _bounded(timedelta(minutes=1), timedelta(days=31))] | None = None
    escalation: Escalation | None = None
    run_retention: Annotated[Duration, _bounded(timedelta(days=1), timedelta(days=400))] = timedelta(days=30)
    wait_for: WaitConditions = Field(
        default_factory=list, description="conditions a run waits on (WAITING, holding nothing) before it starts"
    )
    wait: WaitPolicy | None = Field(default=None, description="with wait_for: how long, and then what")
    checks: Checks = Field(
        default_factory=list, description="quality gates on the target's output (a DAG's go on its tasks)"
    )

    _checks_target = field_validator("checks")(_check_checks_target)

    @field_validator("target")
    @classmethod
    def _no_references(cls, value: Target | None, info: ValidationInfo) -> Target | None:
        if is_stored(info):  # checked since #32: text stored before is passed on as it was
            return value
        if isinstance(value, ApprovalTarget):
            raise _fail("approval_outside_dag", "an approval is a task of a DAG: it holds back the tasks after it")
        payload = getattr(value, "payload", None)
        if payload is not None and has_reference(payload):
            raise _fail(
                "reference_outside_dag",
                "{{ tasks.NAME.output }} reads an upstream task's output: only DAG tasks have upstream tasks",
            )
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: dict[str, str]) -> dict[str, str]:
        for key, tag in value.items():
            if not 1 <= len(key) <= 128 or len(tag) > 256:
                raise _fail("invalid_tag", "tag '{key}': keys 1-128 characters, values at most 256", key=key)
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _one_kind_of_work(cls, data: Any, handler: ModelWrapValidatorHandler[JobSpec]) -> JobSpec:
        problems = []
        if isinstance(data, dict) and data.get("wait") is not None and not data.get("wait_for"):
            problems.append(
                InitErrorDetails(
                    type=_fail("wait_without_wait_for", "wait says how long to wait for wait_for's conditions"),
                    loc=("wait",),
                    input=data["wait"],
                )
            )
        if isinstance(data, dict) and (data.get("target") is None) == (data.get("dag") is None):
            problems.append(
                InitErrorDetails(
                    type=_fail(
                        "target_or_dag",
                        "give exactly one of target (a single task) or dag (tasks with dependencies)",
                    ),
                    loc=("target",),
                    input=data,
                )
            )
        if isinstance(data, dict) and data.get("dag") is not None and isinstance(data.get("triggers"), list):
            for index, trigger in enumerate(data["triggers"]):
                if isinstance(trigger, dict) and trigger.get("batch") is not None:
                    problems.append(
                        InitErrorDetails(
                            type=_fail(
                                "batch_on_dag",
                                "a batched trigger starts a job with a target; a DAG's runs take one event each",
                            ),
                            loc=("triggers", index, "batch"),
                            input=trigger["batch"],
                        )
                    )
        if isinstance(data, dict) and data.get("dag") is not None and data.get("checks"):
            problems.append(
                InitErrorDetails(
                    type=_fail("checks_on_dag", "a DAG's checks go on its tasks (dag.tasks[].checks)"),
                    loc=("checks",),
                    input=data["checks"],
                )
            )
        return _validate_with(cls, data, handler, problems)

    def dag_outputs(self) -> set[str]:
        """The DAG's tasks whose output a downstream task reads (none for a single-target job)."""
        return self.dag.referenced_outputs() if self.dag is not None else set()

    @property
    def key(self) -> str:
        """team/name: the job's identity and the seed of its H values and jitter."""
        return f"{self.team}/{self.name}"

    def upstreams(self) -> list[str]:
        """The jobs this job runs after or waits for (every after trigger's upstreams, every job wait), each once."""
        found = [upstream for trigger in self.triggers if trigger.after for upstream in trigger.after.upstreams]
        found += [condition.job for _, condition in self.wait_conditions() if condition.job is not None]
        return list(dict.fromkeys(found))

    def wait_conditions(self) -> list[tuple[str, WaitCondition]]:
        """(field path, condition) of every wait: the job's own, and each DAG task's."""
        found = [(f"wait_for[{index}]", condition) for index, condition in enumerate(self.wait_for)]
        for position, task in enumerate(self.dag.tasks if self.dag is not None else []):
            found += [(f"dag.tasks[{position}].wait_for[{index}]", c) for index, c in enumerate(task.wait_for)]
        return found

    def targets(self) -> list[tuple[str, Target]]:
        """(field path, target) of everything the job calls: its target, or each DAG task's."""
        if self.target is not None:
            return [("target", self.target)]
        if self.dag is not None:
            return [(f"dag.tasks[{index}].target", task.target) for index, task in enumerate(self.dag.tasks)]
        return []
