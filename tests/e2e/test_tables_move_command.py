"""The operator guide's `jobsched tables move --stage prod`, as typed: a subprocess from the repo root, its AWS
calls sent to moto's server (JOBSCHED_AWS_ENDPOINT) holding a prod stage's four tables, the previous ones with
items. A deployed move waits minutes (the functions' phase cache, then a settle); here the waits are skipped by
setting the phase's instants back, so the command shows each of its stops: the announcement (--no-wait), the
copy, the settle after it, and the clean end, and a second run finds nothing left to do."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from infra.local.machine import free_port
from jobsched.adapters.aws.dynamo import from_item, to_item
from jobsched.adapters.aws.moves.phase import read_phase, write_phase
from jobsched.core.names import JOBS_TABLE, RUNS_TABLE, StageTables
from tests.readme import ROOT, block_with, user_environment

TABLES = StageTables.of("prod")
BLOCK = "jobsched tables move --stage prod"


@pytest.fixture
def moto_endpoint() -> Iterator[str]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


def typed(command: str, endpoint: str) -> subprocess.CompletedProcess[str]:
    environment = user_environment() | {
        "JOBSCHED_AWS_ENDPOINT": endpoint,
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "operator",
        "AWS_SECRET_ACCESS_KEY": "operator",
    }
    return subprocess.run(
        ["bash", "-c", command], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120, check=False
    )


def pass_time(db: Any, delta: timedelta) -> None:
    """As if the phase's wait had passed: its instants set back by ``delta``."""
    phase = read_phase(db, TABLES.jobs)
    assert phase is not None
    done_at = phase.done_at - delta if phase.done_at else None
    write_phase(db, TABLES.jobs, replace(phase, moving_from=phase.moving_from - delta, done_at=done_at))


def test_the_guides_move_command_runs_as_typed_and_resumes_to_clean(moto_endpoint: str) -> None:
    [shown] = block_with(BLOCK)
    assert shown.command == BLOCK
    db = boto3.client(
        "dynamodb",
        endpoint_url=moto_endpoint,
        region_name="eu-west-1",
        aws_access_key_id="o",
        aws_secret_access_key="o",
    )
    pairs = ((TABLES.jobs, TABLES.previous_jobs, JOBS_TABLE), (TABLES.runs, TABLES.previous_runs, RUNS_TABLE))
    for new, previous, definition in pairs:
        db.create_table(**definition.create_table_kwargs(new))
        db.create_table(**definition.create_table_kwargs(previous))
    for n in range(30):
        db.put_item(TableName=TABLES.previous_runs, Item=to_item({"job": f"t/j{n % 3}", "run_id": f"r{n}", "n": n}))
    db.put_item(TableName=TABLES.previous_jobs, Item=to_item({"pk": "t/j0", "sk": "SPEC", "v": 1}))

    first = typed(f"{BLOCK} --no-wait", moto_endpoint)
    assert first.returncode == 0, first.stderr[-2000:]
    assert first.stdout.startswith("announced: every function moves keys on first touch from ")
    assert "moving: nothing to do before" in first.stdout
    pass_time(db, timedelta(minutes=5))
    second = typed(f"{BLOCK} --no-wait", moto_endpoint)
    assert second.returncode == 0 and "done: nothing to do before" in second.stdout, second.stdout
    pass_time(db, timedelta(minutes=5))
    last = typed(BLOCK, moto_endpoint)
    assert last.returncode == 0, last.stderr[-2000:]
    expected = [line for line in shown.output if line.strip() and not line.startswith("announced")]
    assert [_shape(line) for line in last.stdout.splitlines()] == [_shape(line) for line in expected]
    for n in range(30):
        found = db.get_item(TableName=TABLES.runs, Key=to_item({"job": f"t/j{n % 3}", "run_id": f"r{n}"}))
        assert from_item(found["Item"]) == {"job": f"t/j{n % 3}", "run_id": f"r{n}", "n": n}
    again = typed(BLOCK, moto_endpoint)
    assert again.returncode == 0 and "clean: the stage uses" in again.stdout


def _shape(line: str) -> str:
    """A line with its counts and instants blanked (the guide shows a real stage's)."""
    return re.sub(r"\d[\d,T:\-Z]*", "#", line)
