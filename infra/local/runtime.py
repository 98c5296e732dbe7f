"""The whole scheduler on a laptop: moto for AWS, the real handlers driven the way AWS drives them.

- EventBridge rules -> the dispatcher handler on its schedule (``tick`` can shorten it for demos, tests).
- SQS event source mappings -> pollers per queue with the mapping's batch size and MaximumConcurrency.
  They report batch item failures, delete what succeeded and leave the rest to SQS (and its DLQ redrive).
- API Gateway -> the local gateway on 127.0.0.1 (identity: ``principal``, or X-Jobsched-Principal).
- Lambda Invoke of the stack's functions (the examples) -> their handlers in-process; unknown ones fail
  clearly.
- Escalations -> printed and kept (``jobsched local escalations``).
Handler environment variables come from the deployed Lambda configurations: no second definition.

State survives a crash: the tables are snapshot to ``<state-dir>/tables.json`` within a second of any
write (atomically: a ``kill -9`` leaves the previous snapshot or the new one). Queue contents live in the
moto process and are lost with it, so a start on a saved state rebuilds them from the tables
(``jobsched.pipeline.recovery``): nothing dispatched ahead or in flight is forgotten.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from infra.iam.recording import CALLER, acting_as, recorded_invoke
from infra.local.alarms import LocalAlarms
from infra.local.console import LocalConsole
from infra.local.containers import team_network
from infra.local.deploy import ACCOUNT, REGION, ROOT, Deployment, deploy, synthesize_cached
from infra.local.logs import CapturedLogs
from infra.local.statefiles import write_atomically
from jobsched.core.names import OWNER_TAG, Env
from jobsched.warm import use_function_scope
from jobsched.watch import signals

log = logging.getLogger("jobsched.local")

DEFAULT_ADMIN = f"arn:aws:iam::{ACCOUNT}:role/platform-admin"
TEAM_PATTERN = f"arn:aws:iam::{ACCOUNT}:role/team-{{team}}"
# Who may act for which team on a laptop: the platform admin, a role per team, the grants the examples need.
LOCAL_MEMBERSHIP = {
    "admins": [DEFAULT_ADMIN],
    "team_patterns": [TEAM_PATTERN],
    "event_sources": {"examples": ["com.acme.orders"]},  # examples/events/orders-ready.yaml listens to it
    "priorities": {"payments": ["high", "normal", "low"]},  # examples/jobs/ledger-sync.yaml runs as high
}
LOCAL_FAILED_RECORD_RETRY = 5  # seconds before a failed record is offered again (AWS: the visibility timeout)
LOCAL_RECEIVERS = 3  # ReceiveMessage loops per queue
SNAPSHOT_EVERY = 1.0  # seconds: at most this much of the tables' writes is lost to a kill -9
RUNTIME_FILE = "runtime.json"  # the API's URL and moto's endpoint, for `jobsched local put-event` and the like
EXAMPLE_SUBNET, EXAMPLE_SECURITY_GROUP = "subnet-0123456789abcdef0", "sg-0123456789abcdef0"
EXAMPLE_BUCKET = "examples-landing"  # team examples' bucket, sending its events to EventBridge
EVENT_EXAMPLES = (
    "examples/events/orders-ready.yaml",
    "examples/events/landing-exports.yaml",
    "examples/events/landing-batches.yaml",
)
# The domain reference's nightly DAG that waits for its file, registered with a short window: every 5 minutes,
# its first task waiting 3 minutes for the day's _SUCCESS marker (the file itself says 03:00 and 2 hours).
WAIT_EXAMPLE = "examples/jobs/nightly-waits-for-file.yaml"
WAIT_EXAMPLE_SHORT = {"schedule": "*/5 * * * *", "timeout": "3m"}
# The pipeline with checks, data between tasks, a map and an approval: run with `jobsched trigger`, then approve.
PIPELINE_EXAMPLE = "examples/jobs/cost-cleanup.yaml"
EXAMPLE_INVENTORY, EXAMPLE_INVENTORY_ROWS = "inventory/snapshots.csv", 25  # its distributed map's object
# Container jobs (ECS): their files name placeholder subnets; make run gives them its own VPC's (moto checks them).
CONTAINER_EXAMPLES = tuple(
    f"examples/containers/{name}.yaml"
    for name in ("nightly-export", "failing-export", "slow-export", "resumable-export")
)
# Batch jobs: team examples' own job queue and job definition (make run creates them).
BATCH_EXAMPLES = ("examples/containers/reindex-shards.yaml", "examples/containers/failing-reindex.yaml")
EXAMPLE_JOB_QUEUE, EXAMPLE_JOB_DEFINITION = "examples-batch", "examples-reindex"
EXAMPLE_CLUSTER, EXAMPLE_TASK_DEFINITION = "examples-local", "examples-export"
EXAMPLE_LOG_GROUP = "/examples/containers"  # their awslogs group (tagged for team examples): `jobsched logs` reads it
TABLE_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})


@dataclass
class LocalContext:
    """Enough of a Lambda context for Powertools."""

    function_name: str
    memory_limit_in_mb: int = 256
    aws_request_id: str = ""
    invoked_function_arn: str = ""

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def put_example_inventory(s3: Any) -> None:
    """The snapshot inventory the example pipeline's distributed map runs over, in team examples' bucket (outside
    the event examples' prefixes, so writing it starts nothing)."""
    rows = "".join(f"snap-{n:04d},{111111111111 * (1 + n % 3)}\n" for n in range(EXAMPLE_INVENTORY_ROWS))
    s3.put_object(Bucket=EXAMPLE_BUCKET, Key=EXAMPLE_INVENTORY, Body=f"snapshot,account\n{rows}".encode())


class LocalRuntime:
    def __init__(
        self,
        *,
        port: int = 8080,
        tick_seconds: float | None = None,
        principal: str = DEFAULT_ADMIN,
        examples: bool = True,
        state_dir: Path | None = None,
        moto_port: int | None = None,
        alarm_time_scale: float | None = None,
    ) -> None:
        self.port = port
        self.tick_override = tick_seconds
        self.principal = principal
        self.examples = examples
        self.logs = CapturedLogs()  # the handlers' lines, for `jobsched logs`
        self.state_dir = state_dir or Path(tempfile.mkdtemp(prefix="jobsched-local-"))
        self.moto_port = moto_port or free_port()
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.escalations: list[dict[str, Any]] = []
        self.deployment: Deployment | None = None
        self.template: dict[str, Any] = {}  # what was deployed (the permissions are evaluated against it)
        self._handlers: dict[str, Callable[..., Any]] = {}
        self._invocations: dict[str, deque[dict[str, Any]]] = {}
        # Alarm periods shrink with the tick: a 1 s tick runs the clock 60x, so a 5-minute period lasts 5 s.
        self.alarm_time_scale = alarm_time_scale or (60.0 / tick_seconds if tick_seconds else 1.0)
        self.alarms: LocalAlarms | None = None
        self.paused_rules: set[str] = set()  # functions whose schedule rule is disabled (pause_rule)
        self.paused_sources: set[str] = set()  # functions whose queue is not polled (pause_source)
        self._tables_changed = threading.Event()
        self._dirty_lock = threading.Lock()
        self._dirty: dict[str, dict[str, dict[str, Any]]] = {}  # table -> key (JSON) -> key attributes
        self._saved_items: dict[str, dict[str, Any]] = {}  # env variable of a table -> key (JSON) -> item
        self._key_attributes: dict[str, tuple[str, str]] = {}  # table name -> (partition, sort) attribute

    # ------------------------------------------------------------------------------ life

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.moto_port}"

    def start(self) -> LocalRuntime:
        os.environ.update(
            {
                "AWS_ACCESS_KEY_ID": "local",
                "AWS_SECRET_ACCESS_KEY": "local",
                "AWS_DEFAULT_REGION": REGION,
                "AWS_REGION": REGION,
                "MOTO_PORT": str(self.moto_port),  # moto's Step Functions interpreter calls back here
                "POWERTOOLS_TRACE_DISABLED": "true",
            }
        )
        # moto in its own process: AWS emulation gets its own core instead of sharing the handlers' GIL.
        # With the interpreter fix DAG runs depend on (infra/local/moto_patches.py).
        self.server = subprocess.Popen(
            [sys.executable, "-m", "infra.local.moto_patches", "-H", "127.0.0.1", "-p", str(self.moto_port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "MOTO_PORT": str(self.moto_port)},
        )
        _wait_for_port(self.moto_port, self.server)
        # DAG jobs run for real: moto's Step Functions interpreter executes the compiled state machines.
        urllib.request.urlopen(
            urllib.request.Request(
                f"{self.endpoint}/moto-api/config",
                data=json.dumps({"stepfunctions": {"execute_state_machine": True}}).encode(),
                method="POST",
            ),
            timeout=10,
        ).close()
        log.info("moto server on %s", self.endpoint)
        # Where `jobsched local put-event` and `put-object` find this stack's AWS.
        (self.state_dir / RUNTIME_FILE).write_text(json.dumps({"api": self.api_url, "aws_endpoint": self.endpoint}))
        began = time.monotonic()
        template, reused = synthesize_cached(self.state_dir, examples=self.examples)
        if reused:
            log.info("template reused from %s (nothing it depends on changed)", self.state_dir)
        self.template = template
        self.deployment = deploy(self.endpoint, template)
        for note in self.deployment.adaptations:
            log.info("adapted for moto: %s", note)
        log.info("stack deployed into moto in %.1f s", time.monotonic() - began)
        self._configure_handlers()
        self._start_alarms(template)
        self._restore_state()
        self._start_snapshots()
        self._start_gateway()
        self._start_ticks()
        self._start_pollers()
        self._start_escalation_watch()
        self._start_container_agent()
        if self.examples:
            self._register_examples()
            self._start_callback_worker()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self.alarms is not None:
            signals.remove_sink(self.alarms.metric)
        for thread in self.threads:
            thread.join(timeout=5)
        if hasattr(self, "gateway"):
            self.gateway.stop()
        self._save_state()
        if hasattr(self, "server"):
            self.server.terminate()
            try:
                self.server.wait(timeout=10)
            except subprocess.TimeoutExpired:  # busy threads can outlive SIGTERM
                self.server.kill()
                self.server.wait(timeout=10)

    # -------------------------------------------------------------------------- handlers

    def _configure_handlers(self) -> None:
        """Environment from the deployed functions; AWS calls go to moto; Lambda targets run here."""
        from functions import forget_services
        from jobsched import wiring
        from jobsched.adapters.aws.clients import reset_clients
        from jobsched.core.names import Env

        assert self.deployment is not None
        for function in self.deployment.functions.values():
            if function["handler"].startswith("functions."):
                os.environ.update(function["environment"])
        os.environ[Env.AWS_ENDPOINT] = self.endpoint
        os.environ[Env.API_URL] = self.api_url  # links in pages point at the local API
        os.environ[Env.CONSOLE_URL] = f"{self.api_url}/console"  # and at the run's page, for a person
        import boto3

        # As in AWS: who may act for which team lives in the deployment's parameter, the callback-signing key in its
        # secret (moto's CloudFormation lacks secrets: created here under the same name, its ARN the one IAM sees).
        boto3.client("ssm", endpoint_url=self.endpoint).put_parameter(
            Name=os.environ[Env.MEMBERSHIP_PARAMETER], Value=json.dumps(LOCAL_MEMBERSHIP), Type="String", Overwrite=True
        )
        os.environ.pop(Env.MEMBERSHIP, None)
        os.environ.pop(Env.CALLBACK_SECRET, None)
        secrets_manager = boto3.client("secretsmanager", endpoint_url=self.endpoint)
        for logical, name in self.deployment.secrets.items():
            created = secrets_manager.create_secret(Name=name, SecretString=secrets.token_urlsafe(32))
            self.deployment.physical[logical] = created["ARN"]
        reset_clients()
        forget_services()  # built once per process, like a warm Lambda: build them for this stack
        wiring.use_lambda_invoker(self.invoke)
        use_function_scope(CALLER.get)  # each function keeps its own warm services, as its own process would
        for function in self.deployment.functions.values():  # their loggers exist once they are imported
            if function["handler"].startswith("functions."):
                self.handler(function["handler"])
        self.logs.detach()
        self.logs.attach()
        wiring.use_run_logs(self.logs)

    def handler(self, path: str) -> Callable[..., Any]:
        if path not in self._handlers:
            module, _, attribute = path.rpartition(".")
            self._handlers[path] = getattr(importlib.import_module(module), attribute)
        return self._handlers[path]

    def invoke(self, function: str, payload: bytes, timeout: timedelta) -> tuple[bytes, str | None]:
        """Lambda Invoke of a function deployed in the stack, run in-process."""
        assert self.deployment is not None
        name = function.rsplit(":", 1)[-1] if function.startswith("arn:") else function
        deployed = self.deployment.functions.get(name)
        if deployed is None:
            message = f"Function not found: {name} (the local runtime runs the functions of its own stack)"
            return json.dumps({"errorType": "ResourceNotFoundException", "errorMessage": message}).encode(), "Unhandled"
        event = json.loads(payload)
        self._invocations.setdefault(name, deque(maxlen=200_000)).append(event)
        if isinstance(event.get("jobsched"), dict):  # a run's Invoke, made as its team's session in AWS
            recorded_invoke(event["jobsched"].get("team", ""), self.lambda_arn(name))
        try:
            with acting_as(name):
                result = self.handler(deployed["handler"])(event, LocalContext(name))
        except Exception as error:
            return json.dumps({"errorType": type(error).__name__, "errorMessage": str(error)}).encode(), "Unhandled"
        return json.dumps(result).encode(), None

    def lambda_arn(self, name: str) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"

    def invocations(self, function: str) -> list[dict[str, Any]]:
        """The events a stack function was invoked with (for benchmarks and tests)."""
        return list(self._invocations.get(function, ()))

    # ------------------------------------------------------------------------- drivers

    def _start_gateway(self) -> None:
        from functions.api import handler as api
        from infra.local.gateway import LocalGateway

        assert self.deployment is not None
        name = next(n for n, f in self.deployment.functions.items() if f["handler"] == "functions.api.handler.handler")

        def handle(event: dict[str, Any], context: Any) -> Any:
            with acting_as(name):
                return api.handler(event, context)

        self.gateway = LocalGateway(
            handle,
            port=self.port,
            principal=self.principal,
            context=LocalContext(name),
            on_response=self.alarms.api_response if self.alarms is not None else None,
            console=LocalConsole(lambda: datetime.now(UTC)),
        ).start()

    def _loop(self, name: str, period: float, action: Callable[[], object], *, aligned: bool = False) -> None:
        """Run ``action`` every ``period`` seconds; ``aligned``: on wall-clock multiples of it, as EventBridge
        fires rate(1 minute) near the top of each minute rather than at the runtime's start phase."""

        def run() -> None:
            while not self.stopping.is_set():
                try:
                    action()
                except Exception:  # a failing round is logged; the runtime keeps going
                    if self.stopping.is_set():  # moto stopped under a long poll: shutdown, not a fault
                        log.debug("%s stopped mid-round", name, exc_info=True)
                    else:
                        log.exception("%s failed", name)
                self.stopping.wait(period - time.time() % period if aligned else period)

        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def _start_ticks(self) -> None:
        assert self.deployment is not None
        for logical, seconds in self.deployment.tick_seconds.items():
            function = self.deployment.physical[logical]
            handler = self.handler(self.deployment.functions[function]["handler"])
            period = self.tick_override or seconds
            self._loop(f"tick-{function}", period, self._observed(function, _tick(handler, function)), aligned=True)
            log.info("EventBridge rule: %s every %s s", function, period)

    def _start_pollers(self) -> None:
        import boto3

        assert self.deployment is not None
        from botocore.config import Config

        from jobsched.adapters.aws.clients import LOCAL_POOL_CONNECTIONS

        sqs = boto3.client(
            "sqs",
            endpoint_url=self.endpoint,
            region_name=REGION,
            config=Config(max_pool_connections=LOCAL_POOL_CONNECTIONS),
        )
        for source in self.deployment.event_sources:
            url = self.deployment.queue_url(source.queue)
            function = self.deployment.physical[source.function]
            handler = self.handler(self.deployment.functions[function]["handler"])
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            pool = ThreadPoolExecutor(max_workers=source.max_concurrency, thread_name_prefix=f"poll-{source.queue}")

            def poll(
                url: str = url,
                arn: str = arn,
                handler: Callable[..., Any] = handler,
                pool: Any = pool,
                batch: int = source.batch_size,
                function: str = function,
            ) -> None:
                if function in self.paused_sources:
                    return  # the function is "down": what arrives waits on its queue, as in SQS
                with acting_as(function):  # an event source mapping receives with its function's role
                    messages = sqs.receive_message(
                        QueueUrl=url, MaxNumberOfMessages=batch, WaitTimeSeconds=1, AttributeNames=["All"]
                    ).get("Messages", [])
                if messages and function in self.paused_sources:
                    # Paused while this receive was waiting: hand the messages back rather than deliver them.
                    sqs.change_message_visibility_batch(
                        QueueUrl=url,
                        Entries=[
                            {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                            for n, m in enumerate(messages)
                        ],
                    )
                    return
                if messages:
                    pool.submit(self._deliver, sqs, url, arn, handler, function, messages)

            # Several receivers per queue, as an event source polls with several (five to start with in AWS):
            # a burst due at one instant is taken in parallel, not ten messages at a time.
            for receiver in range(min(LOCAL_RECEIVERS, max(1, source.max_concurrency // source.batch_size))):
                self._loop(f"poll-{source.queue}-{receiver}", 0.05, poll)

    def _deliver(
        self, sqs: Any, url: str, arn: str, handler: Callable[..., Any], function: str, messages: list[dict[str, Any]]
    ) -> None:
        with acting_as(function):  # the handler's calls and the mapping's deletes are the function role's
            self._deliver_as_function(sqs, url, arn, handler, function, messages)

    def _deliver_as_function(
        self, sqs: Any, url: str, arn: str, handler: Callable[..., Any], function: str, messages: list[dict[str, Any]]
    ) -> None:
        if self.alarms is not None:
            for message in messages:
                sent = int(message.get("Attributes", {}).get("SentTimestamp", "0")) / 1000
                self.alarms.received(url.rsplit("/", 1)[-1], sent or time.time())
        event = {"Records": [_record(m, arn) for m in messages]}
        # Invocations of one function run here at once on threads of one process, where AWS gives each its own
        # execution environment: handlers keep what belongs to an invocation inside it (a batch processor held
        # at module level let one invocation's records be taken by another, and lost DAG task messages).
        try:
            response = handler(event, LocalContext(function, aws_request_id=uuid.uuid4().hex))
            failed = {f["itemIdentifier"] for f in (response or {}).get("batchItemFailures", [])}
            self._invoked(function, failed=False)
        except Exception:
            log.exception("%s failed a batch", function)
            failed = {m["MessageId"] for m in messages}
            self._invoked(function, failed=True)
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            sqs.delete_message_batch(
                QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)]
            )
        for message in messages:
            if message["MessageId"] in failed:
                # AWS would wait for the queue's visibility timeout (90 minutes here); locally, seconds.
                sqs.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=LOCAL_FAILED_RECORD_RETRY
                )

    # -------------------------------------------------------------------------- alarms

    def _start_alarms(self, template: dict[str, Any]) -> None:
        """The template's alarms over what the handlers emit and the runtime observes (infra/local/alarms.py)."""
        assert self.deployment is not None
        self.alarms = LocalAlarms(
            template,
            self.deployment.physical,
            endpoint=self.endpoint,
            region=REGION,
            state_file=self.state_dir / "alarms.json",
            scale=self.alarm_time_scale,
        )
        signals.add_sink(self.alarms.metric)
        every = min(60.0, max(1.0, 60.0 / self.alarm_time_scale))
        self._loop("alarms", every, self.alarms.evaluate)
        log.info(
            "%d alarms evaluated every %.0f s (periods scaled 1/%g)",
            len(self.alarms.board.alarms),
            every,
            self.alarm_time_scale,
        )

    def pause_source(self, function: str, paused: bool = True) -> None:
        """Stop (or resume) delivering a queue to its function (its deployed name): the function is down, and its
        queue keeps what comes meanwhile."""
        (self.paused_sources.add if paused else self.paused_sources.discard)(function)

    def pause_rule(self, function: str, paused: bool = True) -> None:
        """Disable (or enable again) the EventBridge rule of a scheduled function, e.g. the dispatcher's."""
        (self.paused_rules.add if paused else self.paused_rules.discard)(function)

    def _invoked(self, function: str, *, failed: bool) -> None:
        if self.alarms is not None:
            self.alarms.invoked(function, failed=failed)

    def _observed(self, function: str, action: Callable[[], None]) -> Callable[[], None]:
        """A scheduled invocation, counted as AWS/Lambda counts it (Invocations, Errors)."""

        def run() -> None:
            if function in self.paused_rules:
                return  # the rule is disabled: no invocation at all, as when EventBridge stops firing
            try:
                action()
            except Exception:
                self._invoked(function, failed=True)
                raise
            self._invoked(function, failed=False)

        return run

    def _start_escalation_watch(self) -> None:
        """The escalation handler runs on its queue like any function; what it pages goes to the SNS topic.
        Here a queue subscribed to that topic stands in for the on-call's phone: each page is logged and
        appended to ``<state-dir>/escalations.jsonl`` (``jobsched local escalations``)."""
        import boto3

        from jobsched.core.names import Env

        topic = os.environ[Env.ESCALATION_TOPIC]
        sqs = boto3.client("sqs", endpoint_url=self.endpoint, region_name=REGION)
        sns = boto3.client("sns", endpoint_url=self.endpoint, region_name=REGION)
        url = sqs.create_queue(QueueName="jobsched-local-pages")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
        path = self.state_dir / "escalations.jsonl"

        def watch() -> None:
            for message in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
                "Messages", []
            ):
                envelope = json.loads(message["Body"])
                attributes = {k: v["Value"] for k, v in envelope.get("MessageAttributes", {}).items()}
                page = {"subject": envelope.get("Subject"), "message": envelope.get("Message"), **attributes}
                self.escalations.append(page)
                with path.open("a") as file:
                    file.write(json.dumps(page) + "\n")
                log.warning("PAGE %s\n%s", page["subject"], page["message"])
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

        self._loop("pages", 0.2, watch)

    # ------------------------------------------------------------------------ examples

    def _register_examples(self) -> None:
        from jobsched.client import ApiClient, HttpTransport

        client = ApiClient(HttpTransport(self.api_url))
        jobs = {
            "hello": {
                "schedule": {"expression": "* * * * *"},
                "target": {"type": "lambda", "function": "jobsched-example-echo", "payload": {"hello": "world"}},
            },
            "flaky": {
                "schedule": {"expression": "*/2 * * * *"},
                "target": {"type": "lambda", "function": "jobsched-example-flaky", "payload": {"fail_times": 2}},
                "retry": {"max_attempts": 4, "backoff": {"initial": "5s", "max": "30s"}},
            },
            "callback": {
                "schedule": {"expression": "*/3 * * * *"},
                "heartbeat_timeout": "2m",
                "target": {"type": "callback", "timeout": "10m"},
            },
            # Fails every time: the first failure pages once (the escalation topic's queue shows it, and
            # `jobsched local escalations` prints it); the failures after it join the same open incident.
            "failing": {
                "schedule": {"expression": "*/2 * * * *"},
                "target": {"type": "lambda", "function": "jobsched-example-flaky", "payload": {"fail_times": 99}},
                "retry": {"max_attempts": 2, "backoff": {"initial": "2s", "max": "2s"}},
                "runbook_url": "https://runbooks.example.com/examples/failing",
            },
            # A DAG on a real (moto-interpreted) state machine: a diamond whose one branch fails once and is
            # retried by the state machine, then a cleanup task that runs whatever happened.
            "pipeline": {
                "schedule": {"expression": "*/2 * * * *"},
                "retry": {"max_attempts": 3, "backoff": {"initial": "2s", "max": "10s"}},
                "dag": {
                    "tasks": [
                        {
                            "name": "extract",
                            "target": _example_lambda("echo", {"step": "extract"}),
                            # Quality gates: the echo's answer must name its step; a warning if it has no rows.
                            "checks": [
                                {"name": "named-step", "expect": 'output.echo.payload.step == "extract"'},
                                {"name": "has-rows", "expect": "output.echo.payload.rows > 0", "severity": "warn"},
                            ],
                        },
                        {"name": "orders", "depends_on": ["extract"], "target": _example_lambda("echo", {})},
                        {
                            "name": "customers",
                            "depends_on": ["extract"],
                            "target": _example_lambda("flaky", {"fail_times": 1}),
                        },
                        {
                            "name": "load",
                            "depends_on": ["orders", "customers"],
                            # Data between tasks: what extract returned, read from its output by reference.
                            "target": _example_lambda(
                                "echo", {"from_extract": "{{ tasks.extract.output.echo.payload }}"}
                            ),
                        },
                        {
                            "name": "cleanup",
                            "depends_on": ["load"],
                            "trigger_rule": "all_done",
                            "target": _example_lambda("echo", {"step": "cleanup"}),
                        },
                    ]
                },
            },
        }
        for name, body in jobs.items():
            client.call("PUT", f"/teams/examples/jobs/{name}", body)
        # Jobs started by events, from their example files: an EventBridge pattern, and objects landing in a
        # bucket of the team's that sends its events to EventBridge.
        import boto3
        import yaml

        s3 = boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION)
        s3.create_bucket(Bucket=EXAMPLE_BUCKET)
        s3.put_bucket_tagging(Bucket=EXAMPLE_BUCKET, Tagging={"TagSet": [{"Key": OWNER_TAG, "Value": "examples"}]})
        s3.put_bucket_notification_configuration(
            Bucket=EXAMPLE_BUCKET, NotificationConfiguration={"EventBridgeConfiguration": {}}
        )
        put_example_inventory(s3)
        for path in EVENT_EXAMPLES:
            document = yaml.safe_load((ROOT / path).read_text())
            client.call("PUT", f"/teams/{document['team']}/jobs/{document['name']}", document)
        self._example_containers()
        for path in CONTAINER_EXAMPLES:  # as written: the network they name is the one made above
            document = yaml.safe_load((ROOT / path).read_text())
            client.call("PUT", f"/teams/{document['team']}/jobs/{document['name']}", document)
        self._example_batch()
        for path in BATCH_EXAMPLES:
            document = yaml.safe_load((ROOT / path).read_text())
            client.call("PUT", f"/teams/{document['team']}/jobs/{document['name']}", document)
        nightly = yaml.safe_load((ROOT / WAIT_EXAMPLE).read_text())
        nightly["schedule"]["expression"] = WAIT_EXAMPLE_SHORT["schedule"]
        nightly["dag"]["tasks"][0]["wait"]["timeout"] = WAIT_EXAMPLE_SHORT["timeout"]
        client.call("PUT", f"/teams/{nightly['team']}/jobs/{nightly['name']}", nightly)
        pipeline = yaml.safe_load((ROOT / PIPELINE_EXAMPLE).read_text())
        client.call("PUT", f"/teams/{pipeline['team']}/jobs/{pipeline['name']}", pipeline)
        log.info(
            "example jobs registered for team 'examples': %s, and the ones in %s, %s (a short window) and %s",
            ", ".join(jobs),
            ", ".join(EVENT_EXAMPLES),
            WAIT_EXAMPLE,
            PIPELINE_EXAMPLE,
        )

    def _start_container_agent(self) -> None:
        """Plays ECS for the tasks the scheduler starts (infra/local/containers.py)."""
        import boto3

        from infra.local.containers import LocalBatchAgent, LocalContainerAgent

        agent = LocalContainerAgent(
            ecs=boto3.client("ecs", endpoint_url=self.endpoint, region_name=REGION),
            events=boto3.client("events", endpoint_url=self.endpoint, region_name=REGION),
            logs=boto3.client("logs", endpoint_url=self.endpoint, region_name=REGION),
        )
        self.container_agent = agent
        self._loop("container-agent", 0.5, agent.step)
        batch_agent = LocalBatchAgent(
            batch=boto3.client("batch", endpoint_url=self.endpoint, region_name=REGION),
            events=boto3.client("events", endpoint_url=self.endpoint, region_name=REGION),
        )
        self.batch_agent = batch_agent
        self._loop("batch-agent", 0.5, batch_agent.step)

    def _example_batch(self) -> None:
        """Team examples' Batch job queue and job definition (tagged for the team), on an unmanaged compute
        environment (the local agent plays its hosts)."""
        import boto3

        batch = boto3.client("batch", endpoint_url=self.endpoint, region_name=REGION)
        iam = boto3.client("iam", endpoint_url=self.endpoint, region_name=REGION)
        role = iam.create_role(RoleName="examples-batch-service", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        compute = batch.create_compute_environment(
            computeEnvironmentName="examples-local", type="UNMANAGED", state="ENABLED", serviceRole=role
        )["computeEnvironmentArn"]
        tags = {OWNER_TAG: "examples"}
        batch.create_job_queue(
            jobQueueName=EXAMPLE_JOB_QUEUE,
            state="ENABLED",
            priority=1,
            computeEnvironmentOrder=[{"order": 1, "computeEnvironment": compute}],
            tags=tags,
        )
        batch.register_job_definition(
            jobDefinitionName=EXAMPLE_JOB_DEFINITION,
            type="container",
            containerProperties={"image": "python:3.11-slim", "vcpus": 1, "memory": 512, "command": ["true"]},
            tags=tags,
        )

    def _example_containers(self) -> dict[str, Any]:
        """Team examples' cluster and task definition (tagged for the team), and a VPC for their tasks."""
        import boto3

        tags = [{"key": OWNER_TAG, "value": "examples"}]
        ecs = boto3.client("ecs", endpoint_url=self.endpoint, region_name=REGION)
        ecs.create_cluster(clusterName=EXAMPLE_CLUSTER, tags=tags)
        logs = boto3.client("logs", endpoint_url=self.endpoint, region_name=REGION)
        logs.create_log_group(logGroupName=EXAMPLE_LOG_GROUP, tags={OWNER_TAG: "examples"})
        ecs.register_task_definition(
            family=EXAMPLE_TASK_DEFINITION,
            containerDefinitions=[
                {
                    "name": "export",
                    "image": "python:3.11-slim",
                    "essential": True,
                    "memory": 512,
                    "command": ["python3", "-c", "print('no command given')"],
                    "logConfiguration": {
                        "logDriver": "awslogs",
                        "options": {
                            "awslogs-group": EXAMPLE_LOG_GROUP,
                            "awslogs-region": REGION,
                            "awslogs-stream-prefix": "examples",
                        },
                    },
                }
            ],
            requiresCompatibilities=["FARGATE"],
            networkMode="awsvpc",
            cpu="256",
            memory="512",
            tags=tags,
        )
        ec2 = boto3.client("ec2", endpoint_url=self.endpoint, region_name=REGION)
        ids = (EXAMPLE_SUBNET, EXAMPLE_SECURITY_GROUP)  # what examples/containers/*.yaml name
        return team_network(ec2, "examples", cidr="10.42.0.0/16", group="examples-containers", ids=ids)

    def _start_callback_worker(self) -> None:
        """Plays the external worker of the example callback job: the sleep example heartbeats, then completes."""
        from jobsched.client import ApiClient, HttpTransport

        client = ApiClient(HttpTransport(self.api_url))
        started: set[str] = set()

        def work() -> None:
            runs = client.call("GET", "/teams/examples/jobs/callback/runs", query={"status": "RUNNING"}).body["runs"]
            for run in runs:
                if run["run_id"] in started:
                    continue
                started.add(run["run_id"])
                detail = client.call("GET", f"/teams/examples/jobs/callback/runs/{run['run_id']}").body
                payload = {
                    "payload": {"seconds": 3, "callback_token": detail["callback_token"], "api_url": self.api_url}
                }
                threading.Thread(
                    target=self.invoke,
                    args=("jobsched-example-sleep", json.dumps(payload).encode(), timedelta(minutes=5)),
                    daemon=True,
                ).start()

        self._loop("callback-worker", 2.0, work)

    # --------------------------------------------------------------------------- state

    def _start_snapshots(self) -> None:
        """Every write of a handler marks its item changed; the changed items are read back and the state is
        saved within a second. (A full scan every second was a fifth of moto's time under load.)"""
        from jobsched.adapters.aws.clients import client
        from jobsched.core.names import JOBS_TABLE, RUNS_TABLE

        self._key_attributes = {
            os.environ[variable]: (definition.partition_key[0], definition.sort_key[0])
            for variable, definition in ((Env.JOBS_TABLE, JOBS_TABLE), (Env.RUNS_TABLE, RUNS_TABLE))
        }
        client("dynamodb").meta.events.register("before-parameter-build.dynamodb", self._note_write)

        def snapshot() -> None:
            if self._tables_changed.is_set():
                self._tables_changed.clear()  # before reading: a write during it marks the next round
                self._save_state()

        self._loop("snapshots", SNAPSHOT_EVERY, snapshot)

    def _note_write(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        """Remember which items a write is about to change (a refused conditional write changes nothing, and
        reading it back costs only a read)."""
        if model.name not in TABLE_WRITES:
            return
        touched = _written_keys(model.name, params)
        with self._dirty_lock:
            for table, values in touched:
                key = self._key_attributes.get(table)
                if key is not None:
                    self._dirty.setdefault(table, {})[json.dumps([values[key[0]], values[key[1]]])] = {
                        key[0]: values[key[0]],
                        key[1]: values[key[1]],
                    }
        self._tables_changed.set()

    def _save_state(self) -> None:
        """The tables, kept across restarts in ``state_dir`` (queues are rebuilt from them on start): a full
        scan the first time, then only the items written since, read back in batches of 100."""
        import boto3

        if self.deployment is None or not self._key_attributes:
            return  # a start that failed before its snapshots began: the state saved before stays as it was
        dynamodb = boto3.client("dynamodb", endpoint_url=self.endpoint, region_name=REGION)
        with self._dirty_lock:
            dirty, self._dirty = self._dirty, {}
        tables = {os.environ[variable]: variable for variable in (Env.JOBS_TABLE, Env.RUNS_TABLE)}
        for table, variable in tables.items():
            items = self._saved_items.get(variable)
            key = self._key_attributes[table]
            if items is None:
                items = {}
                for page in dynamodb.get_paginator("scan").paginate(TableName=table):
                    for item in page["Items"]:
                        items[json.dumps([item[key[0]], item[key[1]]])] = item
                self._saved_items[variable] = items
                continue
            _refresh(dynamodb, table, key, items, dirty.get(table, {}))
        snapshot = {variable: list(self._saved_items[variable].values()) for variable in tables.values()}
        write_atomically(self.state_dir / "tables.json", json.dumps(snapshot))

    def _restore_state(self) -> None:
        """Tables from the last snapshot, then the queues rebuilt from them (their contents died with moto)."""
        import boto3

        from jobsched import wiring
        from jobsched.adapters.aws.dynamo import from_item
        from jobsched.adapters.items import is_run_item
        from jobsched.core.names import JobsKeys
        from jobsched.core.records import Run
        from jobsched.core.runs import TERMINAL
        from jobsched.pipeline.recovery import recover_lost_queues

        path = self.state_dir / "tables.json"
        if not path.exists():
            return
        dynamodb = boto3.client("dynamodb", endpoint_url=self.endpoint, region_name=REGION)
        saved = json.loads(path.read_text())
        for variable, items in saved.items():
            for start in range(0, len(items), 25):
                requests = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
                dynamodb.batch_write_item(RequestItems={os.environ[variable]: requests})
        log.info("restored tables from %s", path)
        jobs = [from_item(item) for item in saved.get(Env.JOBS_TABLE, [])]
        runs = [from_item(item) for item in saved.get(Env.RUNS_TABLE, [])]
        terminal = {status.value for status in TERMINAL}
        report = recover_lost_queues(
            wiring.default_worker(),
            job_keys=[values[JobsKeys.PK] for values in jobs if values[JobsKeys.SK] == JobsKeys.STATE],
            unfinished=[
                Run.from_values(values) for values in runs if is_run_item(values) and values["status"] not in terminal
            ],
            now=wiring.utc_now(),
        )
        log.info(
            "queues rebuilt: %d jobs dispatch again from their audit mark, %d unfinished runs re-sent (%d of them "
            "lost their worker with the process)",
            report.rewound,
            report.resent,
            report.leases_ended,
        )
        self._redeploy_trigger_rules(jobs)

    def _redeploy_trigger_rules(self, jobs: list[dict[str, Any]]) -> None:
        """EventBridge keeps rules across outages; moto's died with the process: put back each stored job's."""
        from jobsched.core.names import JobsKeys, Settings
        from jobsched.core.records import StoredJob
        from jobsched.core.waits import job_rules
        from jobsched.wiring import build_rules

        rules = build_rules(Settings.from_env())
        if rules is None:
            return
        specs = [StoredJob.from_values(values).spec for values in jobs if values[JobsKeys.SK] == JobsKeys.SPEC]
        with_triggers = [(spec, job_rules(spec)) for spec in specs]
        with_triggers = [(spec, needed) for spec, needed in with_triggers if needed]
        for spec, needed in with_triggers:
            rules.deploy(spec.key, spec.team, needed)
        if with_triggers:
            log.info("trigger rules put back for %d jobs", len(with_triggers))


def _example_lambda(name: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"type": "lambda", "function": f"jobsched-example-{name}", "payload": payload}


def _wait_for_port(port: int, process: subprocess.Popen[bytes], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the moto server exited with {process.returncode}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the moto server did not listen on port {port} within {seconds:.0f} s")


def _tick(handler: Callable[..., Any], function: str) -> Callable[[], None]:
    """What the EventBridge rule does each period: invoke the function with a scheduled event."""

    def fire() -> None:
        event = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
        with acting_as(function):
            handler(event, LocalContext(function, aws_request_id=uuid.uuid4().hex))

    return fire


def _record(message: dict[str, Any], arn: str) -> dict[str, Any]:
    attributes = message.get("Attributes", {})
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": {
            "ApproximateReceiveCount": attributes.get("ApproximateReceiveCount", "1"),
            "SentTimestamp": attributes.get("SentTimestamp", "0"),
            "SenderId": attributes.get("SenderId", "local"),
            "ApproximateFirstReceiveTimestamp": attributes.get("ApproximateFirstReceiveTimestamp", "0"),
        },
        "messageAttributes": {},
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": REGION,
    }


def _written_keys(operation: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(table, key or item) of every item a DynamoDB write request names."""
    if operation in ("PutItem", "UpdateItem", "DeleteItem"):
        return [(params["TableName"], params.get("Key") or params["Item"])]
    touched: list[tuple[str, dict[str, Any]]] = []
    if operation == "BatchWriteItem":
        for table, requests in params["RequestItems"].items():
            for request in requests:
                change = request.get("PutRequest") or request.get("DeleteRequest") or {}
                touched.append((table, change.get("Key") or change.get("Item") or {}))
        return touched
    for item in params["TransactItems"]:
        for kind in ("Put", "Update", "Delete"):
            if kind in item:
                touched.append((item[kind]["TableName"], item[kind].get("Key") or item[kind]["Item"]))
    return touched


def _refresh(
    dynamodb: Any, table: str, key: tuple[str, str], items: dict[str, Any], dirty: dict[str, dict[str, Any]]
) -> None:
    """Read the written items back (100 a batch) into ``items``; one that is gone was deleted."""
    changed = list(dirty.items())
    for start in range(0, len(changed), 100):
        chunk = dict(changed[start : start + 100])
        found: dict[str, Any] = {}
        request: dict[str, Any] = {table: {"Keys": list(chunk.values()), "ConsistentRead": True}}
        while request:
            response = dynamodb.batch_get_item(RequestItems=request)
            for item in response["Responses"].get(table, []):
                found[json.dumps([item[key[0]], item[key[1]]])] = item
            request = response.get("UnprocessedKeys") or {}
        for name in chunk:
            if name in found:
                items[name] = found[name]
            else:
                items.pop(name, None)  # deleted
