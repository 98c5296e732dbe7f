"""The local runtime's table snapshots are cuts: a ``kill -9`` at any moment restores a state the scheduler could
have been in. The bug this closes: a save read a job's dispatch state after its audit mark had moved past an
instant, but not that instant's run record (written meanwhile, marked for the next save); killed before the
next save, the restored tables said the instant was accounted for and held no record of it (seen in CI:
``tests/e2e/test_local_crash.py``, a minutely instant with no record 8 minutes on)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from infra.local.snapshots import Snapshots

REGION = "eu-west-1"
JOBS, RUNS = "jobs", "runs"
KEYS = {JOBS: ("pk", "sk"), RUNS: ("pk", "sk")}


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        for table in KEYS:
            client.create_table(
                TableName=table,
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                AttributeDefinitions=[
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                BillingMode="PAY_PER_REQUEST",
            )
        yield client


def state(audited_to: str) -> dict[str, Any]:
    return {"pk": {"S": "team#job"}, "sk": {"S": "STATE"}, "audited_to": {"S": audited_to}}


RECORD = {"pk": {"S": "team#job"}, "sk": {"S": "run#08:01"}, "status": {"S": "SUCCEEDED"}}


class WritesDuringTheRead:
    """The saver's client: while the save reads the jobs table, the scheduler (another thread, on the watched
    client) writes a run record and then moves the audit mark past it, as the worker and the dispatcher do."""

    def __init__(self, reader: Any, writer: Any) -> None:
        self.reader, self.writer = reader, writer
        self.scheduler: threading.Thread | None = None

    def batch_get_item(self, RequestItems: dict[str, Any]) -> Any:
        if JOBS in RequestItems and self.scheduler is None:
            self.scheduler = threading.Thread(target=self.schedule)
            self.scheduler.start()
            self.scheduler.join(timeout=2.0)  # the writes land now unless the save holds them back
        return self.reader.batch_get_item(RequestItems=RequestItems)

    def schedule(self) -> None:
        self.writer.put_item(TableName=RUNS, Item=RECORD)
        self.writer.put_item(TableName=JOBS, Item=state("08:01"))

    def get_paginator(self, name: str) -> Any:
        return self.reader.get_paginator(name)


def saved(path: Path) -> dict[str, list[dict[str, Any]]]:
    tables: dict[str, list[dict[str, Any]]] = json.loads(path.read_text())["tables"]
    return tables


def audit_mark_has_its_record(tables: dict[str, list[dict[str, Any]]]) -> bool:
    (job_state,) = [item for item in tables[JOBS] if item["sk"]["S"] == "STATE"]
    return job_state["audited_to"]["S"] == "08:00" or RECORD in tables[RUNS]


def test_a_save_is_a_cut_no_write_lands_while_it_reads(dynamodb: Any, tmp_path: Path) -> None:
    snapshots = Snapshots(tmp_path / "tables.json", keys=dict(KEYS))
    watched = boto3.client("dynamodb", region_name=REGION)  # the handlers' client
    snapshots.watch(watched)
    watched.put_item(TableName=JOBS, Item=state("08:00"))
    snapshots.save(dynamodb)  # the first save scans
    watched.put_item(TableName=JOBS, Item=state("08:00"))  # the dispatcher's visit: the state item changed

    saver = WritesDuringTheRead(dynamodb, watched)
    snapshots.save(saver)
    first = saved(snapshots.path)
    assert audit_mark_has_its_record(first)  # before the gate: the mark at 08:01 without the record of 08:01
    assert saver.scheduler is not None
    saver.scheduler.join(timeout=30)  # held back until the save had read: it lands after
    assert not saver.scheduler.is_alive()

    snapshots.save(dynamodb)
    second = saved(snapshots.path)
    assert RECORD in second[RUNS] and audit_mark_has_its_record(second)


def test_a_write_that_fails_before_an_answer_leaves_its_place_and_is_read_back(dynamodb: Any, tmp_path: Path) -> None:
    """A write refused (a condition) or without an answer still leaves the gate: the next save does not wait."""
    snapshots = Snapshots(tmp_path / "tables.json", keys=dict(KEYS))
    watched = boto3.client("dynamodb", region_name=REGION)
    snapshots.watch(watched)
    watched.put_item(TableName=JOBS, Item=state("08:00"))
    with pytest.raises(watched.exceptions.ConditionalCheckFailedException):
        watched.put_item(TableName=JOBS, Item=state("08:05"), ConditionExpression="attribute_not_exists(pk)")
    with pytest.raises(watched.exceptions.ResourceNotFoundException):
        watched.put_item(TableName="no-such-table", Item=state("08:05"))
    assert snapshots.gate.under_way == 0  # a place left taken would hold every later save back
    snapshots.save(dynamodb)
    assert audit_mark_has_its_record(saved(snapshots.path))
