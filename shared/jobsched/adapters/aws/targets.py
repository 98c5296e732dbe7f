"""One adapter per target type. Every target receives the run id (idempotency key), attempt (fencing
token), scheduled instant and correlation id: as payload fields for Lambda, SQS, EventBridge and Step
Functions, and as headers for HTTP.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol

import urllib3
from botocore.exceptions import BotoCoreError, ClientError

from jobsched.adapters.aws.batch_jobs import BatchJobs
from jobsched.adapters.aws.ecs_tasks import EcsTasks, RunCallbacks
from jobsched.adapters.aws.kubernetes_jobs import KubernetesJobs
from jobsched.adapters.aws.ownership import TeamSessions
from jobsched.core.run_records import RunContext, TargetResult
from jobsched.core.spec import (
    ApprovalTarget,
    BatchTarget,
    CallbackTarget,
    EcsTarget,
    EventBridgeTarget,
    HttpTarget,
    KubernetesTarget,
    LambdaTarget,
    SqsTarget,
    StepFunctionsTarget,
    header_value_allowed,
    parse_secret_ref,
)
from jobsched.core.urls import UrlRefused, parse_url
from jobsched.core.usage import TARGET_FUNCTION_REQUESTS, lambda_report_usage
from jobsched.tenancy.egress import AddressPolicy, EgressRefused, GuardedHttp
from jobsched.tenancy.ownership import NotOwned, OwnershipGuard, target_resources

log = logging.getLogger(__name__)

HTTP_RETRIES_WITHIN_ATTEMPT = 2  # quick retries of 5xx/connection errors before the attempt fails
MIN_REQUEST_SECONDS = 1.0  # a retry needs at least this much of the attempt's timeout left


def _not_allowed(refused: Exception) -> TargetResult:
    """The team may not use this resource or address: nothing was called, and retrying cannot help."""
    return TargetResult("failed", error=f"not allowed: {refused}", retryable=False)


def _client_error(error: ClientError) -> str:
    detail = error.response.get("Error", {})
    return f"{detail.get('Code', 'ClientError')}: {detail.get('Message', '')}"


# Error codes of AWS APIs that say the service is throttling us or is itself failing (their HTTP status is
# 429 or 5xx too, but not every SDK path keeps it): the target is unwell, whatever the job asked.
UNHEALTHY_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "ServiceException",
        "InternalFailure",
        "InternalServerError",
        "InternalError",
        "EC2ThrottledException",
        "ENILimitReachedException",
        "SubnetIPAddressLimitReachedException",
        "ResourceConflictException",  # the function is being updated: it cannot take calls now
    }
)
# What Lambda answers when the function ran out of time (the payload's errorType or errorMessage).
LAMBDA_TIMEOUT_MARKERS = ("Sandbox.Timedout", "Task timed out after")


def client_error_result(error: ClientError) -> TargetResult:
    """A failed call: retried unless the request itself cannot work; unhealthy when AWS throttled or failed."""
    code = error.response.get("Error", {}).get("Code", "ClientError")
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    retryable = code not in {"ResourceNotFoundException", "AccessDeniedException", "ValidationException"}
    unhealthy = code in UNHEALTHY_CODES or status >= 500 or status == 429
    return TargetResult("failed", error=_client_error(error), retryable=retryable, unhealthy=unhealthy)


def _payload(target_payload: Any, context: RunContext) -> Any:
    return context.payload_override if context.payload_override is not None else target_payload


class LambdaInvoker(Protocol):
    def __call__(self, function: str, payload: bytes, timeout: timedelta) -> tuple[bytes, str | None]:
        """Invoke synchronously; returns (response payload, function error or None)."""


class SecretResolver(Protocol):
    def __call__(self, reference: str, team: str, *, fresh: bool = False) -> str:
        """The secret's value, read as ``team`` (``fresh``: not from the cache: it was rotated)."""


class SessionSecretResolver:
    """secretsmanager:NAME[#key] or ssm:/name, read with the team's session (Powertools, cached 5 minutes)."""

    def __init__(self, sessions: TeamSessions) -> None:
        self.sessions = sessions

    def __call__(self, reference: str, team: str, *, fresh: bool = False) -> str:
        from aws_lambda_powertools.utilities.parameters import SecretsProvider, SSMProvider

        source, name, json_key = parse_secret_ref(reference)
        if source == "ssm":
            ssm = SSMProvider(boto3_client=self.sessions.client(team, "ssm"))
            return str(ssm.get(name, decrypt=True, max_age=300, force_fetch=fresh))
        secrets = SecretsProvider(boto3_client=self.sessions.client(team, "secretsmanager"))
        value = str(secrets.get(name, max_age=300, force_fetch=fresh))
        return str(json.loads(value)[json_key]) if json_key else value


class TargetExecutor:
    """Executes a job's target for one attempt. Never raises for target failures: returns a result.

    Every AWS resource is checked against the run's team before use (``guard``) and reached with the
    team's session (``sessions``); a resource the team may not use fails the run, not retried, with
    nothing called and no secret resolved.
    """

    def __init__(
        self,
        *,
        guard: OwnershipGuard,
        sessions: TeamSessions | None = None,
        lambda_invoker: LambdaInvoker | None = None,
        secret_resolver: SecretResolver | None = None,
        http: Any | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        callbacks: RunCallbacks | None = None,
        kubernetes_state_machine: str | None = None,
    ) -> None:
        self.guard = guard
        self.monotonic = monotonic
        self.sessions = sessions or TeamSessions(None)
        self.lambda_invoker = lambda_invoker
        self.secret_resolver = secret_resolver or SessionSecretResolver(self.sessions)
        self.http = http or GuardedHttp(AddressPolicy())
        self.sleep = sleep
        self.ecs = EcsTasks(self.sessions, callbacks)
        self.batch = BatchJobs(self.sessions, callbacks)
        self.kubernetes = KubernetesJobs(self.sessions, kubernetes_state_machine, callbacks=callbacks)

    def execute(self, target: Any, context: RunContext) -> TargetResult:
        try:
            for resource in target_resources(target):
                self.guard.check(resource, context.team)
        except NotOwned as refused:
            return _not_allowed(refused)
        except ClientError as error:
            return TargetResult("failed", error=f"cannot read the target's tags: {_client_error(error)}")
        adapters: dict[type, Callable[[Any, RunContext], TargetResult]] = {
            LambdaTarget: self._lambda,
            SqsTarget: self._sqs,
            StepFunctionsTarget: self._stepfunctions,
            EventBridgeTarget: self._eventbridge,
            HttpTarget: self._http,
            CallbackTarget: lambda _target, _context: TargetResult("pending", output="waiting for the callback"),
            ApprovalTarget: lambda _target, _context: TargetResult("pending", output="waiting for approval"),
            EcsTarget: self.ecs.start,
            BatchTarget: self.batch.start,
            KubernetesTarget: self.kubernetes.start,
        }
        adapter = adapters.get(type(target))
        if adapter is None:
            raise TypeError(f"unknown target {type(target).__name__}")
        try:
            return adapter(target, context)
        except ClientError as error:
            return client_error_result(error)
        except BotoCoreError as error:  # no answer: a refused or timed-out connection to the service
            return TargetResult("failed", error=f"{type(error).__name__}: {error}", unhealthy=True)
        except Exception as error:
            # Whatever else an adapter raises is still this run's failure, never the worker's: an escaped
            # exception would leave the run RUNNING with its slot held and send the message to the dead-letter
            # queue. Not retried: what raised here will raise again.
            log.exception("the %s adapter raised", type(target).__name__, extra={"job": context.job})
            return TargetResult("failed", error=f"target adapter error: {type(error).__name__}", retryable=False)

    def _lambda(self, target: LambdaTarget, context: RunContext) -> TargetResult:
        event = {"jobsched": context.envelope(), "payload": _payload(target.payload, context)}
        payload = json.dumps(event).encode()
        usage = {TARGET_FUNCTION_REQUESTS: 1.0}  # an invocation is billed whatever it answers
        if self.lambda_invoker is not None:
            body, function_error = self.lambda_invoker(target.function, payload, target.timeout)
        else:
            # The log tail's REPORT line says the billed duration and memory size: the team's cost of the attempt.
            response = self.sessions.client(
                context.team, "lambda", read_timeout=int(target.timeout.total_seconds()) + 5
            ).invoke(FunctionName=target.function, InvocationType="RequestResponse", LogType="Tail", Payload=payload)
            body, function_error = response["Payload"].read(), response.get("FunctionError")
            usage |= lambda_report_usage(base64.b64decode(response.get("LogResult") or "").decode(errors="replace"))
        text = body.decode(errors="replace")
        if function_error:
            # The function raised: the job's own error, unless Lambda stopped it for running out of time.
            timed_out = any(marker in text for marker in LAMBDA_TIMEOUT_MARKERS)
            return TargetResult("failed", error=f"{function_error}: {text}", unhealthy=timed_out, usage=usage)
        return TargetResult("succeeded", output=text, usage=usage)

    def _sqs(self, target: SqsTarget, context: RunContext) -> TargetResult:
        request: dict[str, Any] = {
            "QueueUrl": target.queue_url,
            "MessageBody": json.dumps({"jobsched": context.envelope(), "payload": _payload(target.payload, context)}),
            "MessageAttributes": {
                "run_id": {"DataType": "String", "StringValue": context.run_id},
                "correlation_id": {"DataType": "String", "StringValue": context.correlation_id},
            },
        }
        if target.queue_url.endswith(".fifo"):
            request["MessageGroupId"] = target.message_group_id or context.job
            request["MessageDeduplicationId"] = context.idempotency_key  # a repeated send is dropped
        response = self.sessions.client(context.team, "sqs").send_message(**request)
        return TargetResult("succeeded", output=f"message {response['MessageId']}")

    def _stepfunctions(self, target: StepFunctionsTarget, context: RunContext) -> TargetResult:
        states = self.sessions.client(context.team, "stepfunctions")
        name = context.idempotency_key[:80]  # a second start of the same run is refused by Step Functions
        try:
            response = states.start_execution(
                stateMachineArn=target.state_machine_arn,
                name=name,
                input=json.dumps({"jobsched": context.envelope(), "payload": _payload(target.payload, context)}),
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                raise
            # Adopted only if it is this run's own start (a redelivery), never someone else's execution.
            arn = target.state_machine_arn.replace(":stateMachine:", ":execution:", 1) + ":" + name
            started = json.loads(states.describe_execution(executionArn=arn).get("input") or "{}")
            if (
                isinstance(started, dict)
                and started.get("jobsched", {}).get("correlation_id") == context.correlation_id
            ):
                return TargetResult("succeeded", output=f"execution {arn} (already started for this run)")
            return TargetResult(
                "failed", error=f"an execution named {name} exists and is not this run's", retryable=False
            )
        return TargetResult("succeeded", output=f"execution {response['executionArn']}")

    def _eventbridge(self, target: EventBridgeTarget, context: RunContext) -> TargetResult:
        response = self.sessions.client(context.team, "events").put_events(
            Entries=[
                {
                    "Source": target.source,
                    "DetailType": target.detail_type,
                    "Detail": json.dumps(
                        {"jobsched": context.envelope(), "payload": _payload(target.payload, context)}
                    ),
                    "EventBusName": target.bus,
                }
            ]
        )
        if response.get("FailedEntryCount"):
            entry = response["Entries"][0]
            unhealthy = entry.get("ErrorCode") in UNHEALTHY_CODES
            return TargetResult(
                "failed", error=f"{entry.get('ErrorCode')}: {entry.get('ErrorMessage')}", unhealthy=unhealthy
            )
        return TargetResult("succeeded", output=f"event {response['Entries'][0].get('EventId')}")

    def http_policy_check(self, url: str) -> None:
        """Before any secret is resolved: the URL parses and its host may be reached (checked again when
        the connection is made, on the address actually used)."""
        if isinstance(self.http, GuardedHttp):
            self.http.resolve(parse_url(url))

    def _http(self, target: HttpTarget, context: RunContext) -> TargetResult:
        prepared = self._http_headers(target, context)
        if isinstance(prepared, TargetResult):
            return prepared
        result = self._http_send(target, context, prepared)
        if target.secret_headers and _auth_refused(result):
            # A rotated secret: the cached value (up to 5 minutes old) may be the old one. Read it again, once.
            fresh = self._http_headers(target, context, fresh=True)
            if isinstance(fresh, TargetResult):
                return fresh
            if fresh != prepared:
                return self._http_send(target, context, fresh)
        return result

    def _http_headers(
        self, target: HttpTarget, context: RunContext, *, fresh: bool = False
    ) -> dict[str, str] | TargetResult:
        """The request's headers, secrets resolved only after the URL passed the egress policy."""
        headers = {
            "Content-Type": "application/json",
            **target.headers,
            "Idempotency-Key": context.idempotency_key,
            "X-Jobsched-Run-Id": context.run_id,
            "X-Jobsched-Attempt": str(context.attempt),
            "X-Jobsched-Scheduled-At": context.scheduled_at,
            "X-Correlation-Id": context.correlation_id,
            # W3C Trace Context: the run's trace, this attempt's span (core.traces).
            "traceparent": context.trace.traceparent,
            "tracestate": context.trace.tracestate,
        }
        try:
            self.http_policy_check(target.url)
        except (UrlRefused, EgressRefused) as refused:
            return _not_allowed(refused)
        except urllib3.exceptions.HTTPError as error:
            return TargetResult("failed", error=f"connection error: {error}", unhealthy=True)
        try:
            secrets = {
                name: self.secret_resolver(ref, context.team, fresh=fresh)
                for name, ref in target.secret_headers.items()
            }
        except Exception as error:
            return TargetResult("failed", error=f"cannot resolve a secret header: {type(error).__name__}")
        for name, value in secrets.items():
            if not header_value_allowed(value):  # the value itself is never quoted: it is a secret
                return TargetResult(
                    "failed",
                    error=f"the secret for header {name} is not one line of Latin-1 text (CR, LF, NUL...)",
                    retryable=False,
                )
        return headers | secrets

    def _http_send(self, target: HttpTarget, context: RunContext, headers: dict[str, str]) -> TargetResult:
        """The request, with quick retries of connection errors and 5xx within the attempt's timeout."""
        payload = _payload(target.payload, context)
        body = None if target.method == "GET" else json.dumps(payload).encode()
        # The timeout bounds the whole attempt, quick retries included: the worker (15 minutes) must outlive it.
        deadline = self.monotonic() + target.timeout.total_seconds()
        last_error = ""
        for attempt in range(HTTP_RETRIES_WITHIN_ATTEMPT + 1):
            if attempt:
                pause = min(2.0**attempt, 5.0)
                if deadline - self.monotonic() <= pause + MIN_REQUEST_SECONDS:
                    break  # no time left for another try within this attempt
                self.sleep(pause)
            seconds = deadline - self.monotonic()
            try:
                response = self.http.request(
                    target.method,
                    target.url,
                    body=body,
                    headers=headers,
                    timeout=urllib3.Timeout(total=seconds),
                    retries=False,
                    redirect=False,
                )
            except (UrlRefused, EgressRefused) as refused:
                return _not_allowed(refused)
            except urllib3.exceptions.HTTPError as error:
                last_error = f"connection error: {type(error).__name__}"
                continue
            text = response.data.decode(errors="replace")
            if 200 <= response.status < 300:
                return TargetResult("succeeded", output=f"HTTP {response.status}: {text}", body=text)
            last_error = f"HTTP {response.status}: {text}"
            if response.status < 500 and response.status != 429:
                return TargetResult("failed", error=last_error, retryable=False)  # the request itself is wrong
        # Connection errors, 5xx and 429 on every try within the attempt: the origin is unwell.
        return TargetResult("failed", error=last_error, unhealthy=True)


def _auth_refused(result: TargetResult) -> bool:
    """The origin refused the request's credentials (HTTP 401 or 403)."""
    return result.outcome == "failed" and (result.error or "").startswith(("HTTP 401", "HTTP 403"))
