"""Suite-wide: two speed-ups for moto-backed tests, and the time each test layer takes, printed at the end of
every run (issue #16 asks for it)."""

from __future__ import annotations

import functools
from collections import defaultdict
from typing import Any

import botocore.session

from infra.local.moto_patches import (
    batch_jobs_run_until_stopped,
    bucket_notifications_name_eventbridge,
    direct_dynamodb_responses,
    ecs_awsvpc_tasks,
    ecs_tasks_run_until_stopped,
    eventbridge_as_aws,
)

# moto's DynamoDB responses written directly (infra/local/moto_patches.py explains and checks it).
direct_dynamodb_responses()
# EventBridge delivering events (PutEvents, S3 notifications) as AWS does: the local runtime's moto has it too.
eventbridge_as_aws()
# A bucket's notification configuration names its EventBridgeConfiguration, as AWS does (moto_patches).
bucket_notifications_name_eventbridge()
# moto's RunTask of awsvpc (Fargate) tasks answered 500 (infra/local/moto_patches.py).
ecs_awsvpc_tasks()
# A task stays RUNNING until it exits or is stopped, not until it is described four times (moto_patches).
ecs_tasks_run_until_stopped()
# A Batch job runs until it is terminated, not in Docker, nor succeeding at once (moto_patches).
batch_jobs_run_until_stopped()
# Every test starts from fresh clients (moto resets boto3's session; ours are rebuilt), and each new botocore
# session parsed the service models' JSON again: 0.3 s of every test's setup. One loader for the process
# (it only reads botocore's data files, and caches what it read) makes a new session cheap.
botocore.session.create_loader = functools.cache(botocore.session.create_loader)

LAYERS = ("unit", "contract", "infra", "aws", "e2e")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    seconds: defaultdict[str, float] = defaultdict(float)
    tests: defaultdict[str, set[str]] = defaultdict(set)
    for reports in terminalreporter.stats.values():
        for report in reports:
            nodeid = getattr(report, "nodeid", "")
            parts = nodeid.split("/")
            if len(parts) < 3 or parts[0] != "tests" or parts[1] not in LAYERS:
                continue
            seconds[parts[1]] += getattr(report, "duration", 0.0)
            tests[parts[1]].add(nodeid)
    if not seconds:
        return
    terminalreporter.section("time per test layer (setup + call + teardown, summed over workers)")
    for layer in LAYERS:
        if layer in seconds:
            terminalreporter.write_line(f"{layer:>9}: {len(tests[layer]):4d} tests {seconds[layer]:7.1f} s")
    terminalreporter.write_line(f"{'all':>9}: {sum(map(len, tests.values())):4d} tests {sum(seconds.values()):7.1f} s")
