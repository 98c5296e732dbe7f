"""``jobsched local``: the whole scheduler on this machine (moto, no AWS account), its pages and alarms."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from jobsched.cli.app import cli
from jobsched.core.names import LOCAL_STAGE, Env, StageTables
from jobsched.core.tz import UTC

LOCAL_HOME = Path.home() / ".jobsched-local"
LOCAL_POINTER = LOCAL_HOME / "current"  # the state of the stack started last (read after it stopped)
RUNNING = LOCAL_HOME / "running"  # one file per running stack: {"api", "state_dir", "pid"}


class TickInterval(click.ParamType[float]):
    """Seconds between ticks, as a job-file duration (``5s``, ``1m``) or a number of seconds (``0.5``)."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, int | float):
            seconds = float(value)
        else:
            try:
                seconds = float(value)
            except ValueError:
                from jobsched.core.durations import parse_duration  # pydantic: only for a duration typed

                try:
                    seconds = parse_duration(str(value).strip()).total_seconds()
                except (ValueError, TypeError):
                    self.fail(f"{value!r} is not a duration: give e.g. 5s, 1m or a number of seconds", param, ctx)
        if not 0 < seconds <= 3600:
            self.fail(f"{value!r}: the tick must be more than 0 and at most 1h", param, ctx)
        return seconds


@cli.group()
def local() -> None:
    """The whole scheduler on this machine: moto for AWS, the real handlers, the API on 127.0.0.1."""


@local.command("up")
@click.option("--port", default=8080, show_default=True, help="Port of the local API.")
@click.option(
    "--tick",
    type=TickInterval(),
    help="Time between dispatcher ticks: a duration (5s, 1m) or seconds (0.5); default: the rule's 60 s.",
)
@click.option("--as", "principal", help="Default caller ARN (default: a platform admin).")
@click.option(
    "--no-examples",
    is_flag=True,
    help="Leave out the example functions (echo, flaky, sleep) and the example jobs that call them.",
)
@click.option(
    "--alarm-time-scale",
    type=float,
    help="Shrink alarm periods by this factor (default: 60/tick, so a 1 s tick makes a 5-minute period 5 s).",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep tables and the synthesized template here across restarts (default: a fresh state each start).",
)
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
@click.option(
    "--log-format",
    type=click.Choice(["human", "json"]),
    default="human",
    show_default=True,
    help="human: a line per run, page, alarm change or quarantine, everything else in STATE/logs/; "
    "json: the raw stream (handlers' JSON logs and EMF metrics) in the terminal.",
)
def local_up(
    port: int,
    tick: float | None,
    principal: str | None,
    no_examples: bool,
    alarm_time_scale: float | None,
    state_dir: Path | None,
    log_level: str,
    log_format: str,
) -> None:
    """Start moto, deploy the app's template into it, and drive the handlers until Ctrl-C."""
    import logging
    import signal
    import tempfile
    import threading

    state_dir = state_dir or Path(tempfile.mkdtemp(prefix="jobsched-local-"))
    state_dir.mkdir(parents=True, exist_ok=True)
    say: Callable[[str], None] = click.echo
    logs_line = "the terminal (--log-format json)"
    if log_format == "human":
        # Before any handler module is imported: Powertools' loggers keep the stdout they were made with.
        from infra.local.terminal import route_output

        terminal, folder = route_output(state_dir, log_level)
        say = terminal.echo
        logs_line = f"{folder}/handlers.jsonl (handlers: JSON, EMF)  {folder}/runtime.log"
    else:
        logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for noisy in ("werkzeug", "botocore", "urllib3", "jsii"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    os.environ["POWERTOOLS_LOG_LEVEL"] = log_level.upper()
    from infra.local.runtime import LocalRuntime
    from infra.local.stack import DEFAULT_ADMIN, TEAM_PATTERN

    runtime = LocalRuntime(
        port=port,
        tick_seconds=tick,
        principal=principal or DEFAULT_ADMIN,
        examples=not no_examples,
        state_dir=state_dir,
        alarm_time_scale=alarm_time_scale,
    )
    try:
        runtime.start()
    except Exception as error:  # a start-up failure says why on the terminal, whatever the log settings
        logging.getLogger("jobsched.local").exception("start-up failed")
        runtime.stop()
        say(f"Error: the local stack did not start: {type(error).__name__}: {error}\n  details: {logs_line}")
        raise SystemExit(1) from None
    LOCAL_POINTER.parent.mkdir(parents=True, exist_ok=True)
    LOCAL_POINTER.write_text(str(runtime.state_dir))
    registered = _register(runtime.api_url, runtime.state_dir)
    example = TEAM_PATTERN.format(team="payments")
    jobs = "team 'examples': hello (every minute), flaky (fails twice, then succeeds), callback"
    say(
        f"""
jobsched is running locally.
  API          {runtime.api_url}   (AWS, in moto: {runtime.endpoint})
  CLI          export JOBSCHED_API={runtime.api_url}
  console      {runtime.gateway.console_url}   (this link's key lets a browser act as you)
  identity     the CLI and curl act as {runtime.principal}
               X-Jobsched-Principal: {example}  acts as team payments
               only loopback Host names; another site's page gets 403
  examples     {jobs if not no_examples else "none (--no-examples)"}
  watch        jobsched runs examples/hello      jobsched local escalations
  state        {runtime.state_dir}
  logs         {logs_line}
Ctrl-C stops everything."""
    )
    stopped = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    stopped.wait()
    say("stopping...")
    registered.unlink(missing_ok=True)
    runtime.stop()


def _register(api: str, state_dir: Path) -> Path:
    """Where `jobsched local put-event` and the others find this stack while it runs."""
    RUNNING.mkdir(parents=True, exist_ok=True)
    entry = RUNNING / f"{os.getpid()}.json"
    entry.write_text(json.dumps({"api": api, "state_dir": str(state_dir), "pid": os.getpid()}))
    return entry


def _running_stacks() -> list[dict[str, Any]]:
    """The stacks started on this machine whose process still lives (a killed one leaves its file behind)."""
    found = []
    for entry in sorted(RUNNING.glob("*.json")) if RUNNING.exists() else []:
        try:
            stack = json.loads(entry.read_text())
            os.kill(int(stack["pid"]), 0)
        except (OSError, ValueError, KeyError, TypeError):
            entry.unlink(missing_ok=True)
            continue
        found.append(stack)
    return found


def _same_api(one: str, other: str) -> bool:
    from urllib.parse import urlsplit

    def where(url: str) -> tuple[str, int | None]:
        parts = urlsplit(url.rstrip("/"))
        host = parts.hostname or ""
        return ("loopback" if host in ("localhost", "127.0.0.1", "::1") else host), parts.port

    return where(one) == where(other)


def _state_dir_of_stack(state_dir: Path | None) -> Path | None:
    """The state of the stack a command means: --state-dir; else the one serving JOBSCHED_API; else the only one
    running; refused when several run and nothing says which; the last one started when none runs."""
    if state_dir is not None:
        return state_dir
    running = _running_stacks()
    api = os.environ.get(Env.API)
    if api:
        matching = [stack for stack in running if _same_api(stack["api"], api)]
        if matching:
            return Path(matching[0]["state_dir"])
        listed = ", ".join(stack["api"] for stack in running) or "none"
        raise click.ClickException(
            f"JOBSCHED_API={api} is no local stack running here (running: {listed}); pass --state-dir or set "
            "JOBSCHED_API to one of them"
        )
    if len(running) > 1:
        listed = "\n  ".join(f"{stack['api']}  (--state-dir {stack['state_dir']})" for stack in running)
        raise click.ClickException(
            f"{len(running)} local stacks are running; say which with JOBSCHED_API or --state-dir:\n  {listed}"
        )
    if running:
        return Path(running[0]["state_dir"])
    return Path(LOCAL_POINTER.read_text()) if LOCAL_POINTER.exists() else None


def _state_options(command: Callable[..., None]) -> Callable[..., None]:
    """--state-dir and -o for the commands that read what the local runtime keeps."""
    command = click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)(
        command
    )
    return click.option(
        "--state-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="The runtime's state directory (default: the stack JOBSCHED_API names, else the one running, else the"
        " last run).",
    )(command)


def _state_file(state_dir: Path | None, name: str) -> Path | None:
    folder = _state_dir_of_stack(state_dir)
    path = folder / name if folder else None
    return path if path and path.exists() else None


@local.command("escalations")
@_state_options
def local_escalations(state_dir: Path | None, output: str) -> None:
    """The pages the local runtime's escalation topic has delivered (what on-call would receive)."""
    path = _state_file(state_dir, "escalations.jsonl")
    events = [json.loads(line) for line in path.read_text().splitlines()] if path else []
    if output == "json":
        click.echo(json.dumps(events, indent=2))
        return
    if not events:
        click.echo("no escalations")
    for event in events:
        click.echo(f"{event.get('subject')}  ({event.get('notice')}, {event.get('kind')})")
        click.echo("    " + "\n    ".join(str(event.get("message", "")).splitlines()[1:]).strip())


@local.command("alarms")
@_state_options
def local_alarms(state_dir: Path | None, output: str) -> None:
    """Every alarm of the stack as the local runtime evaluates it: state, since when, and why."""
    path = _state_file(state_dir, "alarms.json")
    rows = json.loads(path.read_text()) if path else []
    if output == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no alarms evaluated yet (is `make run` up?)")
        return
    order = {"ALARM": 0, "INSUFFICIENT_DATA": 1, "OK": 2}
    for row in sorted(rows, key=lambda r: (order.get(r["state"], 3), r["alarm"])):
        since = datetime.fromtimestamp(row["since"], UTC).strftime("%H:%M:%S") if row["since"] else "-"
        click.echo(f"{row['state']:<17} {row['alarm']:<40} since {since}  {row['reason']}")


def _local_aws(state_dir: Path | None, service: str) -> Any:
    """A boto3 client for the running local stack's AWS (moto), found through its state directory."""
    path = _state_file(state_dir, "runtime.json")
    if path is None:
        raise click.ClickException("no local stack found: start one with `make run` (or pass --state-dir)")
    import boto3

    endpoint = json.loads(path.read_text())["aws_endpoint"]
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


@local.command("put-event")
@click.option("--source", required=True, help="The event's source, e.g. com.acme.orders.")
@click.option("--detail-type", required=True, help="The event's detail-type, e.g. OrderBatchReady.")
@click.option("--detail", default="{}", show_default=True, help="The event's detail: a JSON object.")
@click.option("--bus", default="default", show_default=True, help="The event bus.")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="The runtime's state directory (default: the stack JOBSCHED_API names, else the one running).",
)
def local_put_event(source: str, detail_type: str, detail: str, bus: str, state_dir: Path | None) -> None:
    """Put an event on the local stack's bus, as a service would with PutEvents: matching jobs start."""
    try:
        parsed = json.loads(detail)
    except ValueError as error:
        raise click.BadParameter(f"not JSON: {error}", param_hint="--detail") from None
    if not isinstance(parsed, dict):
        raise click.BadParameter("the detail is a JSON object", param_hint="--detail")
    entry = {"Source": source, "DetailType": detail_type, "Detail": json.dumps(parsed), "EventBusName": bus}
    response = _local_aws(state_dir, "events").put_events(Entries=[entry])
    result = response["Entries"][0]
    if response.get("FailedEntryCount"):
        raise click.ClickException(f"refused: {result.get('ErrorCode')}: {result.get('ErrorMessage')}")
    click.echo(f"event {result['EventId']} put on bus {bus}")


@local.command("put-object")
@click.argument("bucket")
@click.argument("key")
@click.option("--body", default="", help="The object's content (text).")
@click.option("--file", "source", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="Or a file's.")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="The runtime's state directory (default: the stack JOBSCHED_API names, else the one running).",
)
def local_put_object(bucket: str, key: str, body: str, source: Path | None, state_dir: Path | None) -> None:
    """Write an object into a local bucket: S3 sends Object Created to EventBridge, and S3-triggered jobs start."""
    from botocore.exceptions import ClientError

    content = source.read_bytes() if source is not None else body.encode()
    try:
        response = _local_aws(state_dir, "s3").put_object(Bucket=bucket, Key=key, Body=content)
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code")
        if code == "NoSuchBucket":
            raise click.ClickException(
                f"no bucket {bucket} in the local stack: create it with `jobsched local create-bucket TEAM {bucket}`"
            ) from None
        raise click.ClickException(f"refused: {code}: {error.response.get('Error', {}).get('Message')}") from None
    click.echo(f"s3://{bucket}/{key} written ({len(content)} bytes, etag {response['ETag'].strip(chr(34))})")


@local.command("create-bucket")
@click.argument("team")
@click.argument("bucket")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="The runtime's state directory (default: the stack JOBSCHED_API names, else the one running).",
)
def local_create_bucket(team: str, bucket: str, state_dir: Path | None) -> None:
    """Create TEAM's BUCKET in the local stack as a team's bucket must be: tagged as the team's, sending its events
    to EventBridge (what s3 triggers and waits listen to). Again on an existing bucket: sets both."""
    from botocore.exceptions import ClientError

    from jobsched.core.names import OWNER_TAG

    s3 = _local_aws(state_dir, "s3")
    try:
        s3.create_bucket(Bucket=bucket)
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code")
        if code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise click.ClickException(f"refused: {code}: {error.response.get('Error', {}).get('Message')}") from None
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [{"Key": OWNER_TAG, "Value": team}]})
    s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={"EventBridgeConfiguration": {}})
    click.echo(f"bucket {bucket}: team {team} ({OWNER_TAG}={team}), events to EventBridge on")


@local.command("move-tables")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="The runtime's state directory (default: the stack JOBSCHED_API names, else the one running, else the last"
    " run).",
)
def local_move_tables(state_dir: Path | None) -> None:
    """Move the running local stack (a --state-dir kept from before #51) onto its global tables, as `jobsched
    tables move` moves a deployed stage: its functions read the move's phase every second, so it waits seconds."""
    from jobsched.cli.tables import LOCAL_TIMING, drive

    tables = StageTables.of(LOCAL_STAGE)
    raise SystemExit(drive(_local_aws(state_dir, "dynamodb"), tables, lead=LOCAL_TIMING, settle=LOCAL_TIMING))
