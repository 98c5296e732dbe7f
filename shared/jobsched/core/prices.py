"""What AWS charges for what a run uses: one price table, per region, dated, with its sources. The chargeback
(``core.usage``), the budgets and ``scripts/bench_pipeline.py`` all price from here, so a figure the benchmark prints
and a team's bill agree.

List prices, on demand, no free tier, checked on the date given (AWS's public pricing pages):
- DynamoDB on-demand (after the November 2024 reduction): https://aws.amazon.com/dynamodb/pricing/on-demand/
- SQS standard queues: https://aws.amazon.com/sqs/pricing/
- Lambda (arm64 and x86 GB-seconds, requests): https://aws.amazon.com/lambda/pricing/
- Step Functions Standard state transitions: https://aws.amazon.com/step-functions/pricing/
- EventBridge custom events put: https://aws.amazon.com/eventbridge/pricing/
- Fargate Linux vCPU-hours and GB-hours (x86): https://aws.amazon.com/fargate/pricing/
A deployment in a region without a table here is priced at us-east-1's, and every answer says which table priced it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date


@dataclass(frozen=True)
class PriceTable:
    region: str
    as_of: date
    write_unit: float  # DynamoDB on-demand, per write request unit
    read_unit: float  # per read request unit
    queue_request: float  # SQS standard, per request (a batch of up to 10 is one)
    function_request: float  # Lambda, per invocation
    function_gb_second_arm: float  # Lambda arm64 (jobsched's functions)
    function_gb_second_x86: float  # Lambda x86 (a team's function, unless it says otherwise)
    state_transition: float  # Step Functions Standard
    event_put: float  # EventBridge, per custom event put (64 KB chunks)
    fargate_vcpu_hour: float
    fargate_gb_hour: float

    @property
    def label(self) -> str:
        return f"{self.region} list prices of {self.as_of.isoformat()}"


US_EAST_1 = PriceTable(
    region="us-east-1",
    as_of=date(2026, 12, 1),
    write_unit=0.625e-6,
    read_unit=0.125e-6,
    queue_request=0.40e-6,
    function_request=0.20e-6,
    function_gb_second_arm=0.0000133334,
    function_gb_second_x86=0.0000166667,
    state_transition=25e-6,
    event_put=1.00e-6,
    fargate_vcpu_hour=0.04048,
    fargate_gb_hour=0.004445,
)
TABLES = {US_EAST_1.region: US_EAST_1}


def price_table(region: str) -> PriceTable:
    """The region's table; us-east-1's where there is none (its ``region`` then says so)."""
    return TABLES.get(region, US_EAST_1)
