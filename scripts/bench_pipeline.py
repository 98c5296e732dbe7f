"""Cost per run of the dispatch -> worker -> target pipeline, measured against moto.

Runs N simple runs (default 2,000: half from minutely jobs, half from hourly jobs) through the real
dispatcher and worker. It counts every AWS request by service and operation and DynamoDB's write and read
units from item sizes (``scripts/dynamo_meter.py``), and each run's delete by the sweeper once its retention has
passed. It then prices everything at us-east-1 list prices:
- DynamoDB on demand: $0.625 per million write units, $0.125 per million read units.
- SQS: $0.40 per million requests (64 KB each).
- Lambda: $0.20 per million requests plus $0.0000133334 per GB-s on arm64. The target is counted as
  a 128 MB, 100 ms Lambda.

Modelled, and printed as assumptions: the worker's event source delivers full batches of 10 and
processes them concurrently; each AWS call takes 6 ms in-region. One warm worker process takes every batch, unless
``--worker-instances N``: each batch then goes to one of N warm instances at random, as the event source hands them
out without affinity (what a process proves of runs' ends is its own; the specs by version are warm on all).

Then a 5-task diamond DAG runs on moto's Step Functions interpreter: state transitions per run (billed
at $25 per million), with and without a retried task, and the DynamoDB and SQS work per DAG run; then the
example pipeline (examples/jobs/cost-cleanup.yaml: checks, data between tasks, a map, an approval), approved at once
(``scripts/bench_dag.py``).

Then container runs (ECS, Fargate) through the dispatcher, the worker and the intake that their task's state change
reaches: what the scheduler adds to each (``container_run_cost_per_million_usd=``), with the task's own Fargate price
for scale.

Then ``cost_per_million_runs_usd=`` (on demand, blended over the minutely and hourly runs) and
``cost_per_million_runs_provisioned_usd=``, and last the monthly cost of a deployment with no jobs, item
by item, for a non-prod and a prod stage (``scripts/idle_cost.py``): ``idle_cost_per_month_usd=`` and
``idle_cost_per_month_prod_usd=``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the offline stack lives with the tests

from moto import mock_aws

from jobsched.adapters.aws.dynamo import every_item, to_item
from jobsched.adapters.aws.retention import ExpiredItems
from jobsched.core.baseline import settled_baseline
from jobsched.core.names import (
    JOBS_TABLE,
    RUNS_TABLE,
    WORKER_BATCH,
)
from jobsched.core.prices import US_EAST_1
from jobsched.pipeline.baselines import schedule_gap
from jobsched.pipeline.claiming import ProvenEnds
from jobsched.schedule.company import NO_COMPANY
from jobsched.schedule.fires import first_fire
from jobsched.watch.retention import PASS_EVERY, Sweeper
from scripts.bench_dag import dag_scenario, pipeline_scenario
from scripts.dynamo_meter import ITEM_KINDS, Meter, item_size
from scripts.idle_cost import report as idle_cost_report
from scripts.tick_overhead import TickOverhead, tick_overhead
from tests.aws.harness import Clock, FakeLambdas, Stack

RUN_RETENTION = timedelta(days=30)  # a job's default run_retention
START = "2027-01-04T08:59:00Z"  # every scenario's first tick
MINUTELY, HOURLY = "* * * * *", "0 * * * *"
# Priced from the one table the chargeback uses (jobsched.core.prices): a benchmark figure and a team's bill agree.
PRICE_WRITE_UNIT = US_EAST_1.write_unit
PRICE_READ_UNIT = US_EAST_1.read_unit
PRICE_SQS_REQUEST = US_EAST_1.queue_request
PRICE_LAMBDA_REQUEST = US_EAST_1.function_request
PRICE_GB_SECOND = US_EAST_1.function_gb_second_arm
TARGET_GB_SECONDS = 0.128 * 0.100
# For comparison only: provisioned capacity ($0.00065 per WCU-hour, $0.00013 per RCU-hour) kept 70% busy.
PROVISIONED_UTILIZATION = 0.7
PROVISIONED_WRITE_UNIT = 0.00065 / 3600 / PROVISIONED_UTILIZATION
PROVISIONED_READ_UNIT = 0.00013 / 3600 / PROVISIONED_UTILIZATION
WORKER_MEMORY_GB = 0.256
DISPATCHER_MEMORY_GB = 0.256
AWS_CALL_SECONDS = 0.006  # modelled in-region latency of one DynamoDB/SQS call
TARGET_SECONDS = 0.100
ESM_BATCH = WORKER_BATCH

# Lambda gives a function CPU in proportion to its memory: one vCPU at 1,769 MB.
LAMBDA_MB_PER_VCPU = 1769
DISPATCHER_IO_CONCURRENCY = 16  # the dispatcher's calls in flight (Dispatcher.io_concurrency)


def billed_seconds(
    *, cpu_seconds: float, aws_calls: float, memory_gb: float, concurrency: float = 1, fixed_seconds: float = 0.0
) -> float:
    """What Lambda bills for work that used ``cpu_seconds`` of CPU (measured here, on a full core) and made
    ``aws_calls`` calls ``concurrency`` at a time, plus ``fixed_seconds`` of waiting (a target's duration):
    the CPU stretched to the function's share of a vCPU, the calls' latency, never below zero."""
    share = min(1.0, memory_gb * 1000 / LAMBDA_MB_PER_VCPU)
    return (
        max(0.0, cpu_seconds) / share
        + max(0.0, aws_calls) / max(1.0, concurrency) * AWS_CALL_SECONDS
        + max(0.0, fixed_seconds)
    )


@dataclass
class Scenario:
    name: str
    runs: int = 0
    ticks: int = 0
    worker_compute_seconds: float = 0.0
    dispatcher_compute_seconds: float = 0.0
    messages_delivered: int = 0
    dispatcher_calls: int = 0
    retention: tuple[float, float] = (0.0, 0.0)  # write and read units a run, to delete it once kept


def run_scenario(
    name: str,
    expression: str,
    jobs: int,
    steps: int,
    step: timedelta,
    start: str,
    *,
    quick_audits: bool = False,
    worker_instances: int = 1,
) -> tuple[Scenario, Meter]:
    """``quick_audits``: the dispatcher reads its classes' backlogs, as deployed (``wiring``), so a quiet class's
    sent instants are audited 4 minutes after their fire time, at a visit of their own where the job's next one
    comes later (an hourly job's: one more visit a run). ``worker_instances``: ``spread_batches``."""
    clock = Clock(start)
    lambdas = FakeLambdas(functions={"echo": lambda event: {"ok": True}})
    stack = Stack(clock, lambdas)
    if quick_audits:
        stack.dispatcher.backlogs = stack.queues
    stack.subscribe_as_deployed()  # the SLO ledger and the job's baseline, as wiring.metered_runs subscribes them
    if worker_instances > 1:
        spread_batches(stack, worker_instances)
    meter = Meter({stack.jobs_table: JOBS_TABLE, stack.runs_table: RUNS_TABLE})
    stack.tick()  # a deployment already running: its first tick's read of the whole timing wheel is behind it
    for index in range(jobs):
        spec = stack.register(
            {
                "name": f"{name}-{index:04d}",
                "team": "bench",
                "schedule": {"expression": expression},
                "target": {"type": "lambda", "function": "echo", "payload": {"n": index}},
            }
        )
        # Jobs that have run for weeks (a cost per million runs is a settled job's): the baseline full, each job
        # learning at its own runs, as jobs registered at different times do (the first eight runs of a new job
        # each learn: `scripts/bench_anomaly.py` counts them). Learned from runs as they go here: the echo takes
        # no time, and a run starts as late as the scenario's pace delivers it (an hourly step: 59 minutes).
        first = first_fire(spec, registered_at=clock(), after=clock(), company=NO_COMPANY)
        gap = schedule_gap(spec, clock())
        assert first is not None and gap is not None  # the scenarios' jobs are scheduled
        late = max(0.0, (clock() + step - first).total_seconds())
        baseline = settled_baseline(timedelta(seconds=gap), first, index, seconds=0.0, late=late)
        stack.jobs.put_health(spec.key, baseline=baseline)
    meter.wrap(stack.dynamodb, "dynamodb")
    meter.wrap(stack.sqs, "sqs")
    scenario = Scenario(name)
    for _ in range(steps):
        # Our CPU: the process's CPU over the step less moto's, measured in the calling threads (a wall-clock
        # difference went negative when the dispatcher had 16 calls in flight).
        began, calls_before, moto_before = time.process_time(), meter.calls, meter.aws_cpu_seconds
        stack.tick()
        scenario.dispatcher_compute_seconds += (time.process_time() - began) - (meter.aws_cpu_seconds - moto_before)
        scenario.dispatcher_calls += meter.calls - calls_before
        scenario.ticks += 1
        clock.advance(step)
        began, moto_before = time.process_time(), meter.aws_cpu_seconds
        outcomes = stack.pump()
        scenario.worker_compute_seconds += (time.process_time() - began) - (meter.aws_cpu_seconds - moto_before)
        scenario.messages_delivered += len(outcomes)
    scenario.runs = len(lambdas.calls)
    scenario.retention = retention_per_run(stack, clock, meter, scenario.runs)
    return scenario, meter


def spread_batches(stack: Stack, instances: int, seed: int = 51) -> None:
    """Each delivered batch handled by one of ``instances`` warm worker processes, chosen at random (the event source
    hands batches to instances without affinity): each proves only the ends it wrote itself, so a run's slot is freed
    without a read only where the run before ended on the same instance. Their specs by version are shared: warm
    instances live for hours, and each has read a job's spec once (the scenario lasts minutes)."""
    worker = stack.worker
    rng = random.Random(seed)
    ends = [ProvenEnds() for _ in range(instances)]
    stack.lifecycle.subscribers.remove(worker.proven_ends.heard)
    stack.lifecycle.subscribe(lambda change: worker.proven_ends.heard(change))  # the instance running the batch
    start_batch = worker.start_batch

    def on_an_instance(messages: Any) -> Any:
        worker.proven_ends = rng.choice(ends)
        return start_batch(messages)

    worker.start_batch = on_an_instance  # type: ignore[method-assign]


def retention_per_run(stack: Stack, clock: Clock, meter: Meter, runs: int) -> tuple[float, float]:
    """What deleting the scenario's runs costs once their retention has passed (#51: no TTL, the sweeper): the
    delete write units measured (the sweeper run over the tables, every write metered), and the read units of the
    passes that read a run while it is kept (each pass reads it once: its size's units, modelled, since a Scan's
    bill is the size of the items it reads before its filter, which its answer does not tell)."""
    with meter.paused():
        items = list(every_item(stack.dynamodb, "scan", TableName=stack.runs_table))
    run_bytes = sum(item_size(to_item(values)) for values in items) / max(1, len(items))
    counted = (Counter(meter.write_units), Counter(meter.write_units_by_item), dict(meter.read_units))
    clock.advance(RUN_RETENTION + timedelta(days=1))
    expired = ExpiredItems(stack.jobs_table, stack.runs_table, stack.dynamodb)
    with meter.paused():
        deleted = Sweeper(expired, pages=1000, pass_every=timedelta(0)).sweep(clock()).deleted
    assert deleted >= runs, (deleted, runs)
    runs_table = f"{RUNS_TABLE.logical_name} table"
    delete_units = (meter.write_units[runs_table] - counted[0][runs_table]) / deleted
    # The sweeper's own writes are not the scenario's: its counters as they were.
    meter.write_units, meter.write_units_by_item = counted[0], counted[1]
    meter.read_units = defaultdict(float, counted[2])
    passes = RUN_RETENTION / PASS_EVERY
    return delete_units, passes * run_bytes / 4096 * 0.5


def cost_lines(
    scenario: Scenario, meter: Meter, overhead: TickOverhead | None = None
) -> tuple[list[str], float, float]:
    runs = scenario.runs
    per_run = {key: value / runs for key, value in meter.requests.items()}
    sqs_requests = sum(v for k, v in per_run.items() if k.startswith("sqs."))
    dynamo_calls = sum(v for k, v in per_run.items() if k.startswith("dynamodb."))
    writes = sum(meter.write_units.values()) / runs
    reads = sum(meter.read_units.values()) / runs
    worker_invocations = math.ceil(scenario.messages_delivered / ESM_BATCH) / runs
    # A batch of ten: its records' calls and targets overlap (threads), their CPU does not (one interpreter on
    # the function's share of a vCPU). Per run: the batch's billed time over its runs.
    records = max(1, scenario.messages_delivered)
    batch_seconds = billed_seconds(
        cpu_seconds=scenario.worker_compute_seconds / records * ESM_BATCH,
        aws_calls=dynamo_calls + sqs_requests,
        memory_gb=WORKER_MEMORY_GB,
        fixed_seconds=TARGET_SECONDS,
    )
    worker_gb_s = worker_invocations * batch_seconds * WORKER_MEMORY_GB
    dispatcher_invocations = scenario.ticks / runs
    dispatcher_seconds = billed_seconds(
        cpu_seconds=scenario.dispatcher_compute_seconds,
        aws_calls=scenario.dispatcher_calls,
        memory_gb=DISPATCHER_MEMORY_GB,
        concurrency=DISPATCHER_IO_CONCURRENCY,
    )
    dispatcher_gb_s = dispatcher_seconds / runs * DISPATCHER_MEMORY_GB
    retention_writes, retention_reads = scenario.retention
    costs = {
        "dynamodb writes": writes * PRICE_WRITE_UNIT,
        "dynamodb reads": reads * PRICE_READ_UNIT,
        "dynamodb retention (sweeper)": retention_writes * PRICE_WRITE_UNIT + retention_reads * PRICE_READ_UNIT,
        "sqs requests": sqs_requests * PRICE_SQS_REQUEST,
        "worker lambda": worker_invocations * PRICE_LAMBDA_REQUEST + worker_gb_s * PRICE_GB_SECOND,
        "dispatcher lambda": dispatcher_invocations * PRICE_LAMBDA_REQUEST + dispatcher_gb_s * PRICE_GB_SECOND,
        "target lambda (128 MB, 100 ms)": PRICE_LAMBDA_REQUEST + TARGET_GB_SECONDS * PRICE_GB_SECOND,
    }
    lines = [f"== {scenario.name}: {runs} runs, {scenario.ticks} dispatcher ticks"]
    lines += [f"  requests/run {key:34s} {value:6.3f}" for key, value in sorted(per_run.items())]
    lines += [f"  write units/run {key:31s} {value / runs:6.3f}" for key, value in sorted(meter.write_units.items())]
    lines += [f"  read units/run {key:32s} {value / runs:6.3f}" for key, value in sorted(meter.read_units.items())]
    lines += [
        f"  table write units/run by item: {kind:10s} {units / runs:6.3f}  ({ITEM_KINDS[kind]})"
        for kind, units in sorted(meter.write_units_by_item.items())
    ]
    lines.append(
        f"  retention/run: {retention_writes:.3f} write units (its delete), {retention_reads:.3f} read units (the "
        f"sweeper's passes while it is kept {RUN_RETENTION.days} days, one every {PASS_EVERY.days} days)"
    )
    lines.append(
        f"  lambda invocations/run: worker {worker_invocations:.3f}, dispatcher {dispatcher_invocations:.4f}, target 1"
    )
    record_cpu_ms = scenario.worker_compute_seconds / records * 1000
    ticks = max(1, scenario.ticks)
    lines.append(
        f"  billed: worker batch {batch_seconds * 1000:.0f} ms ({record_cpu_ms:.2f} ms CPU a record), dispatcher "
        f"{dispatcher_seconds / ticks * 1000:.0f} ms a tick ({scenario.dispatcher_compute_seconds / ticks * 1000:.1f}"
        f" ms CPU, {scenario.dispatcher_calls / ticks:.0f} calls)"
    )
    lines += [f"  $/million runs {key:32s} {value * 1e6:7.3f}" for key, value in costs.items()]
    total = sum(costs.values()) * 1e6
    lines.append(f"  $/million runs {'TOTAL':32s} {total:7.3f}")
    if overhead is not None:  # the empty deployment's ticks taken out: what a run costs in a deployment of any size
        own_writes = writes - overhead.write_units * scenario.ticks / runs
        own_reads = reads - overhead.read_units * scenario.ticks / runs
        own = total - (writes - own_writes) * PRICE_WRITE_UNIT * 1e6 - (reads - own_reads) * PRICE_READ_UNIT * 1e6
        lines.append(
            f"  a run's own, without the ticks' fixed work ({overhead.write_units:.2f} write, {overhead.read_units:.2f}"
            f" read units a tick): {own_writes:.3f} write, {own_reads:.3f} read units, ${own:.3f} a million"
        )
    writes, reads = writes + retention_writes, reads + retention_reads
    provisioned = (writes * PROVISIONED_WRITE_UNIT + reads * PROVISIONED_READ_UNIT) * 1e6
    on_demand = (costs["dynamodb writes"] + costs["dynamodb reads"] + costs["dynamodb retention (sweeper)"]) * 1e6
    lines.append(
        f"  (with provisioned DynamoDB at {PROVISIONED_UTILIZATION:.0%} utilization: "
        f"{total - on_demand + provisioned:.3f} $/million runs)"
    )
    lines.append(
        f"  (with -c table_ttl=true, a stage in one region whose TTL deletes expired runs for free: "
        f"{total - retention_writes * PRICE_WRITE_UNIT * 1e6:.3f} $/million runs)"
    )
    return lines, total, total - on_demand + provisioned


# A container run's end comes back as an ECS Task State Change: AWS service events on the default bus are free;
# the rule's delivery is one SQS send to the intake queue, which the events function reads in batches of 10
# (one receive and one delete a batch) in an invocation of about 50 ms at 256 MB.
INTAKE_BATCH = 10
INTAKE_SECONDS = 0.050
# The work itself is the team's bill, printed for scale: Fargate (x86, us-east-1) per vCPU-hour and GB-hour.
FARGATE_VCPU_HOUR, FARGATE_GB_HOUR = US_EAST_1.fargate_vcpu_hour, US_EAST_1.fargate_gb_hour


def container_scenario(runs: int) -> list[str]:
    """ECS container runs through the dispatcher, the worker (RunTask, its record) and the intake (the task's
    state change ends the run): what the scheduler adds to each container run, per request and per unit."""
    from infra.local.containers import team_network
    from infra.local.moto_patches import ecs_awsvpc_tasks, ecs_tasks_run_until_stopped
    from jobsched.core.events import CONTAINER_TRIGGER, EventEnvelope

    ecs_awsvpc_tasks()
    ecs_tasks_run_until_stopped()
    with mock_aws():
        clock = Clock(START)
        stack = Stack(clock, FakeLambdas(functions={}))
        ec2 = stack.sessions.client("bench", "ec2")
        network = team_network(ec2, "bench", group="bench")
        ecs = stack.sessions.client("bench", "ecs")
        tags = [{"key": "jobsched-team", "value": "bench"}]
        ecs.create_cluster(clusterName="bench", tags=tags)
        ecs.register_task_definition(
            family="export",
            containerDefinitions=[{"name": "export", "image": "example/export:1", "memory": 512}],
            requiresCompatibilities=["FARGATE"],
            networkMode="awsvpc",
            cpu="256",
            memory="512",
            tags=tags,
        )
        jobs = 20
        for index in range(jobs):
            stack.register(
                {
                    "name": f"export-{index:02d}",
                    "team": "bench",
                    "schedule": {"expression": MINUTELY},
                    "target": {
                        "type": "ecs",
                        "cluster": "bench",
                        "task_definition": "export",
                        "launch_type": "FARGATE",
                        "network": network,
                        "container": {"name": "export", "command": ["export"]},
                    },
                }
            )
        meter = Meter({stack.jobs_table: JOBS_TABLE, stack.runs_table: RUNS_TABLE})
        meter.wrap(stack.dynamodb, "dynamodb")
        meter.wrap(stack.sqs, "sqs")
        meter.wrap(ecs, "ecs")
        ended = 0
        for _ in range(max(1, runs // jobs)):
            stack.tick()
            clock.advance(timedelta(minutes=1))
            stack.pump()
            arns = ecs.list_tasks(cluster="bench", desiredStatus="RUNNING")["taskArns"]
            for task in ecs.describe_tasks(cluster="bench", tasks=arns)["tasks"] if arns else []:
                with meter.paused():
                    ecs.stop_task(cluster="bench", task=task["taskArn"], reason="done")
                detail = json.loads(json.dumps(task, default=str)) | {
                    "lastStatus": "STOPPED",
                    "stopCode": "EssentialContainerExited",
                    "containers": [{"name": "export", "exitCode": 0}],
                }
                event = {"source": "aws.ecs", "detail-type": "ECS Task State Change", "detail": detail}
                envelope = EventEnvelope.model_validate(
                    {"jobsched": {"job": "", "trigger": CONTAINER_TRIGGER}, "event": event}
                )
                ended += stack.intake.receive(envelope, now=clock()).action == "ended"
        retention_writes, retention_reads = retention_per_run(stack, clock, meter, ended)
    per_run = {key: value / ended for key, value in meter.requests.items()}
    writes = sum(meter.write_units.values()) / ended
    reads = sum(meter.read_units.values()) / ended
    sqs = sum(v for k, v in per_run.items() if k.startswith("sqs.")) + 1 + 2 / INTAKE_BATCH
    # A batch of ten runs concurrently: its invocation lasts about one record's time (its calls and 10 ms of
    # compute), shared by the ten runs.
    worker_s = (sum(per_run.values()) * AWS_CALL_SECONDS + 0.010) / ESM_BATCH
    costs = {
        "dynamodb writes": writes * PRICE_WRITE_UNIT,
        "dynamodb reads": reads * PRICE_READ_UNIT,
        "dynamodb retention (sweeper)": retention_writes * PRICE_WRITE_UNIT + retention_reads * PRICE_READ_UNIT,
        "sqs requests (work queue, intake)": sqs * PRICE_SQS_REQUEST,
        "worker lambda": PRICE_LAMBDA_REQUEST / ESM_BATCH + worker_s * WORKER_MEMORY_GB * PRICE_GB_SECOND,
        "events lambda (the state change)": PRICE_LAMBDA_REQUEST / INTAKE_BATCH
        + INTAKE_SECONDS * WORKER_MEMORY_GB * PRICE_GB_SECOND,
        "ecs api calls (RunTask, ListTasks)": 0.0,
    }
    total = sum(costs.values()) * 1e6
    fargate = (0.25 * FARGATE_VCPU_HOUR + 0.5 * FARGATE_GB_HOUR) * (10 / 60)
    lines = [f"== container runs (ECS, Fargate): {ended} runs ended by their task's state change"]
    lines += [f"  requests/run {key:34s} {value:6.3f}" for key, value in sorted(per_run.items())]
    lines += [f"  write units/run {key:31s} {value / ended:6.3f}" for key, value in sorted(meter.write_units.items())]
    lines += [f"  read units/run {key:32s} {value / ended:6.3f}" for key, value in sorted(meter.read_units.items())]
    lines += [f"  $/million runs {key:32s} {value * 1e6:7.3f}" for key, value in costs.items()]
    lines.append(f"  $/million runs {'TOTAL (the scheduler)':32s} {total:7.3f}")
    lines.append(
        f"  for scale, the task itself (the team's bill): 0.25 vCPU, 0.5 GB for 10 min on Fargate = "
        f"${fargate * 1e6:,.0f} per million runs"
    )
    lines.append(f"container_run_cost_per_million_usd={total:.3f}")
    return lines


def offline_environment() -> None:
    """What boto3 and Powertools need in a benchmark against moto: fake credentials, a region, no tracing."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(name, value)
    os.environ["POWERTOOLS_TRACE_DISABLED"] = "true"


def main() -> None:
    parser = argparse.ArgumentParser(description="Cost per million runs of the pipeline, against moto.")
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--dag-runs", type=int, default=10, help="runs of the 5-task DAG (0: skip)")
    parser.add_argument("--skip-idle", action="store_true", help="leave out the idle deployment's monthly cost")
    parser.add_argument("--container-runs", type=int, default=200, help="ECS container runs (0: skip)")
    parser.add_argument(
        "--deployed-audits", action="store_true", help="also the two scenarios with quick audits, as deployed"
    )
    parser.add_argument(
        "--worker-instances", type=int, default=1, help="warm worker instances sharing the batches (1: one process)"
    )
    args = parser.parse_args()
    offline_environment()
    half = args.runs // 2
    # Minutely jobs: 50 jobs over half/50 minutes. Hourly jobs: 50 jobs over half/50 hours, ticked at :59.
    jobs = 50
    steps = {"minutely": (MINUTELY, timedelta(minutes=1)), "hourly": (HOURLY, timedelta(hours=1))}
    results = []
    for name, (expression, step) in steps.items():
        with mock_aws():
            results.append(run_scenario(name, expression, jobs, half // jobs, step, START,
                                        worker_instances=args.worker_instances))  # fmt: skip
    deployed = []
    if args.deployed_audits:
        # The same two, with the dispatcher's quick audits as deployed, ticking every minute as deployed (the
        # hourly scenario above ticks once an hour, so an audit's visit of its own cannot happen there).
        for name, (expression, step) in steps.items():
            with mock_aws():
                scenario, meter = run_scenario(name, expression, jobs, step // timedelta(minutes=1) * half // jobs,
                                               timedelta(minutes=1), START, quick_audits=True,
                                               worker_instances=args.worker_instances)  # fmt: skip
            scenario.name += ", quick audits as deployed"
            deployed.append((scenario, meter))
    totals = []
    overheads = {step: tick_overhead(step, START) for _, step in steps.values()}
    for scenario, meter in results:
        lines, total, provisioned = cost_lines(scenario, meter, overheads[steps[scenario.name][1]])
        print("\n".join(lines))
        totals.append((scenario.runs, total, provisioned))
    if args.dag_runs:
        print("\n".join(dag_scenario(args.dag_runs)))
        print("\n".join(pipeline_scenario(args.dag_runs)))
    if args.container_runs:
        print("\n".join(container_scenario(args.container_runs)))
    deployed_totals = []
    for scenario, meter in deployed:
        lines, total, provisioned = cost_lines(scenario, meter, overheads[timedelta(minutes=1)])
        print("\n".join(lines))
        deployed_totals.append((scenario.runs, total))
    if deployed_totals:
        as_deployed = sum(runs * total for runs, total in deployed_totals) / sum(runs for runs, _ in deployed_totals)
        print(f"cost_per_million_runs_deployed_audits_usd={as_deployed:.3f}")
    runs_in_all = sum(runs for runs, _, _ in totals)
    blended = sum(runs * total for runs, total, _ in totals) / runs_in_all
    blended_provisioned = sum(runs * provisioned for runs, _, provisioned in totals) / runs_in_all
    print(
        f"assumptions: worker batches of {ESM_BATCH} processed concurrently, {WORKER_MEMORY_GB * 1000:.0f} MB arm64; "
        f"{AWS_CALL_SECONDS * 1000:.0f} ms per AWS call; fixed per-tick costs amortized over these runs"
    )
    print(f"cost_per_million_runs_usd={blended:.3f}")
    print(f"cost_per_million_runs_provisioned_usd={blended_provisioned:.3f}")
    if not args.skip_idle:
        print("\n".join(idle_cost_report()))


if __name__ == "__main__":
    main()
