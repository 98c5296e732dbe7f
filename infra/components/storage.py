"""The two tables (jobs, runs), their keys and indexes from ``jobsched.core.names``."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.components.common import resource_name
from infra.config import StageConfig
from jobsched.core.names import EXPIRES_AT, JOBS_TABLE, RUNS_TABLE, TableDefinition


class Storage(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self.jobs = self._table(JOBS_TABLE, config, key)
        self.runs = self._table(RUNS_TABLE, config, key)

    def _table(self, definition: TableDefinition, config: StageConfig, key: kms.IKey) -> dynamodb.Table:
        def attribute(spec: tuple[str, str]) -> dynamodb.Attribute:
            kind = dynamodb.AttributeType.STRING if spec[1] == "S" else dynamodb.AttributeType.NUMBER
            return dynamodb.Attribute(name=spec[0], type=kind)

        capacity = config.capacity
        table = dynamodb.Table(
            self,
            definition.logical_name,
            table_name=resource_name(config, definition.logical_name),
            partition_key=attribute(definition.partition_key),
            sort_key=attribute(definition.sort_key),
            billing_mode=dynamodb.BillingMode.PROVISIONED if capacity else dynamodb.BillingMode.PAY_PER_REQUEST,
            read_capacity=capacity.read_min if capacity else None,
            write_capacity=capacity.write_min if capacity else None,
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
            encryption_key=key,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=config.prod,
            removal_policy=RemovalPolicy.RETAIN if config.prod else RemovalPolicy.DESTROY,
            time_to_live_attribute=EXPIRES_AT if config.table_ttl else None,  # see StageConfig.table_ttl
        )
        for index in definition.indexes:
            projection = {
                "KEYS_ONLY": dynamodb.ProjectionType.KEYS_ONLY,
                "INCLUDE": dynamodb.ProjectionType.INCLUDE,
                "ALL": dynamodb.ProjectionType.ALL,
            }[index.projection]
            table.add_global_secondary_index(
                index_name=index.name,
                partition_key=attribute(index.partition_key),
                sort_key=attribute(index.sort_key),
                projection_type=projection,
                non_key_attributes=list(index.non_key_attributes) or None,
                read_capacity=capacity.read_min if capacity else None,
                write_capacity=capacity.write_min if capacity else None,
            )
        burst = config.burst
        if burst.warm_reads or burst.warm_writes:
            cfn_table = table.node.default_child
            assert isinstance(cfn_table, dynamodb.CfnTable)
            cfn_table.warm_throughput = dynamodb.CfnTable.WarmThroughputProperty(
                read_units_per_second=burst.warm_reads, write_units_per_second=burst.warm_writes
            )
        if capacity:
            target = capacity.target_utilization
            table.auto_scale_read_capacity(
                min_capacity=capacity.read_min, max_capacity=capacity.read_max
            ).scale_on_utilization(target_utilization_percent=target)
            table.auto_scale_write_capacity(
                min_capacity=capacity.write_min, max_capacity=capacity.write_max
            ).scale_on_utilization(target_utilization_percent=target)
            for index in definition.indexes:
                table.auto_scale_global_secondary_index_read_capacity(
                    index.name, min_capacity=capacity.read_min, max_capacity=capacity.read_max
                ).scale_on_utilization(target_utilization_percent=target)
                table.auto_scale_global_secondary_index_write_capacity(
                    index.name, min_capacity=capacity.write_min, max_capacity=capacity.write_max
                ).scale_on_utilization(target_utilization_percent=target)
        return table
