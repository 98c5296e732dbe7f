"""The tables in the template (#51's global tables and the previous ones), their capacity and their sizing for
bursts; what an idle stage pays for."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from jobsched.core.names import JOBS_TABLE, RUNS_TABLE, TABLE_GENERATION, Env
from tests.infra.templates import (
    TABLE_KINDS,
    Template,
    replica,
    resources,
    table,
)


def test_tables_match_the_one_definition(dev: Template) -> None:
    """The global tables (#51) and, kept while a stage deployed before moves onto them, the previous ones."""
    template, _ = dev
    for definition, generation in itertools.product((JOBS_TABLE, RUNS_TABLE), (TABLE_GENERATION, "")):
        props = table(template, f"-{definition.logical_name}{generation}")
        assert props["KeySchema"] == [
            {"AttributeName": definition.partition_key[0], "KeyType": "HASH"},
            {"AttributeName": definition.sort_key[0], "KeyType": "RANGE"},
        ]
        indexes = {i["IndexName"]: i for i in props["GlobalSecondaryIndexes"]}
        assert set(indexes) == {index.name for index in definition.indexes}
        for index in definition.indexes:
            keys = [k["AttributeName"] for k in indexes[index.name]["KeySchema"]]
            assert keys == [index.partition_key[0], index.sort_key[0]]
            assert indexes[index.name]["Projection"]["ProjectionType"] == index.projection
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        assert replica(props)["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
        assert props["SSESpecification"]["SSEEnabled"] is True and props["SSESpecification"]["SSEType"] == "KMS"
        key = replica(props).get("SSESpecification", props["SSESpecification"])["KMSMasterKeyId"]
        assert key["Fn::GetAtt"][0].startswith("Key")  # the stack's own key
        assert "TimeToLiveSpecification" not in props  # #51: the sweeper keeps retention (watch.retention)
    [global_jobs] = [p for p in resources(template, "AWS::DynamoDB::GlobalTable").values() if "Jobs" in p["TableName"]]
    assert [r["Region"] for r in global_jobs["Replicas"]] == [{"Ref": "AWS::Region"}]  # one replica, here (#51)


def test_prod_retains_and_protects_tables_and_has_no_examples(dev: Template, prod: Template) -> None:
    for definition, generation in itertools.product((JOBS_TABLE, RUNS_TABLE), (TABLE_GENERATION, "")):
        name = f"-{definition.logical_name}{generation}"
        props = table(prod[0], name)
        assert replica(props)["DeletionProtectionEnabled"] is True
        assert props["_r"]["DeletionPolicy"] == "Retain"
        assert table(dev[0], name)["_r"]["DeletionPolicy"] == "Delete"

    def names(template: dict[str, Any]) -> set[str]:
        return {p.get("FunctionName", "") for p in resources(template, "AWS::Lambda::Function").values()}

    assert "jobsched-example-echo" in names(dev[0]) and "jobsched-example-echo" not in names(prod[0])


def test_a_stage_moved_onto_its_global_tables_drops_the_previous_ones_when_asked(dev: Template, tmp_path: Path) -> None:
    """Every function names the previous tables while the stage carries them (its move may be under way), and
    may reach both generations; `-c previous_tables=false` leaves them out (the release after the move)."""
    from tests.infra.conftest import synthesize

    functions = resources(dev[0], "AWS::Lambda::Function").values()
    variables = [
        f["Environment"]["Variables"]
        for f in functions
        if Env.JOBS_TABLE in f.get("Environment", {}).get("Variables", {})
    ]
    assert variables and all(Env.PREVIOUS_JOBS_TABLE in v and Env.PREVIOUS_RUNS_TABLE in v for v in variables)
    template, _ = synthesize(tmp_path, stage="dev", previous_tables="false")
    assert (
        not resources(template, "AWS::DynamoDB::Table") and len(resources(template, "AWS::DynamoDB::GlobalTable")) == 2
    )
    for function in resources(template, "AWS::Lambda::Function").values():
        assert Env.PREVIOUS_JOBS_TABLE not in function.get("Environment", {}).get("Variables", {})


def test_provisioned_capacity_from_context_scales_every_table_and_index(tmp_path: Path) -> None:
    """For big deployments: -c dynamodb_capacity='{...}' makes both tables and every index provisioned, each
    read and write dimension auto scaled to its target utilisation; cdk-nag still passes. Malformed: refused."""
    from aws_cdk import App

    from infra.config import StageConfig
    from tests.infra.conftest import synthesize

    capacity = '{"write": {"min": 50, "max": 20000}, "target_utilization": 60}'
    context = {"stage": "prod", "dynamodb_capacity": capacity, "table_ttl": "true"}
    template, folder = synthesize(tmp_path, **context)
    tables = resources(template, "AWS::DynamoDB::Table").values()  # the previous ones
    global_tables = resources(template, "AWS::DynamoDB::GlobalTable").values()
    # -c table_ttl=true (a stage that stays in one region): DynamoDB deletes expired items for free.
    ttl = {"AttributeName": "expires_at", "Enabled": True}
    assert all(t["TimeToLiveSpecification"] == ttl for t in [*tables, *global_tables]) and len(global_tables) == 2
    for global_table in global_tables:
        scaled = global_table["WriteProvisionedThroughputSettings"]["WriteCapacityAutoScalingSettings"]
        assert (scaled["MinCapacity"], scaled["MaxCapacity"]) == (50, 20000)
        assert scaled["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == 60
        [replica] = global_table["Replicas"]
        reads = replica["ReadProvisionedThroughputSettings"]["ReadCapacityAutoScalingSettings"]
        assert (reads["MinCapacity"], reads["MaxCapacity"]) == (5, 4000)
        assert len(replica["GlobalSecondaryIndexes"]) == len(global_table["GlobalSecondaryIndexes"])
    indexes = [index for table in tables for index in table.get("GlobalSecondaryIndexes", [])]
    assert len(tables) == 2 and indexes
    for provisioned in [*tables, *indexes]:
        assert provisioned.get("BillingMode", "PROVISIONED") == "PROVISIONED"
        assert provisioned["ProvisionedThroughput"]["WriteCapacityUnits"] == 50
    targets = resources(template, "AWS::ApplicationAutoScaling::ScalableTarget").values()
    assert len(targets) == 2 * (len(tables) + len(indexes))
    assert {t["ScalableDimension"] for t in targets} == {
        f"dynamodb:{kind}:{unit}CapacityUnits" for kind in ("table", "index") for unit in ("Read", "Write")
    }
    assert {t["MaxCapacity"] for t in targets if "Write" in t["ScalableDimension"]} == {20000}
    policies = resources(template, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
    assert {p["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] for p in policies} == {60}
    report = json.loads((folder / "validation-report.json").read_text())
    assert [v for plugin in report.get("pluginReports", []) for v in plugin.get("violations", [])] == []
    assert StageConfig.from_context(App()).capacity is None  # on demand unless asked
    for bad in ('{"write": {"min": 10, "max": 5}}', '{"target_utilization": 99}', '{"writes": {}}'):
        with pytest.raises(ValueError, match="dynamodb_capacity"):
            StageConfig.from_context(App(context={"dynamodb_capacity": bad}))


def test_a_deployment_sized_for_bursts_fans_the_tick_out_and_warms_its_tables(tmp_path: Path) -> None:
    """-c dispatchers=7 -c due_shards=64 -c warm_throughput -c worker_concurrency -c work_queues=3 and memory:
    seven rule targets (five per rule) each naming its part, every function told the shard count, the
    dispatcher's reserved concurrency two per part, both tables and their indexes warmed, three normal queues
    each with an event source allowed 500, sharing one DLQ, each alarmed; cdk-nag passes. Out-of-range values
    are refused at synth."""
    from aws_cdk import App

    from infra.config import StageConfig
    from jobsched.core.names import Env
    from tests.infra.conftest import synthesize

    context = {
        "stage": "prod",
        "dispatchers": "7",
        "due_shards": "64",
        "warm_throughput": '{"reads": 12000, "writes": 40000}',
        "worker_concurrency": '{"normal": 500}',
        "worker_memory": "1769",
        "dispatcher_memory": "1769",
        "work_queues": "3",
    }
    template, folder = synthesize(tmp_path, **context)
    rules = {
        name: rule
        for name, rule in resources(template, "AWS::Events::Rule").items()
        if "DispatcherTick" in json.dumps(rule.get("Name", ""))
    }
    targets = [target for rule in rules.values() for target in rule["Targets"]]
    assert len(rules) == 2 and sorted(len(rule["Targets"]) for rule in rules.values()) == [2, 5]
    assert sorted(json.loads(target["Input"])["part"] for target in targets) == list(range(7))
    assert {json.loads(target["Input"])["parts"] for target in targets} == {7}
    functions = resources(template, "AWS::Lambda::Function")
    dispatcher = next(f for name, f in functions.items() if name.startswith("FunctionsDispatcher"))
    assert dispatcher["ReservedConcurrentExecutions"] == 14 and dispatcher["MemorySize"] == 1769
    worker = next(f for name, f in functions.items() if name.startswith("FunctionsWorker"))
    assert worker["MemorySize"] == 1769
    for function in functions.values():
        variables = function.get("Environment", {}).get("Variables", {})
        if Env.JOBS_TABLE in variables:
            assert variables[Env.DUE_SHARDS] == "64"
    warmed = {"ReadUnitsPerSecond": 12000, "WriteUnitsPerSecond": 40000}
    for kind in TABLE_KINDS:
        for props in resources(template, kind).values():
            assert props["WarmThroughput"] == warmed
            # Each index has its own throughput (and throttles the table's writes when short of it).
            assert [index.get("WarmThroughput") for index in props["GlobalSecondaryIndexes"]] == [warmed] * len(
                props["GlobalSecondaryIndexes"]
            )
    concurrency = sorted(
        mapping["ScalingConfig"]["MaximumConcurrency"]
        for mapping in resources(template, "AWS::Lambda::EventSourceMapping").values()
        if "ScalingConfig" in mapping
    )
    assert concurrency.count(500) == 3, "three normal queues, each its own event source"
    queue_names = [json.dumps(q.get("QueueName")) for q in resources(template, "AWS::SQS::Queue").values()]
    assert sum("WorkNormal" in name and "dlq" not in name for name in queue_names) == 3
    assert sum("WorkNormal-dlq" in name for name in queue_names) == 1, "the shards share the class's DLQ"
    worker_variables = worker["Environment"]["Variables"]
    assert Env.WORK_QUEUE_SHARDS in worker_variables
    alarms = json.dumps([a.get("AlarmName") for a in resources(template, "AWS::CloudWatch::Alarm").values()])
    assert "OldestMessageNormal3" in alarms
    report = json.loads((folder / "validation-report.json").read_text())
    assert [v for plugin in report.get("pluginReports", []) for v in plugin.get("violations", [])] == []
    assert StageConfig.from_context(App()).burst.dispatchers == 1
    for key, bad in (
        ("dispatchers", "0"),
        ("dispatchers", "65"),
        ("due_shards", "4"),
        ("warm_throughput", '{"write": 5}'),
        ("worker_concurrency", '{"normal": 5000}'),
        ("worker_concurrency", '{"urgent": 50}'),
        ("worker_memory", "64"),
        ("work_queues", "17"),
    ):
        with pytest.raises(ValueError, match=key):
            StageConfig.from_context(App(context={key: bad}))


def test_an_idle_non_prod_stage_pays_for_no_dashboards_traces_or_zero_counts(tmp_path: Path) -> None:
    """What scripts/idle_cost.py prices: a non-prod stage leaves out dashboards, X-Ray and zero-valued
    counts unless asked (-c dashboards=true ...); prod and the local stage keep them. Alarms stay in both."""
    from tests.infra.conftest import synthesize

    template, _ = synthesize(tmp_path / "qa", stage="qa")
    assert not resources(template, "AWS::CloudWatch::Dashboard")
    functions = resources(template, "AWS::Lambda::Function").values()
    assert all(f.get("TracingConfig", {}).get("Mode") != "Active" for f in functions)
    ours = [
        f["Environment"]["Variables"]
        for f in functions
        if Env.JOBS_TABLE in f.get("Environment", {}).get("Variables", {})
    ]
    assert ours and {variables[Env.ZERO_METRICS] for variables in ours} == {"off"}
    assert (
        len(resources(template, "AWS::CloudWatch::Alarm")) == 40
    )  # alarms cost nothing while idle (no data, not breaching)
    prod, _ = synthesize(tmp_path / "prod", stage="prod")
    assert len(resources(prod, "AWS::CloudWatch::Dashboard")) == 4
    prod_functions = resources(prod, "AWS::Lambda::Function").values()
    assert all(f["TracingConfig"]["Mode"] == "Active" for f in prod_functions if "Environment" in f)
    prod_ours = [
        f["Environment"]["Variables"]
        for f in prod_functions
        if Env.JOBS_TABLE in f.get("Environment", {}).get("Variables", {})
    ]
    assert {variables[Env.ZERO_METRICS] for variables in prod_ours} == {"on"}
