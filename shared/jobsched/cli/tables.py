"""``jobsched tables``: move a stage deployed before #51 onto its global tables, with the stack live.

``jobsched tables move --stage prod`` (AWS credentials of the platform team, as for ``cdk deploy``) announces the
move, copies every item a page at a time, and clears what the move left; stopped at any point (Ctrl-C, a lost
laptop), it goes on from where it was when run again. ``jobsched local move-tables`` does the same to the stack
``make run`` keeps (its processes read the phase every second, so it waits seconds, not minutes).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import click

from jobsched.cli import app
from jobsched.core.names import StageTables

if TYPE_CHECKING:  # boto3 and the adapters load when a command runs (the CLI starts without them)
    from jobsched.adapters.aws.moves.copier import TableMover
    from jobsched.adapters.aws.moves.phase import MovePhase

PAGE = 200  # as adapters.aws.moves.copier.PAGE (a test holds them equal)
LEAD = SETTLE = timedelta(seconds=90)  # as adapters.aws.moves.phase (a test holds them equal)
LOCAL_TIMING = timedelta(seconds=3)  # the local runtime reads the phase every second (JOBSCHED_MOVE_PHASE_SECONDS)


@app.cli.group()
def tables() -> None:
    """A stage's tables (moving one deployed before #51 onto its global tables)."""


@tables.command("move")
@click.option("--stage", required=True, help="The stage whose tables move (as deployed: -c stage=...).")
@click.option("--page", default=PAGE, show_default=True, type=click.IntRange(1, 1000), help="Items a page.")
@click.option("--no-wait", is_flag=True, help="Do what can be done now, then say when to run again.")
def move(stage: str, page: int, no_wait: bool) -> None:
    """Move STAGE onto its global tables, online: run again after any stop, it goes on where it was."""
    from jobsched.adapters.aws.clients import client

    raise SystemExit(drive(client("dynamodb"), StageTables.of(stage), page=page, wait=not no_wait))


def drive(
    db: Any,
    names: StageTables,
    *,
    page: int = PAGE,
    wait: bool = True,
    lead: timedelta = LEAD,
    settle: timedelta = SETTLE,
    clock: Callable[[], datetime] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """The move from wherever it stands to clean (or, without ``wait``, as far as it goes now). Exit status."""
    from jobsched.adapters.aws.moves.client import MovingClient, table_pairs
    from jobsched.adapters.aws.moves.copier import TableMover
    from jobsched.adapters.aws.moves.phase import PhaseReader

    now = clock or app.clock
    pairs = table_pairs(names.jobs, names.runs, names.previous_jobs, names.previous_runs)
    missing = _missing_table(db, names)
    if missing:
        click.echo(
            f"Error: table {missing} not found: deploy this release first (it adds the global tables and keeps the"
            " previous ones)",
            err=True,
        )
        return 1
    mover = TableMover(MovingClient(db, pairs, PhaseReader(db, names.jobs, now)), db, pairs, names.jobs)
    phase = mover.phase()
    if phase is None:
        phase = mover.announce(now(), lead, settle)
        click.echo(f"announced: every function moves keys on first touch from {_at(phase.moving_from)}")
    return _until_clean(mover, names, page=page, wait=wait, now=now, sleep=sleep)


def _until_clean(
    mover: TableMover,
    names: StageTables,
    *,
    page: int,
    wait: bool,
    now: Callable[[], datetime],
    sleep: Callable[[float], None],
) -> int:
    from botocore.exceptions import ClientError

    from jobsched.adapters.aws.dynamo import is_conditional_failure

    moved: Counter[str] = Counter()
    removed = 0
    while True:
        try:
            step = mover.step(now(), page)
        except ClientError as error:
            if not is_conditional_failure(error):
                raise
            continue  # another mover wrote the phase meanwhile: read it again and go on
        if step.table:
            moved[step.table] += step.moved
            removed += step.removed
        if step.phase == "clean":
            _report(names, moved, removed, mover.phase())
            return 0
        if step.wait_until is not None:
            if not wait:
                click.echo(f"{step.phase}: nothing to do before {_at(step.wait_until)}; run this again then")
                return 0
            sleep(max(0.0, (step.wait_until - now()).total_seconds()))


def _missing_table(db: Any, names: StageTables) -> str | None:
    from botocore.exceptions import ClientError

    for table in (names.jobs, names.runs, names.previous_jobs, names.previous_runs):
        try:
            db.describe_table(TableName=table)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise
            return table
    return None


def _report(names: StageTables, moved: Counter[str], removed: int, phase: MovePhase | None) -> None:
    for table in (names.previous_jobs, names.previous_runs):
        click.echo(f"{table}: {moved[table]} items moved by this run (the functions moved the rest on first touch)")
    click.echo(f"tombstones removed: {removed}")
    done_at = phase.done_at if phase else None
    click.echo(f"clean: the stage uses {names.jobs} and {names.runs} alone (done at {_at(done_at)})")
    click.echo("next: deploy with -c previous_tables=false (prod keeps the previous tables: they are retained)")


def _at(instant: datetime | None) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ") if instant else "-"
