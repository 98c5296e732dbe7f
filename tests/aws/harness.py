"""An offline AWS for tests: moto tables and queues from the one names module, and a queue pump.

The pump plays the part of Lambda's SQS event source on a virtual clock. It receives real messages from
moto's queues and gives the worker those whose instant has come. Messages that must wait stay on the
queue, and it deletes what the worker finished. No test waits for real minutes.
"""

from __future__ import annotations

import copy
import io
import json
import zipfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3

from jobsched.adapters.aws.container_work import ContainerWork
from jobsched.adapters.aws.data_checks import S3DataChecks
from jobsched.adapters.aws.jobs_store import JobsStore
from jobsched.adapters.aws.notify import Notifier
from jobsched.adapters.aws.ownership import AwsTagReader, TeamSessions
from jobsched.adapters.aws.queues import EscalationQueue, PageQueue
from jobsched.adapters.aws.rules import TriggerRules
from jobsched.adapters.aws.runs_store import RunsStore
from jobsched.adapters.aws.targets import TargetExecutor
from jobsched.adapters.aws.workflows import Workflows
from jobsched.api.access import ApiRuns
from jobsched.core.events import EventEnvelope
from jobsched.core.messages import DagTaskFailure, WorkMessage, parse_work_message
from jobsched.core.names import (
    JOBS_TABLE,
    OWNER_TAG,
    PRIORITIES,
    RUNS_TABLE,
    SHARED_TAG,
    WORK_QUEUES,
    WORKER_BATCH,
    Env,
    reserved_prefixes,
    state_machine_prefix,
)
from jobsched.core.outcome import Outcome
from jobsched.core.run_records import Run
from jobsched.core.runs import RunMessage, parse_instant
from jobsched.core.settings import Settings
from jobsched.core.slo import SloTiers
from jobsched.core.spec import JobSpec
from jobsched.dag.deployer import DagDeployer
from jobsched.paging.delivery import Delivered, PageDelivery, PageNotDelivered, PageSender
from jobsched.paging.escalation_events import Alerts, EscalationEvent
from jobsched.paging.incidents import Escalator
from jobsched.paging.rules import Links
from jobsched.pipeline.baselines import HealthWatch
from jobsched.pipeline.containers import ContainerResults
from jobsched.pipeline.dispatch import Dispatcher
from jobsched.pipeline.intake import EventIntake, Received
from jobsched.pipeline.lifecycle import AnnouncedRuns, Lifecycle
from jobsched.pipeline.manual_runs import trigger_run
from jobsched.pipeline.slo_ledger import JobTerms, SloLedger
from jobsched.pipeline.usage import DagRunUsage
from jobsched.pipeline.worker import Worker
from jobsched.registry.jobs import put_job
from jobsched.tenancy.egress import AddressPolicy, GuardedHttp
from jobsched.tenancy.ownership import OwnershipGuard, ResourceKind, TeamGrants, spec_resources
from tests.aws.fakes import Crash as Crash  # re-exported: tests take them from here
from tests.aws.fakes import FakeContext as FakeContext
from tests.aws.fakes import FakeLambdas as FakeLambdas
from tests.aws.fakes import InMemoryQueues as InMemoryQueues
from tests.aws.fakes import LambdaTimedOut as LambdaTimedOut
from tests.aws.fakes import RecordingHttp as RecordingHttp
from tests.aws.fakes import VirtualDelayQueues as VirtualDelayQueues
from tests.aws.fakes import at as at
from tests.aws.fakes import run_context as run_context
from tests.helpers import Clock as Clock  # re-exported: the moto tests take the stack and its clock from here

REGION = "us-east-1"
ACCOUNT = "123456789012"
# The deployment's kubernetes state machine (tests/aws/test_kubernetes_targets.py creates it in moto).
KUBERNETES_MACHINE = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:jobsched-test-kubernetes"
# What the platform grants teams by name (the membership's "kubernetes" and "event_sources"), as tests deploy it.
TEAM_GRANTS = {
    "kubernetes": {
        "data": {"namespaces": ["data-jobs"], "service_accounts": ["trainer"]},
        "data-eng": {"namespaces": ["data-eng", "data-eng-jobs"], "service_accounts": ["data-eng-admin"]},
    },
    "event_sources": {"data": ["com.acme.orders", "com.acme.billing", "com.acme"]},
}


def record_operations(stack: Stack) -> list[str]:
    """Every DynamoDB operation the stack's client makes from now on, by name, in order (it goes on as before)."""
    calls: list[str] = []
    original = stack.dynamodb._make_api_call

    def recorded(operation: str, params: Any) -> Any:
        calls.append(operation)
        return original(operation, params)

    stack.dynamodb._make_api_call = recorded
    return calls


class Stack:
    """The scheduler's tables and queues in moto, and the services wired to them."""

    team_grants = TeamGrants.from_config(TEAM_GRANTS)  # a test may grant others

    def __init__(
        self,
        clock: Clock,
        lambdas: FakeLambdas | None = None,
        *,
        in_memory_queues: bool = False,
        dynamodb: Callable[[Any], Any] | None = None,
    ) -> None:
        """``dynamodb``: what the stores get in place of the plain client (given it), e.g. a client moving tables."""
        self.clock = clock
        self.lambdas = lambdas or FakeLambdas()
        self._held: dict[str, dict[str, dict[str, Any]]] = {}
        self.crashes, self.lifecycle = 0, Lifecycle()  # tests subscribe what they hear (no SLIs printed)
        self.dynamodb = (dynamodb or (lambda db: db))(boto3.client("dynamodb", region_name=REGION))
        self.sqs = boto3.client("sqs", region_name=REGION)
        self.jobs_table, self.runs_table = "jobsched-test-Jobs", "jobsched-test-Runs"
        for definition, name in ((JOBS_TABLE, self.jobs_table), (RUNS_TABLE, self.runs_table)):
            self.dynamodb.create_table(**definition.create_table_kwargs(name))
        self.queue_urls: dict[str, str] = {}
        self.dlq_urls: dict[str, str] = {}
        for priority in PRIORITIES:
            queue = WORK_QUEUES[priority]
            dlq = self.sqs.create_queue(QueueName=f"jobsched-test-{queue.logical_name}-dlq")["QueueUrl"]
            dlq_arn = self.sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(queue.max_receive_count)})
            self.queue_urls[priority] = self.sqs.create_queue(
                QueueName=f"jobsched-test-{queue.logical_name}",
                Attributes={"RedrivePolicy": redrive, "VisibilityTimeout": "30"},
            )["QueueUrl"]
            self.dlq_urls[priority] = dlq
        self.escalation_url = self.sqs.create_queue(QueueName="jobsched-test-escalations")["QueueUrl"]
        self.intake_url = self.sqs.create_queue(QueueName="jobsched-test-Events")["QueueUrl"]
        self.intake_arn = self.sqs.get_queue_attributes(QueueUrl=self.intake_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.settings = Settings(
            self.jobs_table,
            self.runs_table,
            dict(self.queue_urls),
            self.escalation_url,
            intake_queue_arn=self.intake_arn,
        )
        self.jobs = JobsStore(self.jobs_table, self.dynamodb)
        # As deployed: the store's state changes announced, the SLIs subscribed (tests subscribe more).
        self.runs: ApiRuns = AnnouncedRuns(RunsStore(self.runs_table, self.dynamodb), self.lifecycle)
        self.queues: VirtualDelayQueues = (
            InMemoryQueues(self.queue_urls, self.sqs, self._held)
            if in_memory_queues
            else VirtualDelayQueues(self.queue_urls, self.sqs)
        )
        self.queues.clock = clock
        self.sessions = TeamSessions(None)
        # Tags are read fresh in tests (ttl 0): a test that re-tags a resource sees the change at once.
        self.guard = OwnershipGuard(
            AwsTagReader(self.sessions), reserved_prefixes("test"), ttl=0, grants=lambda: self.team_grants
        )
        self.http = GuardedHttp(AddressPolicy(allow_loopback=True))  # test servers listen on loopback
        for name in self.lambdas.functions:  # the platform's shared functions, as the examples are deployed
            self.function(name, {SHARED_TAG: "true"})
        self.targets = TargetExecutor(
            guard=self.guard,
            sessions=self.sessions,
            lambda_invoker=self.lambdas,
            http=self.http,
            sleep=lambda seconds: None,
            kubernetes_state_machine=KUBERNETES_MACHINE,
        )
        self.escalation_queue = EscalationQueue(self.escalation_url, self.sqs)
        self.dispatcher = Dispatcher(self.jobs, self.runs, self.queues, escalations=self.escalation_queue)
        self.stepfunctions = boto3.client("stepfunctions", region_name=REGION)
        self.workflows = Workflows(
            role_arn=f"arn:aws:iam::{ACCOUNT}:role/jobsched-test-workflows",
            machine_prefix=f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{state_machine_prefix('test')}",
            stepfunctions=self.stepfunctions,
        )
        self.dags = DagDeployer(self.workflows, dict(self.queue_urls))
        self.events = boto3.client("events", region_name=REGION)
        self.rules = TriggerRules(stage="test", intake_queue_arn=self.intake_arn, events=self.events)
        self.intake = EventIntake(self.jobs, self.runs, self.queues, guard=self.guard)
        self.worker = Worker(
            jobs=self.jobs,
            runs=self.runs,
            queues=self.queues,
            escalations=self.escalation_queue,
            targets=self.targets,
            clock=clock,
            workflows=self.workflows,
            batches=self.jobs,
            checks=S3DataChecks(self.sessions, self.guard),
            waiters=self.jobs,
            containers=ContainerWork(self.targets.ecs, self.targets.batch, self.targets.kubernetes),
            usage=self.jobs,
        )
        self.intake.containers = ContainerResults(
            self.runs, lambda: self.worker.ends, self.jobs, lambda: self.worker.containers, usage=self.jobs
        )
        self.lifecycle.subscribe(self.worker.proven_ends.heard)  # as ``wiring.build_worker``: its ends, proven

        # Pages: SNS topics in moto, each delivering to one SQS queue the tests read; webhooks recorded.
        self.sns = boto3.client("sns", region_name=REGION)
        self.pages_url = self.sqs.create_queue(QueueName="jobsched-test-pages")["QueueUrl"]
        self.default_topic = self.topic("jobsched-test-escalations")
        self.webhooks = RecordingHttp()
        self.page_deliveries_url = self.sqs.create_queue(QueueName="jobsched-test-page-deliveries")["QueueUrl"]
        self.page_queue = PageQueue(self.page_deliveries_url, self.sqs)
        self.page_sender = PageSender(
            Notifier(sns=self.sns, http=self.webhooks, guard=self.guard),
            default_topic=self.default_topic,
            monotonic=lambda: clock().timestamp(),
        )
        self.page_failures: list[str] = []
        self.escalator = Escalator(
            jobs=self.jobs,
            pages=self.page_queue,
            clock=clock,
            default_topic=self.default_topic,
            links=Links(region=REGION, api_url="https://api.example.com/prod", log_groups=("/aws/lambda/worker",)),
        )

    def subscribe_as_deployed(self) -> Alerts:
        """What ``wiring.metered_runs`` subscribes besides the SLIs: the team's SLO ledger and the job's health
        (baseline and freshness), over this stack's tables and escalation queue. Returns the alerts they publish
        with (the freshness checker publishes with them too)."""
        alerts = Alerts(self.escalation_queue, self.jobs, self.clock)
        terms = JobTerms(self.jobs, monotonic=lambda: self.clock().timestamp())
        self.lifecycle.subscribe(SloLedger(self.jobs, SloTiers(), terms))
        store = RunsStore(self.runs_table, self.dynamodb)  # the table the announced runs write
        watch = HealthWatch(self.jobs, store, alerts.publish, self.clock, terms, monotonic=terms.monotonic)
        self.lifecycle.subscribe(watch)
        self.lifecycle.subscribe(DagRunUsage(self.jobs, self.clock))  # a DAG run's transitions, at its end
        return alerts

    def handler_environment(self) -> dict[str, str]:
        """The handlers' environment for this stack, as the deployed Lambda configuration would set it."""
        return {
            Env.JOBS_TABLE: self.settings.jobs_table,
            Env.RUNS_TABLE: self.settings.runs_table,
            **{Env.QUEUES_BY_PRIORITY[priority]: url for priority, url in self.settings.queue_urls.items()},
            Env.ESCALATION_QUEUE: self.settings.escalation_queue_url,
            Env.ESCALATION_TOPIC: self.default_topic,
            Env.API_URL: "https://api.example.com/dev",
            Env.PAGES_QUEUE: self.page_deliveries_url,
            Env.INTAKE_QUEUE_ARN: self.intake_arn,
            Env.MEMBERSHIP: json.dumps(TEAM_GRANTS),  # the grants a handler built from the environment reads
        }

    def topic(self, name: str, team: str | None = None) -> str:
        """An SNS topic whose messages the tests can read with ``pages`` (``team``: tagged as that team's)."""
        tags = [{"Key": OWNER_TAG, "Value": team}] if team else []
        arn: str = self.sns.create_topic(Name=name, Tags=tags)["TopicArn"]
        queue_arn = self.sqs.get_queue_attributes(QueueUrl=self.pages_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        self.sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=queue_arn)
        return arn

    def handle_escalations(self) -> list[Any]:
        """Run the escalation handler over every queued event (as its SQS event source would), then the
        pages handler over the pages it queued."""
        handled = []
        for event in self.escalations():
            handled.append(self.escalator.handle(EscalationEvent.model_validate(event)))
        self.deliver_pages()
        return handled

    def deliver_pages(self) -> list[Delivered]:
        """One pass of the pages handler: each queued page tried once. A failed one stays on the queue
        (visible again at once here) with its receive count, the attempt number the sender sees."""
        outcomes: list[Delivered] = []
        failed: list[str] = []
        for _ in range(100):
            batch = self.sqs.receive_message(
                QueueUrl=self.page_deliveries_url, MaxNumberOfMessages=10, AttributeNames=["ApproximateReceiveCount"]
            ).get("Messages", [])
            if not batch:
                break
            for raw in batch:
                delivery = PageDelivery.model_validate_json(raw["Body"])
                try:
                    outcomes.append(
                        self.page_sender.deliver(delivery, attempt=int(raw["Attributes"]["ApproximateReceiveCount"]))
                    )
                except PageNotDelivered as error:
                    self.page_failures.append(str(error))
                    failed.append(raw["ReceiptHandle"])
                    continue
                self.sqs.delete_message(QueueUrl=self.page_deliveries_url, ReceiptHandle=raw["ReceiptHandle"])
        for receipt in failed:
            self.sqs.change_message_visibility(
                QueueUrl=self.page_deliveries_url, ReceiptHandle=receipt, VisibilityTimeout=0
            )
        return outcomes

    def pages(self) -> list[dict[str, Any]]:
        """SNS messages published so far (taken off the test queue): topic, subject, message, attributes.
        Pages still on the pages queue are delivered first."""
        self.deliver_pages()
        found = []
        for _ in range(100):
            batch = self.sqs.receive_message(QueueUrl=self.pages_url, MaxNumberOfMessages=10).get("Messages", [])
            if not batch:
                break
            for raw in batch:
                envelope = json.loads(raw["Body"])
                found.append(
                    {
                        "topic": envelope["TopicArn"],
                        "subject": envelope.get("Subject"),
                        "message": envelope["Message"],
                        "attributes": {k: v["Value"] for k, v in envelope.get("MessageAttributes", {}).items()},
                    }
                )
                self.sqs.delete_message(QueueUrl=self.pages_url, ReceiptHandle=raw["ReceiptHandle"])
        return sorted(found, key=lambda page: page["message"])

    # ------------------------------------------------------------------------------ jobs

    def function(self, name: str, tags: dict[str, str]) -> str:
        """A Lambda function in moto with these tags (its code runs in FakeLambdas, not in moto)."""
        lambdas = boto3.client("lambda", region_name=REGION)
        try:
            return str(lambdas.get_function(FunctionName=name)["Configuration"]["FunctionArn"])
        except lambdas.exceptions.ResourceNotFoundException:
            pass
        iam = boto3.client("iam", region_name=REGION)
        try:
            role = iam.get_role(RoleName="fake-lambda")["Role"]["Arn"]
        except iam.exceptions.NoSuchEntityException:
            role = iam.create_role(RoleName="fake-lambda", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        code = io.BytesIO()
        with zipfile.ZipFile(code, "w") as archive:
            archive.writestr("handler.py", "def handler(event, context):\n    return event\n")
        created = lambdas.create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role=role,
            Handler="handler.handler",
            Code={"ZipFile": code.getvalue()},
            Tags=tags,
        )
        return str(created["FunctionArn"])

    def register(self, document: dict[str, Any], principal: str = "test") -> JobSpec:
        spec = JobSpec.model_validate(document)
        # Fake functions the test names but has not created stand for the platform's shared examples.
        for resource in spec_resources(spec):
            if resource.kind is ResourceKind.FUNCTION and resource.short_name in self.lambdas.functions:
                self.function(resource.short_name, {SHARED_TAG: "true"})
        put_job(self.jobs, spec, now=self.clock(), principal=principal, dags=self.dags, rules=self.rules)
        return spec

    def register_and_trigger(self, document: dict[str, Any]) -> str:
        """The job registered, a manual run of it triggered and delivered: the run's id."""
        spec = self.register(document)
        run = trigger_run(self.jobs, self.runs, self.queues, spec.key, now=self.clock(), principal="test")
        self.pump()
        return run.run_id

    def intake_messages(self) -> list[dict[str, Any]]:
        """What the trigger rules delivered to the intake queue (received, not yet deleted)."""
        messages: list[dict[str, Any]] = []
        while True:
            batch = self.sqs.receive_message(QueueUrl=self.intake_url, MaxNumberOfMessages=10, VisibilityTimeout=600)
            if not batch.get("Messages"):
                return messages
            messages += batch["Messages"]

    def deliver_events(self, *, deliveries: int = 1) -> list[Received]:
        """Each delivered event to the intake ``deliveries`` times (EventBridge and SQS deliver at least once)."""
        received = []
        for raw in self.intake_messages():
            envelope = EventEnvelope.model_validate_json(raw["Body"])
            received += [self.intake.receive(envelope, now=self.clock()) for _ in range(deliveries)]
            self.sqs.delete_message(QueueUrl=self.intake_url, ReceiptHandle=raw["ReceiptHandle"])
        return received

    def tick(self) -> Any:
        return self.dispatcher.tick(self.clock())

    def minutes(self, count: int) -> None:
        """``count`` minutes of normal operation: a tick, a minute on the clock, then every due run."""
        for _ in range(count):
            self.tick()
            self.clock.advance(timedelta(minutes=1))
            self.pump()

    # ---------------------------------------------------------------------------- queues

    def pump(
        self,
        *,
        priority: str = "normal",
        deliveries: int = 1,
        rounds: int = 200,
        on_outcome: Callable[[WorkMessage | DagTaskFailure, Outcome], None] | None = None,
    ) -> list[Outcome]:
        """Deliver due messages to the worker (each ``deliveries`` times) until none is due.

        Like SQS with DelaySeconds on a virtual clock: each message is received once, held until its
        instant, delivered, then deleted (the worker re-sends what must wait).
        """
        outcomes: list[Outcome] = []
        for _ in range(rounds):
            self._receive_into_held(priority)
            held = self._held.setdefault(priority, {})
            due = sorted(
                (raw for raw in held.values() if self._is_due(raw)),
                key=lambda raw: json.loads(raw["Body"]).get("fire_at", ""),
            )
            if not due:
                break
            for start in range(0, len(due), WORKER_BATCH):
                # As the worker's event source: batches of ten, sharing their specs' read and team slots' write.
                chunk = due[start : start + WORKER_BATCH]
                messages = [parse_work_message(raw["Body"]) for raw in chunk]
                batch = self.worker.start_batch(messages)
                for raw, message in zip(chunk, messages, strict=True):
                    try:
                        for _ in range(deliveries):
                            outcome = self.worker.process_any(message, batch)
                            outcomes.append(outcome)
                            if on_outcome:
                                on_outcome(message, outcome)
                    except Crash:
                        self.crashes += 1
                        return outcomes  # the message stays: SQS delivers it again after its visibility timeout
                    del held[raw["MessageId"]]
                self.worker.end_batch(batch)
        return outcomes

    def in_queue_order(self, priority: str = "normal") -> list[WorkMessage | DagTaskFailure]:
        """Every message on the queue in the order SQS hands them out (moto: the order they were sent),
        for tests of who is served first; ``pump`` instead delivers in instant order."""
        self._receive_into_held(priority)
        return [parse_work_message(raw["Body"]) for raw in self._held.get(priority, {}).values()]

    def pending(self, priority: str = "normal") -> list[RunMessage]:
        """Messages on the queue not yet delivered (received into the pump's hold, or still in SQS)."""
        self._receive_into_held(priority)
        messages = [parse_work_message(raw["Body"]) for raw in self._held.get(priority, {}).values()]
        return [message for message in messages if isinstance(message, RunMessage)]

    def _receive_into_held(self, priority: str) -> None:
        """Take every message off the moto queue into the pump's hold (moto's receive scans all in-flight
        messages, so leaving thousands there makes each receive slow). Held messages are the ones SQS
        would still deliver: a crash leaves its message held, to be delivered again."""
        held = self._held.setdefault(priority, {})
        url = self.queue_urls[priority]
        for _ in range(10_000):
            batch = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if not batch:
                return
            self.sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "ReceiptHandle": raw["ReceiptHandle"]} for i, raw in enumerate(batch)],
            )
            for raw in batch:
                held[raw["MessageId"]] = raw

    def _is_due(self, raw: dict[str, Any]) -> bool:
        not_before = self.queues.not_before.get(raw["Body"])
        if not_before is not None and not_before > self.clock() + timedelta(seconds=1):
            return False
        fire_at = json.loads(raw["Body"]).get("fire_at")  # DAG task messages are due when sent
        return fire_at is None or parse_instant(fire_at) <= self.clock() + timedelta(seconds=1)

    def live_slot_holders(self, pk: str, sk: str) -> dict[str, str]:
        """Slot holders whose runs have not ended: slots are released lazily (the next acquire evicts the
        ended ones), so "no slot leaked" means none of these is left."""
        holders = self.jobs.slot_holders(pk, sk)
        job = None if pk.startswith("TEAM#") else pk
        ended = self.worker.claims.ended_runs(holders, job=job)
        return {holder: lease for holder, lease in holders.items() if holder not in ended}

    def run_list(self, job: str) -> list[Run]:
        return self.runs.history(job, limit=1000, newest_first=False)

    def escalations(self) -> list[dict[str, Any]]:
        found = []
        for _ in range(50):
            batch = self.sqs.receive_message(QueueUrl=self.escalation_url, MaxNumberOfMessages=10).get("Messages", [])
            if not batch:
                break
            for raw in batch:
                found.append(json.loads(raw["Body"]))
                self.sqs.delete_message(QueueUrl=self.escalation_url, ReceiptHandle=raw["ReceiptHandle"])
        return found


EVENTS = Path(__file__).parents[2] / "events"


def sqs_event(stack: Stack, messages: list[dict[str, Any]], priority: str = "normal") -> dict[str, Any]:
    """Real moto messages in the shape of the sample event."""
    template = json.loads((EVENTS / "worker_sqs_batch.json").read_text())["Records"][0]
    url = stack.queue_urls[priority]
    arn = stack.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    records = []
    for raw in messages:
        record = copy.deepcopy(template)
        record |= {"messageId": raw["MessageId"], "receiptHandle": raw["ReceiptHandle"], "body": raw["Body"]}
        record["eventSourceARN"] = arn
        records.append(record)
    return {"Records": records}
