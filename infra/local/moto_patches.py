"""Patches to moto for the tests and the local runtime; never in AWS.

- Where moto's Step Functions interpreter differs from AWS in a way DAG runs depend on, made to match.
  AWS issues a new task token for every attempt of a ``waitForTaskToken`` state, so a report to an old
  attempt's token cannot complete the retry. moto 5.2 keeps one token across Retry attempts, and the
  outcome reported for attempt 1 immediately completes attempt 2 as well. This gives each retry attempt a
  fresh token, as AWS does.
- Speed, for the local runtime's moto server (profiled with py-spy under 60 runs a minute): moto finds
  the backend of every request by matching its host against every service's URL patterns, one regex
  after another, under a lock; that was half of the server's CPU. The answer depends on the host alone,
  so it is remembered per host. Then SQS: every SendMessage computes the queue's attributes, which asks
  every message in the queue (runs sent ahead included) whether it is visible and delayed, each by
  converting "now" through naive datetimes; the clock is read with ``time.time()`` instead (the same
  value, without the conversions). And a long poll woke only when a message was sent, not when a delayed
  one became visible, so runs due at :00 were received up to a second late; it now looks every 0.1 s.
- Deep queues (a storm of events, a catch-up backlog): moto's ReceiveMessage asked every message of the
  queue whether it was visible before taking the first ten and computed every queue attribute (three of
  them walk the queue) for each message it took, SendMessage computed them all for each message sent, and
  DeleteMessage walked the whole queue twice: 10,000 events drained at a few a second with the server at
  100% CPU. Visible messages are now looked at lazily, a delete stops at its message, and a send or a
  receive reads only the attribute it needs (``deep_sqs_queues``, ``sqs_sends_read_one_attribute``). And
  PutEvents compiled each input path of a rule's transformer for every event (``compiled_input_paths``).
- A race in moto's SQS that AWS does not have: DeleteMessage rebuilds the queue's message list without
  the lock SendMessage appends under, so a message sent during a delete could vanish. Seen locally as
  runs never started (no record, nothing on the queue) once the dispatcher sent in parallel while
  workers deleted; DeleteMessage now takes the lock. Likewise moto's DynamoDB checks a condition and writes
  without a lock, so the server takes one per DynamoDB call (DynamoDB applies each write atomically).
- Speed, for the test suite and the local runtime: moto 5.2 writes each DynamoDB response by walking the
  operation's output shape member by member, asking a chain of alias providers for every attribute of every
  item (half the time of a DynamoDB call under cProfile, 20% of the 8-dispatcher race's wall time). The
  item operations' results are already in wire form (attribute-value maps), so they are written as JSON
  directly, keeping the members the API's output shape has; anything unusual (an error, a timestamp,
  another operation) takes moto's own path. With JOBSCHED_MOTO_CHECK_RESPONSES=1 every response is written
  both ways and any difference fails the call: the whole unit, contract and aws suite passed so (after
  DeleteItem's extra ConsumedCapacityUnits was dropped), and tests/unit/test_moto_patches.py runs each
  operation that way on every run.
- A bucket's notification configuration is answered with its ``EventBridgeConfiguration``, as AWS answers it
  (``bucket_notifications_name_eventbridge``).
- Subnets and security groups created with the tag ``jobsched-local-id`` get it as their id, so the example job
  files name the local network as written (``ec2_ids_from_tags``).
- EventBridge delivery as AWS does it: ``infra.local.moto_events``.
"""

from __future__ import annotations

import base64
import contextvars
import functools
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from infra.local.moto_events import eventbridge_as_aws

__all__ = ["eventbridge_as_aws"]  # with the patches below, for the tests and the local server

_applied = False


def fresh_task_token_per_attempt() -> None:
    global _applied
    if _applied:
        return
    from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import ResourceCondition
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (
        StateTaskServiceCallback,
    )

    original = ExecutionState._evaluate_with_timeout

    @functools.wraps(original)
    def evaluate(self: Any, env: Any) -> None:
        context = env.states.context_object.context_object_data
        waits_for_token = (
            isinstance(self, StateTaskServiceCallback)
            and getattr(self.resource, "condition", None) == ResourceCondition.WaitForTaskToken
        )
        if waits_for_token and context.get("State", {}).get("RetryCount", 0) > 0:
            env.callback_pool_manager.add(env.states.context_object.update_task_token())
        original(self, env)

    ExecutionState._evaluate_with_timeout = evaluate  # type: ignore[method-assign]
    _applied = True


def backend_lookup_per_host() -> None:
    """Remember moto's host -> backend answer (a linear scan of every service's URL regexes)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    original = DomainDispatcherApplication.get_backend_for_host
    if getattr(original, "_remembered", False):
        return
    found: dict[str | None, Any] = {}

    @functools.wraps(original)
    def lookup(self: Any, host: str | None) -> Any:
        if host not in found:
            backend = original(self, host)
            if backend is None:
                return None  # not remembered: moto goes on to infer the service another way
            found[host] = backend
        return found[host]

    lookup._remembered = True  # type: ignore[attr-defined]
    DomainDispatcherApplication.get_backend_for_host = lookup  # type: ignore[method-assign]


def fast_sqs_clock() -> None:
    """moto's SQS reads "now" in milliseconds per message per request; read it directly."""
    import time

    from moto.sqs import models

    original = getattr(models, "unix_time_millis")  # noqa: B009 (not exported: mypy checks exports)

    def unix_time_millis(dt: Any = None) -> float:
        return time.time() * 1000.0 if dt is None else float(original(dt))

    setattr(models, "unix_time_millis", unix_time_millis)  # noqa: B010


def prompt_long_polls() -> None:
    """A long-polling ReceiveMessage notices delayed messages becoming visible within 0.1 s."""
    import time

    from moto.sqs.models import Queue

    def wait_for_messages(self: Any, timeout: int) -> None:
        deadline = time.monotonic() + timeout
        with self._messages_lock:
            while not self.messages and (left := deadline - time.monotonic()) > 0:
                self._messages_lock.wait(min(left, 0.1))

    Queue.wait_for_messages = wait_for_messages  # type: ignore[method-assign]


def atomic_sqs_delete() -> None:
    """moto's Queue.delete_message under the queue's lock, as add_message already is."""
    from moto.sqs.models import Queue

    original = Queue.delete_message
    if getattr(original, "_locked", False):
        return

    @functools.wraps(original)
    def delete_message(self: Any, receipt_handle: str) -> None:
        with self._messages_lock:
            original(self, receipt_handle)

    delete_message._locked = True  # type: ignore[attr-defined]
    Queue.delete_message = delete_message  # type: ignore[method-assign]


def atomic_dynamodb_calls() -> None:
    """One DynamoDB call at a time in moto's threaded server, as DynamoDB applies each write atomically.

    moto's update_item reads the item, applies the expression and checks the condition with no lock, so two
    conditional writes racing on one item could both succeed (two claims of one DAG task, say). AWS never
    lets that happen; the tests' in-process races take a lock per call for the same reason."""

    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.call_action
    if getattr(original, "_atomic", False):
        return
    lock = threading.Lock()

    @functools.wraps(original)
    def call_action(self: Any) -> Any:
        with lock:
            return original(self)

    call_action._atomic = True  # type: ignore[attr-defined]
    DynamoHandler.call_action = call_action  # type: ignore[method-assign]


# DynamoDB operations whose results hold only strings, numbers, booleans, lists, maps and bytes.
DIRECT_JSON_OPERATIONS = frozenset(
    {
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "Query",
        "Scan",
        "BatchGetItem",
        "BatchWriteItem",
        "TransactGetItems",
        "TransactWriteItems",
    }
)
CHECK_RESPONSES_ENV = "JOBSCHED_MOTO_CHECK_RESPONSES"


class _NotPlain(Exception):
    """A value the direct path does not write (a timestamp, say): moto's own serializer does."""


def _wire(value: Any) -> Any:
    """A result in DynamoDB's JSON wire form: members that are None are left out, bytes are base64."""
    if isinstance(value, dict):
        return {key: _wire(item) for key, item in value.items() if item is not None}
    if isinstance(value, list | tuple):
        return [_wire(item) for item in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, str | bool | int | float):
        return value
    raise _NotPlain(type(value).__name__)


def direct_dynamodb_responses() -> None:
    """DynamoDB item operations' responses written as JSON directly instead of by moto's shape walk."""
    from moto.core.responses import ActionResult

    original = ActionResult.execute_result
    if getattr(original, "_direct", False):
        return

    @functools.wraps(original)
    def execute_result(self: ActionResult, context: Any) -> Any:
        result = self.result
        if (
            not isinstance(result, dict)
            or context.service_model.service_name != "dynamodb"
            or context.operation_model.name not in DIRECT_JSON_OPERATIONS
        ):
            return original(self, context)
        members = context.operation_model.output_shape.members  # moto adds a few the API does not have
        try:
            body = json.dumps(_wire({k: v for k, v in result.items() if k in members}), separators=(",", ":"))
        except _NotPlain:
            return original(self, context)
        serializer = context.serializer_class(operation_model=context.operation_model)
        headers = {"Content-Type": serializer._get_protocol_specific_content_type()}
        status = context.operation_model.http.get("responseCode", serializer.DEFAULT_RESPONSE_CODE)
        if os.environ.get(CHECK_RESPONSES_ENV) == "1":
            moto_status, moto_headers, moto_body = original(self, context)
            assert (moto_status, moto_headers) == (status, headers), (moto_status, moto_headers, status, headers)
            assert json.loads(moto_body) == json.loads(body), (context.operation_model.name, moto_body, body)
        return status, headers, body

    execute_result._direct = True  # type: ignore[attr-defined]
    ActionResult.execute_result = execute_result  # type: ignore[method-assign]


class _VisibleMessages:
    """A queue's visible messages, looked at lazily: ReceiveMessage stops at the messages it takes and a long
    poll at the first visible one, instead of asking every message of a deep queue whether it is visible."""

    def __init__(self, messages: tuple[Any, ...]) -> None:
        self._messages = messages

    def __iter__(self) -> Iterator[Any]:
        return (message for message in self._messages if message.visible and not message.delayed)

    def __bool__(self) -> bool:
        return any(True for _ in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


_sending_to: contextvars.ContextVar[Any] = contextvars.ContextVar("sending_to", default=None)


def deep_sqs_queues() -> None:
    """ReceiveMessage and DeleteMessage in time that grows with where the message is, not with the queue."""
    from moto.sqs.exceptions import ReceiptHandleIsInvalid
    from moto.sqs.models import Queue, SQSBackend

    if getattr(Queue, "_deep_queues", False):
        return

    def messages(self: Any) -> _VisibleMessages:
        return _VisibleMessages(tuple(self._messages))

    def delete_message(self: Any, receipt_handle: str) -> None:
        with self._messages_lock:  # as atomic_sqs_delete: a send meanwhile is not lost
            if receipt_handle in self.deleted_messages:
                return  # deleting again succeeds, as in moto and AWS
            for index, message in enumerate(self._messages):
                if message.had_receipt_handle(receipt_handle):
                    self.pending_messages.discard(message)
                    self.deleted_messages.update(message.all_receipt_handles)
                    del self._messages[index]
                    return
            raise ReceiptHandleIsInvalid()

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        # The queue's retention alone (moto computed every attribute, three of them walking the whole queue,
        # for each message received).
        retention = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention + message.sent_timestamp / 1000 > time.time())

    Queue.messages = property(messages)  # type: ignore[method-assign,assignment]
    Queue.delete_message = delete_message  # type: ignore[method-assign]
    SQSBackend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period  # type: ignore[method-assign]
    Queue._deep_queues = True  # type: ignore[attr-defined]


def sqs_sends_read_one_attribute() -> None:
    """SendMessage reads one attribute of the queue (ContentBasedDeduplication): only that is computed."""
    from moto.sqs.models import Queue, SQSBackend

    if getattr(SQSBackend.send_message, "_one_attribute", False):
        return
    all_attributes = Queue.attributes.fget  # type: ignore[attr-defined]
    original_send = SQSBackend.send_message

    def attributes(self: Any) -> dict[str, Any]:
        if _sending_to.get() is self:  # SendMessage reads only this of them (booleans as moto gives them)
            if not self.fifo_queue:
                return {}
            found = self.content_based_deduplication
            return {"ContentBasedDeduplication": str(found).lower() if isinstance(found, bool) else found}
        return dict[str, Any](all_attributes(self))

    def send_message(self: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
        sending = _sending_to.set(self.get_queue(queue_name))
        try:
            return original_send(self, queue_name, *args, **kwargs)
        finally:
            _sending_to.reset(sending)

    send_message._one_attribute = True  # type: ignore[attr-defined]
    Queue.attributes = property(attributes)  # type: ignore[method-assign,assignment]
    SQSBackend.send_message = send_message  # type: ignore[method-assign]


def ecs_awsvpc_tasks() -> None:
    """RunTask of an awsvpc task (every Fargate task) read its network interface's ``private_dns_name``, which
    moto's NetworkInterface does not have: RunTask answered 500. AWS names it after the private address."""
    from moto.ec2.models.elastic_network_interfaces import NetworkInterface

    if not hasattr(NetworkInterface, "private_dns_name"):

        def private_dns_name(self: Any) -> str:
            return f"ip-{str(self.private_ip_address).replace('.', '-')}.ec2.internal"

        NetworkInterface.private_dns_name = property(private_dns_name)  # type: ignore[assignment]


def ecs_tasks_run_until_stopped() -> None:
    """moto moves a task a step towards STOPPED each time it is described (RUNNING, DEACTIVATING, STOPPING,
    DEPROVISIONING, STOPPED), so a task described a few times looked stopped while it ran. An ECS task runs until
    it exits or StopTask stops it: the states advance only after a billion descriptions here."""
    from moto.moto_api import state_manager

    state_manager.set_transition(model_name="ecs::task", transition={"progression": "manual", "times": 10**9})


def batch_jobs_run_until_stopped() -> None:
    """moto runs a Batch job in Docker, or (without Docker) marks it SUCCEEDED the moment it is submitted. Here a
    submitted job is RUNNING until it is terminated (then FAILED with the reason, as AWS ends a running job), so
    what ends a run is its Batch Job State Change, as in AWS: the tests and the local agent send it."""
    from datetime import datetime

    from moto.batch.models import Job
    from moto.batch_simple.models import BatchSimpleBackend
    from moto.core.config import default_user_config

    default_user_config["batch"] = {"use_docker": False}
    if getattr(BatchSimpleBackend._mark_job_as_finished, "_runs", False):
        return

    def started(self: Any, include_start_attempt: bool, job: Any) -> None:
        self.backend._jobs[job.job_id] = job
        job.job_started_at = datetime.now()  # noqa: DTZ005 (moto keeps naive local times)
        job.log_stream_name = job._stream_name
        if include_start_attempt:
            job._start_attempt()
        job.status = "RUNNING"

    def terminate(self: Any, reason: str) -> None:
        if not self.job_stopped:
            self.job_stopped_reason = reason
            self._mark_stopped(success=False)

    started._runs = True  # type: ignore[attr-defined]
    BatchSimpleBackend._mark_job_as_finished = started  # type: ignore[method-assign]
    Job.terminate = terminate  # type: ignore[method-assign]


LOCAL_ID_TAG = "jobsched-local-id"  # a subnet or security group created with this tag gets it as its id


def ec2_ids_from_tags() -> None:
    """Subnets and security groups get random ids in moto, as in AWS; an example job file must name them before
    they exist (``examples/containers/*.yaml`` name ``subnet-0123456789abcdef0``). The local stack creates its
    example network with those ids (tag ``jobsched-local-id``), so the example files apply as written."""
    import threading

    from moto.ec2.models import security_groups, subnets

    if getattr(subnets.SubnetBackend.create_subnet, "_ids_from_tags", False):
        return
    pending = threading.local()

    def chosen(make: Any) -> Any:
        return lambda: getattr(pending, "id", None) or make()

    subnets.random_subnet_id = chosen(subnets.random_subnet_id)  # type: ignore[attr-defined]
    security_groups.random_security_group_id = chosen(security_groups.random_security_group_id)  # type: ignore[attr-defined]

    def taking_id(create: Any, kind: str) -> Any:
        def wrapper(self: Any, *args: Any, tags: Any = None, **kwargs: Any) -> Any:
            # A subnet's tags come by resource type ({"subnet": {...}}), a group's flat ({...}).
            named = tags.get(kind) if isinstance(tags, dict) and isinstance(tags.get(kind), dict) else tags
            pending.id = named.get(LOCAL_ID_TAG) if isinstance(named, dict) else None
            try:
                return create(self, *args, tags=tags, **kwargs)
            finally:
                pending.id = None

        wrapper._ids_from_tags = True  # type: ignore[attr-defined]
        return wrapper

    subnets.SubnetBackend.create_subnet = taking_id(subnets.SubnetBackend.create_subnet, "subnet")  # type: ignore[method-assign]
    groups = security_groups.SecurityGroupBackend
    groups.create_security_group = taking_id(groups.create_security_group, "security-group")  # type: ignore[method-assign]


S3_XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"


def bucket_notifications_name_eventbridge() -> None:
    """moto stores a bucket's ``EventBridgeConfiguration`` (and sends its events) but GetBucketNotificationConfiguration
    leaves it out of the answer; AWS returns it (``{"EventBridgeConfiguration": {}}``), which is how a PUT tells a
    bucket that sends its events from one that does not."""
    from moto.s3.responses import S3Response

    if getattr(S3Response.get_bucket_notification, "_names_eventbridge", False):
        return
    original = S3Response.get_bucket_notification

    def get_bucket_notification(self: Any) -> Any:
        answer = original(self)
        config = self.backend.get_bucket_notification_configuration(self.bucket_name)
        if config is None or getattr(config, "event_bridge", None) is None:
            return answer
        status, headers, body = answer
        text = body.decode() if isinstance(body, bytes) else str(body)
        if "<EventBridgeConfiguration" in text:
            return answer
        if "</NotificationConfiguration>" in text:
            text = text.replace(
                "</NotificationConfiguration>", "<EventBridgeConfiguration/></NotificationConfiguration>"
            )
        else:
            text = '<NotificationConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><EventBridgeConfiguration/></NotificationConfiguration>'
        return status, headers, text.encode()

    get_bucket_notification._names_eventbridge = True  # type: ignore[attr-defined]
    S3Response.get_bucket_notification = get_bucket_notification  # type: ignore[method-assign]


def compiled_input_paths() -> None:
    """An input transformer's paths compiled once, not for every event delivered."""
    import jsonpath_ng.ext as jsonpath

    parse = getattr(jsonpath, "parse")  # noqa: B009 (not exported: mypy checks exports)
    if not hasattr(parse, "cache_info"):
        setattr(jsonpath, "parse", functools.lru_cache(maxsize=1024)(parse))  # noqa: B010


def serve() -> None:
    """``python -m infra.local.moto_patches -H HOST -p PORT``: moto's server with the patches applied."""
    fresh_task_token_per_attempt()
    backend_lookup_per_host()
    fast_sqs_clock()
    prompt_long_polls()
    atomic_sqs_delete()
    deep_sqs_queues()
    sqs_sends_read_one_attribute()
    compiled_input_paths()
    bucket_notifications_name_eventbridge()
    ec2_ids_from_tags()
    ecs_awsvpc_tasks()
    ecs_tasks_run_until_stopped()
    batch_jobs_run_until_stopped()
    direct_dynamodb_responses()
    atomic_dynamodb_calls()
    eventbridge_as_aws()
    from moto.server import main

    main(sys.argv[1:])


if __name__ == "__main__":
    serve()
