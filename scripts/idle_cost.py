"""What a deployment with no jobs costs per month, item by item, for a non-prod and a prod stage.

Nothing here is a constant guessed per stage: the resources are counted in the synthesized template of
each stage (keys, secrets, alarms and the metrics they read, dashboards, web ACL rules, scheduled
functions, queue pollers), and the work of one idle tick is measured by running the real dispatcher and
heartbeat handlers against moto with no jobs: DynamoDB requests, the custom metrics they publish (each a
metric CloudWatch bills per month) and the bytes they log. Prices: us-east-1 list prices, no free tier:
- CloudWatch: $0.10 per alarm metric per month (a metric-math alarm pays for each metric it reads),
  $3 per dashboard per month, $0.30 per custom metric per month, $0.50 per GB of logs ingested.
- KMS: $1 per key per month. Secrets Manager: $0.40 per secret per month.
- WAF: $5 per web ACL and $1 per rule per month.
- Lambda (arm64): $0.20 per million requests and $0.0000133334 per GB-second; X-Ray $5 per million
  traces (ticks are traced when tracing is on).
- DynamoDB on demand: $0.125 per million read units (a Query reads at least 0.5 unit, eventually
  consistent; 1 when consistent).
- SQS: $0.40 per million requests. An SQS event source mapping keeps long-polling its queue while it
  is empty: modelled as 5 pollers each making a 20-second long poll, 3 requests a minute each
  (AWS Lambda docs, "Using Lambda with Amazon SQS": Lambda polls with five parallel connections to start).

Run alone: ``python scripts/idle_cost.py`` (``scripts/bench_pipeline.py`` prints the same lines last).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobsched.core.prices import US_EAST_1

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MINUTES_PER_MONTH = 43_200
PRICE_ALARM_METRIC = 0.10
PRICE_DASHBOARD = 3.00
PRICE_CUSTOM_METRIC = 0.30
PRICE_LOG_GB = 0.50
PRICE_KMS_KEY = 1.00
PRICE_SECRET = 0.40
PRICE_WEB_ACL = 5.00
PRICE_WAF_RULE = 1.00
PRICE_LAMBDA_REQUEST = US_EAST_1.function_request
PRICE_GB_SECOND = US_EAST_1.function_gb_second_arm
PRICE_TRACE = 5e-6
PRICE_READ_UNIT = US_EAST_1.read_unit
PRICE_WRITE_UNIT = US_EAST_1.write_unit
PRICE_SQS_REQUEST = US_EAST_1.queue_request
ESM_POLLERS = 5
POLLS_PER_MINUTE = 3  # 20-second long polls


@dataclass(frozen=True)
class IdleTick:
    """One idle invocation of a scheduled handler, as measured."""

    seconds: float
    read_units: float
    metrics: frozenset[str]
    log_bytes: int
    write_units: float = 0.0


def resources(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r.get("Properties", {}) for r in template["Resources"].values() if r["Type"] == kind]


def alarm_metrics(alarm: dict[str, Any]) -> int:
    if "MetricName" in alarm:
        return 1
    return sum(1 for query in alarm.get("Metrics", []) if "MetricStat" in query)


def measure_idle_ticks(template: dict[str, Any]) -> dict[str, IdleTick]:
    """Run the dispatcher and heartbeat handlers once each against an empty moto stack, with the stage's own
    setting for zero counts (read from the template's function environment)."""
    from jobsched.core.names import Env

    zero_metrics = {
        variables.get(Env.ZERO_METRICS)
        for function in resources(template, "AWS::Lambda::Function")
        for variables in [function.get("Environment", {}).get("Variables", {})]
        if Env.JOBS_TABLE in variables
    }
    os.environ[Env.ZERO_METRICS] = "off" if zero_metrics == {"off"} else "on"
    from moto import mock_aws

    for name, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }.items():
        os.environ.setdefault(name, value)
    measured: dict[str, IdleTick] = {}
    with mock_aws():
        from jobsched import wiring
        from tests.aws.harness import Clock, FakeContext, Stack

        stack = Stack(Clock("2027-01-04T09:00:00Z"))
        os.environ.update(stack.handler_environment())
        wiring.reset()
        from functions.dispatcher import handler as dispatcher
        from functions.heartbeat import handler as heartbeat
        from jobsched.adapters.aws.clients import client

        counted = {"units": 0.0, "writes": 0.0}

        def count(model: Any, params: Any, **_: Any) -> None:
            if model.name in ("Query", "GetItem", "Scan"):
                counted["units"] += 1.0 if params.get("ConsistentRead") else 0.5
            elif model.name == "BatchGetItem":
                counted["units"] += 0.5 * sum(len(v["Keys"]) for v in params["RequestItems"].values())
            elif model.name in ("PutItem", "UpdateItem", "DeleteItem"):
                counted["writes"] += 1.0  # the timing wheel's marks (#51): one small item a tick

        client("dynamodb").meta.events.register("provide-client-params.dynamodb", count)
        event = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
        for name, handler in (("dispatcher", dispatcher.handler), ("heartbeat", heartbeat.handler)):
            handler(event, FakeContext())  # warm: a tick every minute keeps the function warm
            counted["units"] = counted["writes"] = 0.0
            with tempfile.TemporaryFile() as captured:
                # At the descriptor: the handlers' loggers hold the stdout they were created with.
                sys.stdout.flush()
                saved = os.dup(1)
                os.dup2(captured.fileno(), 1)
                try:
                    started = time.process_time()
                    handler(event, FakeContext())
                    seconds = time.process_time() - started
                    sys.stdout.flush()
                finally:
                    os.dup2(saved, 1)
                    os.close(saved)
                captured.seek(0)
                output = captured.read()
            lines = output.decode(errors="replace").splitlines()
            metrics = frozenset(
                metric["Name"]
                for line in lines
                if '"CloudWatchMetrics"' in line
                for block in json.loads(line)["_aws"]["CloudWatchMetrics"]
                for metric in block["Metrics"]
            )
            measured[name] = IdleTick(seconds, counted["units"], metrics, len(output), counted["writes"])
        wiring.reset()
    return measured


def synthesize(stage: str) -> dict[str, Any]:
    import aws_cdk as cdk

    from infra.app import build

    outdir = tempfile.mkdtemp(prefix=f"idle-{stage}-")
    app = cdk.App(context={"stage": stage, "account": "123456789012", "region": "us-east-1"}, outdir=outdir)
    stack = build(app)
    app.synth()
    template: dict[str, Any] = json.loads((Path(outdir) / f"{stack.stack_name}.template.json").read_text())
    return template


def idle_items(template: dict[str, Any], ticks: dict[str, IdleTick]) -> dict[str, float]:
    functions = resources(template, "AWS::Lambda::Function")
    memory = {f.get("FunctionName"): f.get("MemorySize", 128) / 1024 for f in functions}
    traced = any(f.get("TracingConfig", {}).get("Mode") == "Active" for f in functions)
    rules = [
        r for r in resources(template, "AWS::Events::Rule") if "rate(1 minute)" in str(r.get("ScheduleExpression"))
    ]
    gb = max(memory.values(), default=0.25)
    items: dict[str, float] = {}
    lambda_cost = sum(
        MINUTES_PER_MONTH * (PRICE_LAMBDA_REQUEST + tick.seconds * gb * PRICE_GB_SECOND) for tick in ticks.values()
    )
    items[f"ticks: {len(rules)} rules a minute, Lambda requests and duration"] = lambda_cost
    items["ticks: DynamoDB reads of idle ticks"] = sum(
        MINUTES_PER_MONTH * tick.read_units * PRICE_READ_UNIT for tick in ticks.values()
    )
    items["ticks: DynamoDB writes of idle ticks (the timing wheel's marks)"] = sum(
        MINUTES_PER_MONTH * tick.write_units * PRICE_WRITE_UNIT for tick in ticks.values()
    )
    items["ticks: X-Ray traces"] = MINUTES_PER_MONTH * len(ticks) * PRICE_TRACE if traced else 0.0
    mappings = resources(template, "AWS::Lambda::EventSourceMapping")
    items[f"queue pollers: {len(mappings)} event source mappings long-polling"] = (
        len(mappings) * ESM_POLLERS * POLLS_PER_MINUTE * MINUTES_PER_MONTH * PRICE_SQS_REQUEST
    )
    keys = resources(template, "AWS::KMS::Key")
    items[f"keys: {len(keys)} KMS key(s)"] = len(keys) * PRICE_KMS_KEY
    alarms = resources(template, "AWS::CloudWatch::Alarm")
    alarm_units = sum(alarm_metrics(alarm) for alarm in alarms)
    items[f"alarms: {len(alarms)} alarms reading {alarm_units} metrics"] = alarm_units * PRICE_ALARM_METRIC
    dashboards = resources(template, "AWS::CloudWatch::Dashboard")
    items[f"dashboards: {len(dashboards)}"] = len(dashboards) * PRICE_DASHBOARD
    metrics = frozenset().union(*(tick.metrics for tick in ticks.values()))
    items[f"custom metrics: {len(metrics)} published by every idle tick"] = len(metrics) * PRICE_CUSTOM_METRIC
    secrets = resources(template, "AWS::SecretsManager::Secret")
    items[f"secrets: {len(secrets)}"] = len(secrets) * PRICE_SECRET
    acls = resources(template, "AWS::WAFv2::WebACL")
    waf_rules = sum(len(acl.get("Rules", [])) for acl in acls)
    items[f"WAF: {len(acls)} web ACL(s), {waf_rules} rules"] = len(acls) * PRICE_WEB_ACL + waf_rules * PRICE_WAF_RULE
    log_bytes = sum(tick.log_bytes for tick in ticks.values()) * MINUTES_PER_MONTH
    items[f"logs: {log_bytes / 1e6:.0f} MB a month from idle ticks"] = log_bytes / 1e9 * PRICE_LOG_GB
    return items


def report() -> list[str]:
    lines = ["== idle deployment (no jobs), per month"]
    totals = {}
    for stage, label in (("dev", "non-prod (dev)"), ("prod", "prod")):
        template = synthesize(stage)
        ticks = measure_idle_ticks(template)
        items = idle_items(template, ticks)
        lines.append(
            f"  {label}: "
            + ", ".join(
                f"{name} tick {tick.seconds * 1000:.0f} ms CPU, {tick.read_units:g} read units, "
                f"{tick.write_units:g} write units, "
                f"{len(tick.metrics)} metrics, {tick.log_bytes} B logged"
                for name, tick in ticks.items()
            )
        )
        lines += [f"    {name:62s} ${cost:7.2f}" for name, cost in items.items()]
        totals[stage] = sum(items.values())
        lines.append(f"    {'total':62s} ${totals[stage]:7.2f}")
    lines.append(f"idle_cost_per_month_usd={totals['dev']:.2f}")
    lines.append(f"idle_cost_per_month_prod_usd={totals['prod']:.2f}")
    return lines


if __name__ == "__main__":
    os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "1")
    print("\n".join(report()))
