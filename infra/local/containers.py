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

from infra.local.moto_patches import LOCAL_ID_TAG
from jobsched.core.events import CONTAINER_STARTED_BY
from jobsched.core.names import OWNER_TAG, RunEnv

log = logging.getLogger(__name__)

STOP_TIMEOUT = 30.0  # seconds between SIGTERM and SIGKILL (ECS's default stopTimeout)
BASE_ENVIRONMENT = ("PATH", "LANG", "HOME", "TMPDIR", "SYSTEMROOT")  # what any container has; nothing else leaks


def team_network(
    ec2: Any, team: str, *, cidr: str = "10.0.0.0/16", group: str = "", ids: tuple[str, str] | None = None
) -> dict[str, list[str]]:
    """A VPC with a subnet and a security group tagged for ``team``: where its ECS tasks may run (a task runs only
    in its team's subnets and groups, or shared ones). ``ids``: the subnet's and the group's, as job files name
    them (the local moto gives a resource tagged ``jobsched-local-id`` that id)."""
    owned = [{"Key": OWNER_TAG, "Value": team}]
    chosen = [[{"Key": LOCAL_ID_TAG, "Value": wanted}] if ids else [] for wanted in (ids or ("", ""))]
    vpc = ec2.create_vpc(CidrBlock=cidr)["Vpc"]["VpcId"]
    subnet_cidr = cidr.replace(".0.0/16", ".1.0/24")
    subnet = ec2.create_subnet(
        VpcId=vpc, CidrBlock=subnet_cidr, TagSpecifications=[{"ResourceType": "subnet", "Tags": owned + chosen[0]}]
    )["Subnet"]["SubnetId"]
    created = ec2.create_security_group(
        GroupName=group or f"{team}-tasks",
        Description=f"{team}'s tasks",
        VpcId=vpc,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": owned + chosen[1]}],
    )
    return {"subnets": [subnet], "security_groups": [created["GroupId"]]}


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


@dataclass
class LocalBatchJob:
    job: dict[str, Any]
    processes: list[subprocess.Popen[bytes]]
    stopping_since: float | None = None
    stop_reason: str = ""


@dataclass
class LocalBatchAgent:
    """Plays AWS Batch for the jobs the scheduler submits (their name under the container prefix): each job (each
    child of an array job, with ``AWS_BATCH_JOB_ARRAY_INDEX``) runs its container's command as a local process
    with the job's environment; when the processes end, the ``Batch Job State Change`` goes on the default bus
    (SUCCEEDED if every process exited 0, else FAILED with the exit code, as Batch reports an array job by its
    children). TerminateJob (a timeout, a cancel) sends SIGTERM, then SIGKILL after 30 s.
    What is not emulated beyond the ECS agent's list: compute environments and scheduling (a job starts at once),
    and moto's own record of a job that succeeded (it stays RUNNING there: moto has no call to end a job well;
    the scheduler learns the outcome from the state change, as it does in AWS)."""

    batch: Any
    events: Any
    running: dict[str, LocalBatchJob] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)
    finished: dict[tuple[str, str], tuple[str, int | None]] = field(default_factory=dict)

    def step(self) -> None:
        """Start the jobs SubmitJob recorded, stop those TerminateJob ended, report those whose processes ended."""
        for summary in self._submitted():
            job_id = str(summary["jobId"])
            if str(summary.get("jobName", "")).startswith(CONTAINER_STARTED_BY):
                self._start(job_id)
            else:
                self.done.add(job_id)  # not the scheduler's: nothing to play
        for job_id, local in list(self.running.items()):
            codes = [process.poll() for process in local.processes]
            if all(code is not None for code in codes):
                self._ended(job_id, local, [code for code in codes if code is not None])
                continue
            if local.stopping_since is None and self._terminated(job_id, local):
                local.stopping_since = time.monotonic()
                for process in local.processes:
                    if process.poll() is None:
                        process.send_signal(signal.SIGTERM)
            elif local.stopping_since is not None and time.monotonic() - local.stopping_since > STOP_TIMEOUT:
                for process in local.processes:
                    process.kill()

    def _submitted(self) -> list[dict[str, Any]]:
        found = []
        for queue in self.batch.describe_job_queues().get("jobQueues", []):
            listed = self.batch.list_jobs(jobQueue=queue["jobQueueName"], jobStatus="RUNNING")
            found += [
                summary
                for summary in listed.get("jobSummaryList", [])
                if summary["jobId"] not in self.running
                and summary["jobId"] not in self.done
                and ":" not in summary["jobId"]
            ]
        return found

    def _start(self, job_id: str) -> None:
        [job] = self.batch.describe_jobs(jobs=[job_id])["jobs"]
        container = job.get("container") or {}
        environment = {name: os.environ[name] for name in BASE_ENVIRONMENT if name in os.environ}
        for variable in container.get("environment") or []:
            environment[str(variable["name"])] = str(variable["value"])
        command = [str(part) for part in container.get("command") or []]
        size = int((job.get("arrayProperties") or {}).get("size") or 0)
        if not command:
            self.done.add(job_id)
            self._report(job, "FAILED", None, "no command to run locally")
            return
        processes = [
            subprocess.Popen(
                command,
                env=environment | ({"AWS_BATCH_JOB_ARRAY_INDEX": str(index)} if size else {}),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for index in range(size or 1)
        ]
        self.running[job_id] = LocalBatchJob(job, processes)
        log.info("batch job %s started (%d processes): %s", job_id, len(processes), " ".join(command)[:200])

    def _terminated(self, job_id: str, local: LocalBatchJob) -> bool:
        [job] = self.batch.describe_jobs(jobs=[job_id])["jobs"]
        if job.get("status") == "FAILED":  # TerminateJob ended it (moto, as patched, fails it at once)
            local.stop_reason = str(job.get("statusReason") or "Terminated by user")
            return True
        return False

    def _ended(self, job_id: str, local: LocalBatchJob, codes: list[int]) -> None:
        del self.running[job_id]
        self.done.add(job_id)
        codes = [code if code >= 0 else 128 - code for code in codes]
        failed = [code for code in codes if code != 0]
        if local.stopping_since is not None:
            self._report(local.job, "FAILED", failed[0] if failed else None, local.stop_reason)
        elif failed:
            reason = "Essential container in task exited"
            self.batch.terminate_job(jobId=job_id, reason=reason)  # moto's record: FAILED too
            self._report(local.job, "FAILED", failed[0], reason, failures=len(failed), size=len(codes))
        else:
            self._report(local.job, "SUCCEEDED", 0, "", size=len(codes))

    def _report(
        self, job: dict[str, Any], status: str, code: int | None, reason: str, *, failures: int = 0, size: int = 1
    ) -> None:
        """The Batch Job State Change AWS puts on the default bus (its detail is the job, as DescribeJobs has it)."""
        detail = json.loads(json.dumps(job, default=str)) | {"status": status, "statusReason": reason}
        detail["container"] = (detail.get("container") or {}) | {"exitCode": code}
        if (job.get("arrayProperties") or {}).get("size"):
            detail["arrayProperties"] = {
                "size": size,
                "statusSummary": {"SUCCEEDED": size - failures, "FAILED": failures},
            }
        entry = {
            "Source": "aws.batch",
            "DetailType": "Batch Job State Change",
            "Detail": json.dumps(detail),
            "Resources": [job.get("jobArn", "")],
        }
        self.events.put_events(Entries=[entry])
        named = {v["name"]: v["value"] for v in (job.get("container") or {}).get("environment") or []}
        self.finished[(named.get(RunEnv.JOB, ""), named.get(RunEnv.RUN_ID, ""))] = (status, code)
        log.info("batch job %s ended: %s (exit %s)", job.get("jobId"), status, code)
