"""Every contract case runs twice: against the AWS adapters on moto and against the memory adapters."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

import boto3
import pytest
from moto import mock_aws

from jobsched.adapters.aws.jobs_store import JobsStore
from jobsched.adapters.aws.runs_store import RunsStore
from jobsched.adapters.memory import MemoryJobs, MemoryRuns
from jobsched.core.names import JOBS_TABLE, RUNS_TABLE
from jobsched.core.records import AuditEntry
from jobsched.core.run_records import Run
from jobsched.pipeline.lifecycle import AnnouncedRuns, Change, Lifecycle, StateChange
from jobsched.ports import (
    DrillsPort,
    EscalationStorePort,
    EventIntakeStorePort,
    RegistryPort,
    SloLedgerPort,
    StopsPort,
    TaskRunsPort,
    TriggerStorePort,
    UsagePort,
)


class JobStore(
    EscalationStorePort,
    RegistryPort,
    TriggerStorePort,
    EventIntakeStorePort,
    SloLedgerPort,
    DrillsPort,
    StopsPort,
    UsagePort,
    Protocol,
):
    """Every port the Jobs table's adapters serve, and the history the API pages through."""

    def history(self, job: str, *, limit: int, before: str | None = None) -> tuple[list[AuditEntry], str | None]: ...


@dataclass
class Stores:
    jobs: JobStore
    runs: TaskRunsPort
    finished: list[Run] = field(default_factory=list)


def ended_runs(finished: list[Run]) -> Lifecycle:
    """The lifecycle over the store, hearing each run that ends (as the deployed SLIs do)."""

    def ended(change: StateChange) -> None:
        if change.change is Change.FINISHED and change.run is not None:
            finished.append(change.run)

    return Lifecycle([ended])


@pytest.fixture(params=["moto", "memory"])
def stores(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stores]:
    if request.param == "memory":
        finished: list[Run] = []
        yield Stores(MemoryJobs(), AnnouncedRuns(MemoryRuns(), ended_runs(finished)), finished)
        return
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("JOBSCHED_AWS_ENDPOINT", raising=False)
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(**JOBS_TABLE.create_table_kwargs("contract-jobs"))
        dynamodb.create_table(**RUNS_TABLE.create_table_kwargs("contract-runs"))
        finished = []
        runs = AnnouncedRuns(RunsStore("contract-runs", dynamodb), ended_runs(finished))
        yield Stores(JobsStore("contract-jobs", dynamodb), runs, finished)
