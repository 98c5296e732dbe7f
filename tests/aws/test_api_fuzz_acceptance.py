"""Schema fuzzing, schema-valid requests accepted: schemathesis's positive-data check over the API (its own module:
the suite's workers run it beside the every-check run of ``test_api_fuzz``)."""

from __future__ import annotations

from pathlib import Path

from infra.local.gateway import LocalGateway
from tests.aws.fuzzing import schemathesis


def test_schema_valid_requests_are_accepted(gateway: LocalGateway, tmp_path: Path) -> None:
    # Schema-valid requests accepted, on every operation but one: a job spec can be schema-valid and still refused
    # for a cross-reference no JSON Schema can state (a DAG task's depends_on naming a task of the same DAG, a
    # parked task's heartbeat of at least 2 minutes); those are 422 on the field, tested in tests/aws/test_api.py.
    # So can a company calendar or window: the calendar's dates and freezes, a window's two forms (cron + duration, or
    # start + end) are the job spec's own checks, and a change a job it reaches would break the policy with is 422
    # whatever its schema (tests/aws/test_company_calendars.py).
    schemathesis(
        gateway,
        tmp_path,
        "--checks",
        "positive_data_acceptance",
        "--exclude-operation-id",
        "putJob",
        "--exclude-operation-id",
        "putCompanyCalendar",
        "--exclude-operation-id",
        "putMaintenanceWindow",
        # A budget's warnings must be below its hard threshold: one field against another.
        "--exclude-operation-id",
        "putTeamBudget",
        "--phases",
        "fuzzing",
    )
