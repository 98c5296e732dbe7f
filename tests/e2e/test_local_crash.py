"""``make run`` killed with SIGKILL and started again on the same state dir loses nothing (#14).

The runtime runs as its own process group (``jobsched local up``, moto in a child process), exactly as a
developer runs it; the test kills the whole group mid-flight: one run finished, one executing, two sent
ahead and waiting in SQS (the queue dies with moto). After the restart every job is there and every
instant is accounted for: the finished run is not run again, the interrupted one is retried, the ones
sent ahead run at their instant.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import urllib3

from infra.local.machine import free_port
from infra.local.stack import TEAM_PATTERN
from jobsched.core.runs import scheduled_run_id

HTTP = urllib3.PoolManager()


class Target:
    """Counts calls per job path; the first call of ``/hook/slow`` hangs ``hold`` seconds (the run in flight)."""

    def __init__(self, hold: float = 60.0) -> None:
        self.calls: Counter[str] = Counter()
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                target.calls[self.path] += 1
                if self.path == "/hook/slow" and target.calls[self.path] == 1:
                    time.sleep(hold)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, job: str) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/hook/{job}"


def start(state_dir: Path, port: int) -> subprocess.Popen[bytes]:
    # With the examples: the tables hold every kind of item they can (DAG tasks and outputs, waits, batches,
    # containers), and a restart must read each of them back.
    command = [str(Path(sys.executable).with_name("jobsched")), "local", "up", "--tick", "1"]
    process = subprocess.Popen(
        [*command, "--port", str(port), "--state-dir", str(state_dir), "--log-level", "WARNING"],
        stdout=subprocess.DEVNULL,
        stderr=(state_dir / "runtime.log").open("ab"),
        start_new_session=True,  # its own process group, moto included: killpg takes all of it
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, (state_dir / "runtime.log").read_text()[-3000:]
        try:
            if HTTP.request("GET", f"http://127.0.0.1:{port}/teams/e2e/jobs", headers=headers(), retries=False).status:
                return process
        except urllib3.exceptions.HTTPError:
            time.sleep(0.5)
    raise AssertionError("the local runtime did not start within 120 s")


def headers() -> dict[str, str]:
    return {"Content-Type": "application/json", "X-Jobsched-Principal": TEAM_PATTERN.format(team="e2e")}


def call(port: int, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    response = HTTP.request(
        method, f"http://127.0.0.1:{port}{path}", body=json.dumps(body) if body else None, headers=headers()
    )
    return response.status, json.loads(response.data) if response.data else None


def run(port: int, job: str, at: datetime) -> dict[str, Any]:
    status, body = call(port, "GET", f"/teams/e2e/jobs/{job}/runs/{scheduled_run_id(at)}")
    return body if status == 200 else {"status": None}


PATIENCE = 4.0  # deadlines are this many times what a quiet machine needs (CI's is sometimes busy)


def wait_for(check: Any, seconds: float) -> Any:
    seconds *= PATIENCE
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.3)
    raise AssertionError(f"not within {seconds} s")


@pytest.fixture
def runtime_group(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def test_kill_9_and_restart_on_the_same_state_dir_accounts_for_every_instant(
    tmp_path: Path, runtime_group: list[subprocess.Popen[bytes]]
) -> None:
    target = Target()
    port = free_port()
    runtime_group.append(start(tmp_path, port))
    now = datetime.now(UTC).replace(microsecond=0)
    instants = {"before": now + timedelta(seconds=4), "slow": now + timedelta(seconds=6)}
    # Sent ahead at once (the dispatcher sends 14 minutes ahead), due after the restart.
    instants |= {"ahead-1": now + timedelta(seconds=45), "ahead-2": now + timedelta(seconds=50)}
    for job, at in instants.items():
        body = {
            "schedule": {"expression": f"at({at:%Y-%m-%dT%H:%M:%S})"},
            "target": {"type": "http", "url": target.url(job), "timeout": "2m"},
            "retry": {"max_attempts": 2, "backoff": {"initial": "1s", "max": "1s", "jitter": "none"}},
        }
        assert call(port, "PUT", f"/teams/e2e/jobs/{job}", body)[0] == 201
    minutely = {"schedule": {"expression": "* * * * *"}, "target": {"type": "http", "url": target.url("minutely")}}
    assert call(port, "PUT", "/teams/e2e/jobs/minutely", minutely)[0] == 201
    # A DAG that passes data: its tasks and outputs partitions are in the tables at the kill.
    echo = {"type": "lambda", "function": "jobsched-example-echo"}
    passing = {
        "dag": {
            "tasks": [
                {"name": "make", "target": {**echo, "payload": {"rows": 3}}},
                {"name": "use", "depends_on": ["make"], "target": {**echo, "payload": "{{ tasks.make.output }}"}},
            ]
        }
    }
    assert call(port, "PUT", "/teams/e2e/jobs/passing", passing)[0] == 201
    dag_run = call(port, "POST", "/teams/e2e/jobs/passing/trigger", {})[1]["run_id"]

    def dag_status() -> Any:
        return call(port, "GET", f"/teams/e2e/jobs/passing/runs/{dag_run}")[1].get("status")

    wait_for(lambda: dag_status() == "SUCCEEDED", 60)
    wait_for(lambda: run(port, "before", instants["before"])["status"] == "SUCCEEDED", 30)
    wait_for(lambda: run(port, "slow", instants["slow"])["status"] == "RUNNING", 30)
    wait_for(lambda: target.calls["/hook/slow"], 10)  # attempt 1 is executing: the target holds it
    time.sleep(2.5)  # the snapshot follows a write within a second

    os.killpg(runtime_group[0].pid, signal.SIGKILL)
    runtime_group[0].wait(timeout=10)
    runtime_group.append(start(tmp_path, port))
    restarted_at = datetime.now(UTC)

    status, listed = call(port, "GET", "/teams/e2e/jobs")
    assert status == 200 and {j["name"] for j in listed["jobs"]} == {*instants, "minutely", "passing"}
    assert dag_status() == "SUCCEEDED"
    slow = wait_for(lambda: (r := run(port, "slow", instants["slow"]))["status"] == "SUCCEEDED" and r, 60)
    assert slow["attempt"] == 2  # attempt 1 died with the process: counted lost, retried
    for job in ("ahead-1", "ahead-2"):
        done = wait_for(lambda job=job: (r := run(port, job, instants[job]))["status"] == "SUCCEEDED" and r, 90)
        if restarted_at < instants[job] - timedelta(seconds=5):  # back before its instant: it runs on time
            assert done["lateness_seconds"] < 30
        # Back after it (a busy machine restarts slowly): it still runs once, late, as the catch-up decides.
    assert run(port, "before", instants["before"])["status"] == "SUCCEEDED"
    assert target.calls["/hook/before"] == 1 and target.calls["/hook/ahead-1"] == target.calls["/hook/ahead-2"] == 1
    # The minutely job: every instant that has passed has a record (run, caught up, or MISSED with the reason),
    # those sent ahead before the kill included.
    first = (now + timedelta(minutes=1)).replace(second=0)
    passed = [first + timedelta(minutes=m) for m in range(5) if first + timedelta(minutes=m) < datetime.now(UTC)]
    for at in passed or [first]:
        try:
            wait_for(lambda at=at: run(port, "minutely", at)["status"] in ("SUCCEEDED", "MISSED"), 120)
        except AssertionError as stuck:  # say where that instant stands (seen once under a full run's load)
            raise AssertionError(f"{stuck}: minutely {at:%H:%M:%S} is {run(port, 'minutely', at)}") from None


def test_a_start_that_fails_says_why_on_the_terminal_and_keeps_the_saved_state(tmp_path: Path) -> None:
    """A state the runtime cannot read back: `jobsched local up` exits 1 with the reason on the terminal (not only
    in its log files), and the saved tables are left as they were."""
    saved = '{"JOBSCHED_JOBS_TABLE": [{"not": "an item"'
    (tmp_path / "tables.json").write_text(saved)
    command = [str(Path(sys.executable).with_name("jobsched")), "local", "up", "--no-examples", "--tick", "1"]
    done = subprocess.run(
        [*command, "--port", str(free_port()), "--state-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "the local stack did not start: JSONDecodeError" in done.stdout, done.stdout[-2000:]
    assert (tmp_path / "tables.json").read_text() == saved
