"""One deployment of the stack on the laptop's machine (``machine.LocalMachine``): its template deployed into
moto, its functions' handlers run in-process with the deployed environment, and AWS's drivers played for them.

- EventBridge rules -> the scheduled handlers on their schedule (``tick`` can shorten it for demos, tests).
- SQS event source mappings -> ``pollers.EventSourcePollers``.
- Lambda Invoke of the stack's functions (the examples) -> their handlers in-process; unknown ones fail clearly.
- Escalations -> printed and kept (``jobsched local escalations``).
- ECS and Batch hosts -> the container agents (``containers.py``).
Handler environment variables come from the deployed Lambda configurations: no second definition. After a
restart on a saved state, the queues (whose contents died with moto) are rebuilt from the tables
(``jobsched.pipeline.recovery``): nothing dispatched ahead or in flight is forgotten.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import secrets
import time
import uuid
from collections import deque
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from infra.iam.recording import CALLER, acting_as, recorded_invoke
from infra.local.alarms import LocalAlarms
from infra.local.deploy import ACCOUNT, REGION, Deployment, deploy, synthesize_cached
from infra.local.logs import CapturedLogs
from infra.local.machine import LocalContext, LocalMachine
from infra.local.pollers import EventSourcePollers
from infra.local.snapshots import Keys
from jobsched.core.names import Env
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


class LocalStack:
    def __init__(
        self,
        machine: LocalMachine,
        *,
        api_url: str,
        examples: bool,
        tick_seconds: float | None,
        alarm_time_scale: float,
    ) -> None:
        self.machine = machine
        self.api_url = api_url
        self.examples = examples
        self.tick_override = tick_seconds
        self.alarm_time_scale = alarm_time_scale
        self.logs = CapturedLogs()  # the handlers' lines, for `jobsched logs`
        self.escalations: list[dict[str, Any]] = []
        self.deployment: Deployment | None = None
        self.template: dict[str, Any] = {}  # what was deployed (the permissions are evaluated against it)
        self.alarms: LocalAlarms | None = None
        self.paused_rules: set[str] = set()  # functions whose schedule rule is disabled (pause_rule)
        self.paused_sources: set[str] = set()  # functions whose queue is not polled (pause_source)
        self._handlers: dict[str, Callable[..., Any]] = {}
        self._invocations: dict[str, deque[dict[str, Any]]] = {}

    @property
    def endpoint(self) -> str:
        return self.machine.endpoint

    @property
    def state_dir(self) -> Path:
        return self.machine.state_dir

    def deploy(self) -> None:
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

    def start_drivers(self) -> None:
        """What AWS does for the deployment once it runs: rules, event source mappings, pages, container hosts."""
        assert self.deployment is not None
        self._start_ticks()
        EventSourcePollers(
            self.machine, self.deployment, self.handler, self.alarms, self._invoked, self.paused_sources
        ).start()
        self._start_escalation_watch()
        self._start_container_agent()

    def tables(self) -> tuple[dict[str, Keys], dict[str, str]]:
        """(table name -> key attributes) of the deployment's tables (the previous ones too, while it carries them),
        and where a snapshot keyed by environment variable belongs (``LocalMachine.restore_tables``)."""
        from jobsched.core.names import JOBS_TABLE, RUNS_TABLE

        variables = {
            Env.JOBS_TABLE: JOBS_TABLE,
            Env.RUNS_TABLE: RUNS_TABLE,
            Env.PREVIOUS_JOBS_TABLE: JOBS_TABLE,
            Env.PREVIOUS_RUNS_TABLE: RUNS_TABLE,
        }
        keys = {
            os.environ[variable]: (table.partition_key[0], table.sort_key[0])
            for variable, table in variables.items()
            if os.environ.get(variable)
        }
        previous = {Env.JOBS_TABLE: Env.PREVIOUS_JOBS_TABLE, Env.RUNS_TABLE: Env.PREVIOUS_RUNS_TABLE}
        first_format = {v: os.environ.get(previous[v]) or os.environ[v] for v in previous}
        return keys, first_format

    def api(self) -> tuple[Callable[[dict[str, Any], Any], Any], LocalContext]:
        """The deployment's API function, as API Gateway invokes it."""
        from functions.api import handler as api

        assert self.deployment is not None
        name = next(n for n, f in self.deployment.functions.items() if f["handler"] == "functions.api.handler.handler")

        def handle(event: dict[str, Any], context: Any) -> Any:
            with acting_as(name):
                return api.handler(event, context)

        return handle, LocalContext(name)

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
        # One process plays every function: it reads a table move's phase every second (deployed: every minute),
        # so `jobsched local move-tables` announces and settles in seconds.
        os.environ[Env.MOVE_PHASE_SECONDS] = "1"
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

    def _start_ticks(self) -> None:
        assert self.deployment is not None
        for logical, seconds in self.deployment.tick_seconds.items():
            function = self.deployment.physical[logical]
            handler = self.handler(self.deployment.functions[function]["handler"])
            period = self.tick_override or seconds
            self.machine.loop(
                f"tick-{function}", period, self._observed(function, _tick(handler, function)), aligned=True
            )
            log.info("EventBridge rule: %s every %s s", function, period)

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
        self.machine.loop("alarms", every, self.alarms.evaluate)
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

    def _invoked(self, function: str, failed: bool) -> None:
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
                self._invoked(function, True)
                raise
            self._invoked(function, False)

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

        self.machine.loop("pages", 0.2, watch)

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
        self.machine.loop("container-agent", 0.5, agent.step)
        batch_agent = LocalBatchAgent(
            batch=boto3.client("batch", endpoint_url=self.endpoint, region_name=REGION),
            events=boto3.client("events", endpoint_url=self.endpoint, region_name=REGION),
        )
        self.batch_agent = batch_agent
        self.machine.loop("batch-agent", 0.5, batch_agent.step)

    def recover(self, saved: dict[str, list[dict[str, Any]]]) -> None:
        """After the tables were restored: the queues rebuilt from them (their contents died with moto)."""
        from jobsched import wiring
        from jobsched.adapters.aws.dynamo import from_item
        from jobsched.adapters.items import is_run_item
        from jobsched.core.names import MOVE_COPIED, MOVE_MARK, MOVE_TOMBSTONE, JobsKeys, RunsKeys
        from jobsched.core.run_records import Run
        from jobsched.core.runs import TERMINAL
        from jobsched.pipeline.recovery import recover_lost_queues

        # The previous tables' items too (a stage not moved yet): a key in both is the new table's.
        def items_of(variables: tuple[str, str], key: tuple[str, str]) -> list[dict[str, Any]]:
            found: dict[tuple[Any, Any], dict[str, Any]] = {}
            for variable in variables:
                for item in saved.get(os.environ.get(variable) or "", []):
                    values = from_item(item)
                    if values.get(MOVE_MARK) != MOVE_COPIED and MOVE_TOMBSTONE not in values:
                        found.setdefault((values[key[0]], values[key[1]]), values)
            return list(found.values())

        jobs = items_of((Env.JOBS_TABLE, Env.PREVIOUS_JOBS_TABLE), (JobsKeys.PK, JobsKeys.SK))
        runs = items_of((Env.RUNS_TABLE, Env.PREVIOUS_RUNS_TABLE), (RunsKeys.PK, RunsKeys.SK))
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
        from jobsched.core.names import JobsKeys
        from jobsched.core.records import StoredJob
        from jobsched.core.settings import Settings
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


def _tick(handler: Callable[..., Any], function: str) -> Callable[[], None]:
    """What the EventBridge rule does each period: invoke the function with a scheduled event."""

    def fire() -> None:
        event = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
        with acting_as(function):
            handler(event, LocalContext(function, aws_request_id=uuid.uuid4().hex))

    return fire
