"""#51: a stage on the tables before the global ones is moved onto them with its jobs live, under `make run
--state-dir` (``jobsched local up``, its own process group), by the command as typed.

The first start plays the stage before the upgrade: its state dir holds a snapshot in the previous format (keyed by
environment variable, as every release before #51 wrote it), restored into the previous tables; the move is not
announced, so every function uses those tables as the previous release did. Jobs are registered and run there; one
run is executing (its target holds it) when `jobsched local move-tables` runs. After it: nothing lost, nothing run
twice, every old item marked, the global tables clean; a kill -9 and restart (the snapshot now by table name) reads
the stage back from the global tables alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3

from infra.local.machine import free_port
from jobsched.adapters.aws.dynamo import to_item
from jobsched.core.names import LOCAL_STAGE, MOVE_COPIED, MOVE_MARK, MOVE_TOMBSTONE, SWEEP, StageTables
from tests.e2e.test_local_crash import Target, call, run, runtime_group, start, wait_for

HOLD = 15.0  # seconds the slow job's target holds its first call: across the whole move

__all__ = ["runtime_group"]  # the fixture, shared with the crash test


def previous_release_state(state_dir: Path) -> None:
    """What a state dir kept from before #51 holds: the sweeper's state item (written every minute by then)."""
    sweep = to_item({"pk": SWEEP, "sk": "Jobs", "next_pass_at": "2099-01-01T00:00:00Z"})
    (state_dir / "tables.json").write_text(json.dumps({"JOBSCHED_JOBS_TABLE": [sweep], "JOBSCHED_RUNS_TABLE": []}))


def local_dynamodb(state_dir: Path) -> object:
    endpoint = json.loads((state_dir / "runtime.json").read_text())["aws_endpoint"]
    return boto3.client(
        "dynamodb", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="l", aws_secret_access_key="l"
    )


def items(db: object, table: str) -> list[dict[str, object]]:
    return [item for page in db.get_paginator("scan").paginate(TableName=table) for item in page["Items"]]  # type: ignore[attr-defined]


def test_a_live_local_stage_moves_onto_its_global_tables_losing_nothing(
    tmp_path: Path, runtime_group: list[subprocess.Popen[bytes]]
) -> None:
    target, port, tables = Target(hold=HOLD), free_port(), StageTables.of(LOCAL_STAGE)
    previous_release_state(tmp_path)
    runtime_group.append(start(tmp_path, port))
    db = local_dynamodb(tmp_path)
    now = datetime.now(UTC).replace(microsecond=0)
    instants = {"before": now + timedelta(seconds=3), "slow": now + timedelta(seconds=5)}
    instants["ahead"] = now + timedelta(seconds=22)  # sent ahead before the move, due after it
    for job, at in instants.items():
        body = {
            "schedule": {"expression": f"at({at:%Y-%m-%dT%H:%M:%S})"},
            "target": {"type": "http", "url": target.url(job), "timeout": "2m"},
        }
        assert call(port, "PUT", f"/teams/e2e/jobs/{job}", body)[0] == 201
    wait_for(lambda: run(port, "before", instants["before"])["status"] == "SUCCEEDED", 30)
    wait_for(lambda: target.calls["/hook/slow"], 30)  # executing: the target holds it HOLD s
    assert items(db, tables.previous_jobs) and not items(db, tables.jobs)  # the stage still on its previous tables

    command = f"{Path(sys.executable).with_name('jobsched')} local move-tables --state-dir {tmp_path}"
    moved = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=300, check=False)
    assert moved.returncode == 0, moved.stderr[-3000:]
    assert "announced" in moved.stdout and f"clean: the stage uses {tables.jobs} and {tables.runs}" in moved.stdout

    slow = wait_for(lambda: (r := run(port, "slow", instants["slow"]))["status"] == "SUCCEEDED" and r, 90)
    assert slow["attempt"] == 1 and target.calls["/hook/slow"] == 1  # its end was written after the move
    wait_for(lambda: run(port, "ahead", instants["ahead"])["status"] == "SUCCEEDED", 90)
    assert target.calls["/hook/before"] == target.calls["/hook/ahead"] == 1
    for table in (tables.previous_jobs, tables.previous_runs):
        assert all(item[MOVE_MARK] == {"N": str(MOVE_COPIED)} for item in items(db, table)), table
    for table in (tables.jobs, tables.runs):
        assert not [i for i in items(db, table) if MOVE_MARK in i or MOVE_TOMBSTONE in i], table

    assert json.loads((tmp_path / "tables.json").read_text())["format"] == 2  # saved by table name now
    os.killpg(runtime_group[0].pid, signal.SIGKILL)  # and back, from the snapshot by table name
    runtime_group[0].wait(timeout=10)
    runtime_group.append(start(tmp_path, port))
    status, listed = call(port, "GET", "/teams/e2e/jobs")
    assert status == 200 and {j["name"] for j in listed["jobs"]} == set(instants)
    assert run(port, "slow", instants["slow"])["status"] == "SUCCEEDED"
    assert run(port, "ahead", instants["ahead"])["status"] == "SUCCEEDED"
