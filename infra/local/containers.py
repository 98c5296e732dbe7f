"""The container agent of ``make run``. moto records RunTask and runs nothing, so this plays ECS for the tasks the
scheduler starts (``startedBy`` under the container prefix):

- each task's container runs its command as a local process, with the task definition's environment, the
  run's overrides (``JOBSCHED_*``, the job's own variables, its command) and nothing else of this machine's;
- when the process exits, the task is stopped in moto and its ``ECS Task State Change`` (STOPPED, the exit code,
  ``EssentialContainerExited``) is put on the default bus, where the deployment's rule sends it to the intake,
  as AWS would; AWS's at-least-once delivery is not played here (the tests deliver again);
- what the process writes (stdout and stderr) goes to the container's awslogs stream, as the awslogs driver
  sends it: ``{awslogs-stream-prefix}/{container}/{task id}`` in its ``awslogs-group``, a line an event;
- StopTask (a timeout, a cancel) sends the process SIGTERM, and SIGKILL after the container's stop timeout
  (ECS's default, 30 s), and the state change says ``UserInitiated`` with the reason given.
What is not emulated: images (the command runs on this machine's Python and shell), networking, CPU and memory
limits, and the RUNNING state change (the scheduler does not need it).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.events import CONTAINER_STARTED_BY
from jobsched.core.names import RunEnv

log = logging.getLogger(__name__)

STOP_TIMEOUT = 30.0  # seconds between SIGTERM and SIGKILL (ECS's default stopTimeout)
BASE_ENVIRONMENT = ("PATH", "LANG", "HOME", "TMPDIR", "SYSTEMROOT")  # what any container has; nothing else leaks


@dataclass
class LocalTask:
    arn: str
    cluster: str
    container: str
    process: subprocess.Popen[bytes]
    task: dict[str, Any]
    stopping_since: float | None = None
    stop_reason: str = ""
    shipper: threading.Thread | None = None  # the awslogs driver's part: the process's lines to its stream


@dataclass
class LocalContainerAgent:
    ecs: Any
    events: Any
    logs: Any = None  # CloudWatch Logs (moto's): where awslogs containers' lines go
    running: dict[str, LocalTask] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)
    # (job, run id) -> how its last task ended (stop code, exit code): what a test reads of a stop
    finished: dict[tuple[str, str], tuple[str, int | None]] = field(default_factory=dict)

    def step(self) -> None:
        """Start the tasks RunTask recorded, stop those StopTask marked, report those whose process ended."""
        for cluster in self.ecs.list_clusters().get("clusterArns", []):
            for arn in self._task_arns(cluster, "RUNNING"):
                if arn not in self.running and arn not in self.done:
                    self._start(cluster, arn)
        for local in list(self.running.values()):
            code = local.process.poll()
            if code is not None:
                self._stopped(local, code)
                continue
            if local.stopping_since is None and self._stop_requested(local):
                local.stopping_since = time.monotonic()
                local.process.send_signal(signal.SIGTERM)
            elif local.stopping_since is not None and time.monotonic() - local.stopping_since > STOP_TIMEOUT:
                local.process.kill()

    def _task_arns(self, cluster: str, status: str) -> list[str]:
        found = self.ecs.list_tasks(cluster=cluster, desiredStatus=status).get("taskArns", [])
        return [str(arn) for arn in found]

    def _start(self, cluster: str, arn: str) -> None:
        [task] = self.ecs.describe_tasks(cluster=cluster, tasks=[arn])["tasks"]
        if not str(task.get("startedBy", "")).startswith(CONTAINER_STARTED_BY):
            self.done.add(arn)  # not the scheduler's: nothing to play
            return
        definition = self.ecs.describe_task_definition(taskDefinition=task["taskDefinitionArn"])["taskDefinition"]
        container = definition["containerDefinitions"][0]
        override: dict[str, Any] = next(
            (o for o in task.get("overrides", {}).get("containerOverrides", []) if o.get("name") == container["name"]),
            {},
        )
        command = override.get("command") or container.get("command") or []
        environment = {name: os.environ[name] for name in BASE_ENVIRONMENT if name in os.environ}
        for variable in [*container.get("environment", []), *override.get("environment", [])]:
            environment[str(variable["name"])] = str(variable["value"])
        if not command:
            self.done.add(arn)
            self._report(task, container["name"], None, "TaskFailedToStart", "no command to run locally")
            return
        options = (container.get("logConfiguration") or {}).get("options") or {}
        ships = self.logs is not None and {"awslogs-group", "awslogs-stream-prefix"} <= set(options)
        output = subprocess.PIPE if ships else subprocess.DEVNULL
        process = subprocess.Popen(
            [str(part) for part in command], env=environment, stdout=output, stderr=subprocess.STDOUT
        )
        local = LocalTask(arn, cluster, container["name"], process, task)
        if ships:
            stream = f"{options['awslogs-stream-prefix']}/{container['name']}/{arn.rsplit('/', 1)[-1]}"
            local.shipper = threading.Thread(
                target=self._ship, args=(process, options["awslogs-group"], stream), daemon=True
            )
            local.shipper.start()
        self.running[arn] = local
        log.info("container task %s started: %s", arn.rsplit("/", 1)[-1], " ".join(map(str, command))[:200])

    def _ship(self, process: subprocess.Popen[bytes], group: str, stream: str) -> None:
        """Each line the process writes, as a log event of its stream (the awslogs driver's job)."""
        assert process.stdout is not None
        self.logs.create_log_stream(logGroupName=group, logStreamName=stream)
        for raw in process.stdout:
            event = {"timestamp": int(time.time() * 1000), "message": raw.decode(errors="replace").rstrip("\n")}
            self.logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=[event])

    def _stop_requested(self, local: LocalTask) -> bool:
        [task] = self.ecs.describe_tasks(cluster=local.cluster, tasks=[local.arn])["tasks"]
        if task.get("desiredStatus") == "STOPPED" or task.get("lastStatus") == "STOPPED":
            local.stop_reason = str(task.get("stoppedReason") or "Task stopped by user")
            return True
        return False

    def _stopped(self, local: LocalTask, code: int) -> None:
        del self.running[local.arn]
        if local.shipper is not None:  # its last lines are in the stream before the task is reported stopped
            local.shipper.join(timeout=5)
        self.done.add(local.arn)
        if local.stopping_since is not None:
            stop_code, reason = "UserInitiated", local.stop_reason
        else:
            stop_code, reason = "EssentialContainerExited", "Essential container in task exited"
            self.ecs.stop_task(cluster=local.cluster, task=local.arn, reason=reason)
        self._report(local.task, local.container, code if code >= 0 else 128 - code, stop_code, reason)

    def _report(self, task: dict[str, Any], container: str, code: int | None, stop_code: str, reason: str) -> None:
        """The Task State Change AWS puts on the default bus (its detail is the task, as DescribeTasks has it)."""
        detail = json.loads(json.dumps(task, default=str))
        detail |= {"lastStatus": "STOPPED", "desiredStatus": "STOPPED", "stopCode": stop_code, "stoppedReason": reason}
        detail["containers"] = [{"name": container, "lastStatus": "STOPPED", "exitCode": code}]
        entry = {
            "Source": "aws.ecs",
            "DetailType": "ECS Task State Change",
            "Detail": json.dumps(detail),
            "Resources": [task["taskArn"]],
        }
        self.events.put_events(Entries=[entry])
        named = {
            v["name"]: v["value"]
            for o in task.get("overrides", {}).get("containerOverrides", [])
            for v in o.get("environment", [])
        }
        self.finished[(named.get(RunEnv.JOB, ""), named.get(RunEnv.RUN_ID, ""))] = (stop_code, code)
        log.info("container task %s stopped: exit %s (%s)", task["taskArn"].rsplit("/", 1)[-1], code, stop_code)
