"""Shared building blocks of the job specification: limits, name and URL checks, the strict model, the targets' base."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    JsonValue,
    ModelWrapValidatorHandler,
    ValidationError,
    WithJsonSchema,
)
from pydantic.config import JsonDict
from pydantic_core import InitErrorDetails, PydanticCustomError

from jobsched.core.durations import Duration, format_duration
from jobsched.core.urls import ParsedUrl, UrlRefused, never_reachable, parse_url

MAX_DAG_TASKS = 100
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_SYNC_TARGET_TIMEOUT = timedelta(minutes=14)  # the worker Lambda itself stops at 15 minutes
MAX_ASYNC_TIMEOUT = timedelta(days=7)
MAX_JITTER = timedelta(hours=1)
MIN_PARKED_HEARTBEAT = timedelta(minutes=3)  # the heartbeat checker ticks each minute
MAX_SCHEDULES = 10  # schedules of one job (each compiled and merged at every visit)
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


class _TargetBase(StrictModel):
    timeout: Duration = timedelta(minutes=5)


class _PayloadTarget(_TargetBase):
    payload: Payload = None


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
