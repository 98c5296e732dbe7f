"""The examples `make run` seeds: team examples' jobs (by the API, as a user would), the AWS resources they name
(a bucket sending its events to EventBridge, an ECS cluster and task definition with a VPC, a Batch queue and
job definition, all tagged for the team), and the external worker of the example callback job."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from infra.local.containers import team_network
from infra.local.deploy import REGION, ROOT
from jobsched.core.names import OWNER_TAG

log = logging.getLogger("jobsched.local")

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


def put_example_inventory(s3: Any) -> None:
    """The snapshot inventory the example pipeline's distributed map runs over, in team examples' bucket (outside
    the event examples' prefixes, so writing it starts nothing)."""
    rows = "".join(f"snap-{n:04d},{111111111111 * (1 + n % 3)}\n" for n in range(EXAMPLE_INVENTORY_ROWS))
    s3.put_object(Bucket=EXAMPLE_BUCKET, Key=EXAMPLE_INVENTORY, Body=f"snapshot,account\n{rows}".encode())


@dataclass
class Examples:
    api_url: str
    endpoint: str
    loop: Callable[..., None]  # the machine's: run an action every period
    invoke: Callable[[str, bytes, timedelta], tuple[bytes, str | None]]  # Lambda Invoke of a stack function

    def seed(self) -> None:
        self._register_examples()
        self._start_callback_worker()

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

        self.loop("callback-worker", 2.0, work)


def _example_lambda(name: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"type": "lambda", "function": f"jobsched-example-{name}", "payload": payload}
