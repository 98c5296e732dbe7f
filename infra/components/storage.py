"""The two tables (jobs, runs), their keys and indexes from ``jobsched.core.names``.

Since #51 they are global tables (``AWS::DynamoDB::GlobalTable``, one replica here): no TTL, no transactions, no
local index, so replicas with multi-Region strong consistency need no other change of the code. A stage deployed
before keeps its previous tables (``previous_tables``) until ``jobsched tables move`` has moved it onto these
(the functions read both meanwhile: ``jobsched.adapters.aws.moves``).
"""

from __future__ import annotations

from aws_cdk import Aws, CfnResource, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.components.common import resource_name
from infra.config import StageConfig
from jobsched.core.names import EXPIRES_AT, JOBS_TABLE, RUNS_TABLE, TABLE_GENERATION, Env, TableDefinition

PROJECTIONS = {
    "KEYS_ONLY": dynamodb.ProjectionType.KEYS_ONLY,
    "INCLUDE": dynamodb.ProjectionType.INCLUDE,
    "ALL": dynamodb.ProjectionType.ALL,
}
# CDK's grant_read_data / grant_read_write_data actions (kept-grants.json says why the unused ones stay).
TABLE_READ = (
    "dynamodb:BatchGetItem",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:Query",
    "dynamodb:GetItem",
    "dynamodb:Scan",
    "dynamodb:ConditionCheckItem",
    "dynamodb:DescribeTable",
)
TABLE_WRITE = ("dynamodb:BatchWriteItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
Global = dynamodb.CfnGlobalTable  # the L1 and its property classes


def _attribute(spec: tuple[str, str]) -> dynamodb.Attribute:
    kind = dynamodb.AttributeType.STRING if spec[1] == "S" else dynamodb.AttributeType.NUMBER
    return dynamodb.Attribute(name=spec[0], type=kind)


class Storage(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self.key = key
        self.resources: list[CfnResource] = []  # every table's CloudFormation resource
        self.jobs = self._global_table(JOBS_TABLE, config, key)
        self.runs = self._global_table(RUNS_TABLE, config, key)
        self.previous_jobs: dynamodb.Table | None = None
        self.previous_runs: dynamodb.Table | None = None
        if config.previous_tables:
            self.previous_jobs = self._previous_table(JOBS_TABLE, config, key)
            self.previous_runs = self._previous_table(RUNS_TABLE, config, key)

    def environment(self) -> dict[str, str]:
        """The tables' names as every function reads them (the previous ones while a move may be under way)."""
        names = {Env.JOBS_TABLE: self.resources[0].ref, Env.RUNS_TABLE: self.resources[1].ref}
        if self.previous_jobs and self.previous_runs:
            names |= {
                Env.PREVIOUS_JOBS_TABLE: self.previous_jobs.table_name,
                Env.PREVIOUS_RUNS_TABLE: self.previous_runs.table_name,
            }
        return names

    def grant_jobs(self, grantee: iam.IGrantable, *, write: bool = True) -> None:
        """The jobs table to ``grantee`` (and the previous one while a move may be under way)."""
        self._grant(grantee, (self.jobs, self.previous_jobs), write=write)

    def grant_runs(self, grantee: iam.IGrantable, *, write: bool = True) -> None:
        self._grant(grantee, (self.runs, self.previous_runs), write=write)

    def _grant(self, grantee: iam.IGrantable, tables: tuple[dynamodb.ITable | None, ...], *, write: bool) -> None:
        """CDK's table grants' actions, in one statement for the tables and their indexes (a table's own grants
        make two statements each and four tables' worth overflowed the functions' policies), and the key's."""
        arns = [arn for table in tables if table is not None for arn in (table.table_arn, f"{table.table_arn}/index/*")]
        iam.Grant.add_to_principal(
            grantee=grantee, actions=[*TABLE_READ, *(TABLE_WRITE if write else ())], resource_arns=arns
        )
        self.key.grant_encrypt_decrypt(grantee) if write else self.key.grant_decrypt(grantee)

    def tables(self) -> list[dynamodb.ITable]:
        return [t for t in (self.jobs, self.runs, self.previous_jobs, self.previous_runs) if t is not None]

    def _global_table(self, definition: TableDefinition, config: StageConfig, key: kms.IKey) -> dynamodb.ITable:
        """A global table with its one replica in the stack's region (L1: the L2 needs a region-bound stack to
        name a replica's key)."""
        capacity = config.capacity
        reads = writes = None
        if capacity:
            target = Global.TargetTrackingScalingPolicyConfigurationProperty(target_value=capacity.target_utilization)
            reads = Global.ReadProvisionedThroughputSettingsProperty(
                read_capacity_auto_scaling_settings=Global.CapacityAutoScalingSettingsProperty(
                    min_capacity=capacity.read_min,
                    max_capacity=capacity.read_max,
                    target_tracking_scaling_policy_configuration=target,
                )
            )
            writes = Global.WriteProvisionedThroughputSettingsProperty(
                write_capacity_auto_scaling_settings=Global.CapacityAutoScalingSettingsProperty(
                    min_capacity=capacity.write_min,
                    max_capacity=capacity.write_max,
                    target_tracking_scaling_policy_configuration=target,
                )
            )
        attributes = {definition.partition_key, definition.sort_key}
        for index in definition.indexes:
            attributes |= {index.partition_key, index.sort_key}

        def keys(partition: tuple[str, str], sort: tuple[str, str]) -> list[Global.KeySchemaProperty]:
            return [
                Global.KeySchemaProperty(attribute_name=partition[0], key_type="HASH"),
                Global.KeySchemaProperty(attribute_name=sort[0], key_type="RANGE"),
            ]

        burst = config.burst
        # Each index has its own partitions and throughput, and one short of it throttles the table's writes: a
        # stage warmed for a burst warms its indexes too (the dispatcher moves a sparse job's due key, two index
        # writes, and a run waiting for a callback is on the lease index).
        warm = (
            Global.WarmThroughputProperty(
                read_units_per_second=burst.warm_reads or None, write_units_per_second=burst.warm_writes or None
            )
            if burst.warm_reads or burst.warm_writes
            else None
        )
        name = f"{definition.logical_name}{TABLE_GENERATION}"
        table = Global(
            self,
            name,
            table_name=resource_name(config, name),
            key_schema=keys(definition.partition_key, definition.sort_key),
            attribute_definitions=[
                Global.AttributeDefinitionProperty(attribute_name=n, attribute_type=t) for n, t in sorted(attributes)
            ],
            billing_mode="PROVISIONED" if capacity else "PAY_PER_REQUEST",
            write_provisioned_throughput_settings=writes,
            sse_specification=Global.SSESpecificationProperty(sse_enabled=True, sse_type="KMS"),
            time_to_live_specification=Global.TimeToLiveSpecificationProperty(attribute_name=EXPIRES_AT, enabled=True)
            if config.table_ttl  # see StageConfig.table_ttl
            else None,
            warm_throughput=warm,
            global_secondary_indexes=[
                Global.GlobalSecondaryIndexProperty(
                    index_name=index.name,
                    key_schema=keys(index.partition_key, index.sort_key),
                    projection=Global.ProjectionProperty(
                        projection_type=index.projection, non_key_attributes=list(index.non_key_attributes) or None
                    ),
                    write_provisioned_throughput_settings=writes,
                    warm_throughput=warm,
                )
                for index in definition.indexes
            ],
            replicas=[
                Global.ReplicaSpecificationProperty(
                    region=Aws.REGION,
                    sse_specification=Global.ReplicaSSESpecificationProperty(kms_master_key_id=key.key_arn),
                    point_in_time_recovery_specification=Global.PointInTimeRecoverySpecificationProperty(
                        point_in_time_recovery_enabled=True
                    ),
                    deletion_protection_enabled=config.prod,
                    read_provisioned_throughput_settings=reads,
                    global_secondary_indexes=[
                        Global.ReplicaGlobalSecondaryIndexSpecificationProperty(
                            index_name=index.name, read_provisioned_throughput_settings=reads
                        )
                        for index in definition.indexes
                    ]
                    if capacity
                    else None,
                )
            ],
        )
        table.apply_removal_policy(RemovalPolicy.RETAIN if config.prod else RemovalPolicy.DESTROY)
        self.resources.append(table)
        return dynamodb.Table.from_table_attributes(
            self,
            f"{name}Grants",
            table_arn=table.attr_arn,
            global_indexes=[index.name for index in definition.indexes],
            encryption_key=key,
        )

    def _previous_table(self, definition: TableDefinition, config: StageConfig, key: kms.IKey) -> dynamodb.Table:
        """A table of the layout before #51, as it was deployed (nothing about it changes while a stage moves)."""
        capacity = config.capacity
        table = dynamodb.Table(
            self,
            definition.logical_name,
            table_name=resource_name(config, definition.logical_name),
            partition_key=_attribute(definition.partition_key),
            sort_key=_attribute(definition.sort_key),
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
        cfn_table = table.node.default_child
        assert isinstance(cfn_table, dynamodb.CfnTable)
        self.resources.append(cfn_table)
        burst = config.burst
        warmed = bool(burst.warm_reads or burst.warm_writes)  # the table and each index alike (_global_table)
        for index in definition.indexes:
            table.add_global_secondary_index(
                index_name=index.name,
                partition_key=_attribute(index.partition_key),
                sort_key=_attribute(index.sort_key),
                projection_type=PROJECTIONS[index.projection],
                non_key_attributes=list(index.non_key_attributes) or None,
                read_capacity=capacity.read_min if capacity else None,
                write_capacity=capacity.write_min if capacity else None,
                warm_throughput=dynamodb.WarmThroughput(
                    read_units_per_second=burst.warm_reads, write_units_per_second=burst.warm_writes
                )
                if warmed
                else None,
            )
        if warmed:  # the L2 table takes no warm throughput of its own
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
