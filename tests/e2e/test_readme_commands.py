"""Every command the README shows in a console block, run as typed: a subprocess through bash from the repo
root, with the venv first on PATH (as after `source .venv/bin/activate`).

Blocks whose output does not depend on the clock are compared line for line with what the README shows
("..." stands for lines left out). The tour runs against `make run` started as a user starts it; its output
is checked for the human lines `make run` promises and for the absence of raw JSON.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3

from tests.readme import ROOT, Shown, block_with, console_blocks, matches, run_typed, user_environment

# Console blocks not run here, and why: they show a deployed API (SigV4, a team's own job files).
NOT_RUN = {
    "export JOBSCHED_API=https://": "a deployed stage (needs AWS): tests/unit/test_docs_commands.py runs each command "
    "against an API that knows nothing instead",
    "jobsched tables move": "a deployed stage's tables (needs AWS): tests/e2e/test_tables_move_command.py runs it as "
    "typed against moto's server",
}
OFFLINE = (
    "jobsched validate",
    "jobsched preview",
    "jobsched capacity",
    "jobsched lint",
    "jobsched test",
    "jobsched simulate",
)
NEXT_FIRE = re.compile(r"\(next: [^)]+\)")


def test_every_console_block_is_run_or_says_why_not() -> None:
    firsts = [block[0].command for block in console_blocks()]
    tour = [c for c in firsts if c.startswith("export JOBSCHED_API=http://127.0.0.1")]
    offline = [c for c in firsts if c.startswith(OFFLINE)]
    skipped = [c for c in firsts if c.startswith(tuple(NOT_RUN))]
    assert len(tour) == 1 and len(offline) >= 4
    assert sorted(tour + offline + skipped) == sorted(firsts)


def offline_commands() -> list[Shown]:
    return [shown for block in console_blocks() if block[0].command.startswith(OFFLINE) for shown in block]


@pytest.mark.parametrize("shown", offline_commands(), ids=lambda shown: shown.command[:60])
def test_an_offline_command_prints_what_the_readme_shows(shown: Shown) -> None:
    result = run_typed(shown.command, user_environment())
    assert result.returncode in (0, 1), result.stderr[-2000:]
    if shown.command.startswith("cat "):
        assert result.stdout.splitlines() == [line for line in shown.output if line.strip()]
        return
    printed = [NEXT_FIRE.sub("(next: ...)", line) for line in result.stdout.splitlines()]
    expected = [NEXT_FIRE.sub("(next: ...)", line) for line in shown.output if line.strip()]
    assert matches(expected, printed), "\n".join(printed)
    # Exit 1 exactly where the README says a command finds errors.
    assert (result.returncode == 1) == any(word in shown.command for word in ("bad.yaml", "lint ")), shown.command


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def make_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen[str], Path, int, Path]]:
    """`make run` as the README starts it, in its own process group, with its own HOME (the CLI's pointer to
    the running state lives there) and state directory."""
    port, home = free_port(), tmp_path_factory.mktemp("home")
    state, transcript = tmp_path_factory.mktemp("state"), tmp_path_factory.mktemp("out") / "terminal.txt"
    with transcript.open("w") as output:
        process = subprocess.Popen(
            ["make", "run", f"ARGS=--port {port} --tick 1 --state-dir {state}"],
            cwd=ROOT,
            env=user_environment(HOME=str(home)),
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    deadline = time.monotonic() + 600  # a busy machine starts slowly: this bounds only a broken start
    while "Ctrl-C stops everything." not in transcript.read_text():
        assert process.poll() is None and time.monotonic() < deadline, transcript.read_text()[-3000:]
        time.sleep(0.5)
    yield process, transcript, port, home
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)


def a_pipeline_run(port: int) -> str:
    """A run of examples/pipeline to show (the tour's <run-id>): triggered if the schedule has made none yet."""
    url = f"http://127.0.0.1:{port}/teams/examples/jobs/pipeline"
    runs = json.loads(urllib3.request("GET", f"{url}/runs").data).get("runs", [])
    if runs:
        return str(runs[0]["run_id"])
    answer = urllib3.request("POST", f"{url}/trigger", headers={"Content-Type": "application/json"}, body="{}")
    return str(json.loads(answer.data)["run_id"])


def test_the_tour_runs_as_typed_against_make_run(make_run: tuple[subprocess.Popen[str], Path, int, Path]) -> None:
    process, _, port, home = make_run
    tour = block_with("export JOBSCHED_API=http://127.0.0.1")
    env = user_environment(HOME=str(home), JOBSCHED_API=f"http://127.0.0.1:{port}")
    assert tour[0].command == "export JOBSCHED_API=http://127.0.0.1:8080"
    printed: dict[str, str] = {}
    for shown in tour[1:]:
        command = shown.command.replace("localhost:8080", f"localhost:{port}")
        command = command.replace("<run-id>", a_pipeline_run(port))
        result = run_typed(command, env)
        assert result.returncode == 0, f"`{command}`: {result.stdout[-1000:]} {result.stderr[-2000:]}"
        printed[shown.command.split("#")[0].strip()] = result.stdout
    assert all(job in printed["jobsched get jobs --team examples"] for job in ("hello", "flaky", "pipeline"))
    assert "WILL-FIRE" in printed["jobsched explain examples/failing 2030-01-04T09:00"]
    # #46: the failing example's own errors never open the examples team's breaker on the shared function.
    assert printed["jobsched breakers examples"].strip() == "no open breakers for team examples"
    [forbidden] = [out for command, out in printed.items() if "team-marketing" in command]
    assert json.loads(forbidden)["error"]["code"] == "forbidden"
    assert process.poll() is None


def test_make_run_speaks_to_a_person(make_run: tuple[subprocess.Popen[str], Path, int, Path]) -> None:
    """One short line per run, page or alarm change; the raw JSON (logs, EMF) only in the log files. #46: pages and
    the end of a DAG run were never shown, the missed-ticks alarms started in ALARM on a healthy stack, and every
    wait's poll printed a line."""
    _, transcript, port, _ = make_run
    for job in ("failing", "pipeline"):  # started now rather than at their next even minute
        url = f"http://127.0.0.1:{port}/teams/examples/jobs/{job}/trigger"
        urllib3.request("POST", url, headers={"Content-Type": "application/json"}, body="{}")
    expected = (
        r"run   examples/hello \S+ .*SUCCEEDED",
        r"page  \[jobsched\] examples/failing: run failed",
        r"run   examples/pipeline \S+ \(DAG\)  SUCCEEDED",
    )
    deadline = time.monotonic() + 240  # waited on a condition: bounds only a broken run
    while not all(re.search(pattern, transcript.read_text()) for pattern in expected):
        assert time.monotonic() < deadline, transcript.read_text()[-3000:]
        time.sleep(0.5)
    lines = transcript.read_text().splitlines()
    assert not [line for line in lines if "MissedTicks -> ALARM" in line], "a healthy stack's ticks are not missed"
    assert not [line for line in lines if "WAITING" in line and "held:" not in line], "a wait's polls are not news"
    assert not [line for line in lines if "no alarms locally" in line]
    banner = lines.index("jobsched is running locally.")
    logs = next(line for line in lines[banner:] if line.strip().startswith("logs "))
    folder = Path(logs.split()[1]).parent
    assert not [line for line in lines if line.lstrip().startswith(("{", "b'"))], "raw JSON in the terminal"
    long = [line for line in lines if len(line) > 250]
    assert long == [], long
    handlers = (folder / "handlers.jsonl").read_text().splitlines()
    assert any('"_aws"' in line for line in handlers)  # the EMF the metrics come from, kept in full
    assert any('"run message"' in line for line in handlers)
    assert "stack deployed into moto" in (folder / "runtime.log").read_text()
